#!/usr/bin/env python3
"""What the live dashboard costs the generator: `headroom run` against nginx
(one worker, pinned to CPU 0; the generator pinned to CPU 1), with and
without `--dashboard` and a browser's event stream open on it, interleaved
rounds. For each run: requests completed and the generator's CPU time
(user + system, from wait4); printed: requests per generator CPU-second
(median over rounds) of both, and the dashboard's cost as the share of
generator CPU it adds per request (target: < 1 %).

`--option trace` measures `--trace` the same way instead: every request
then carries a fresh traceparent (two random IDs, 55 bytes written into
its head) and the slowest are kept as exemplars. `--option build --other
BIN` measures another build of headroom against `--headroom` (e.g. the
README's quick profile against the release build).

Usage: bench/dashboard_overhead.py [--rounds 5] [--duration 10]
                                   [--connections 50] [--option dashboard|trace|build]
                                   [--headroom target/release/headroom] [--other BIN]
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, threading, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start_nginx(d, port):
    conf = f"""{'user root;' if os.geteuid() == 0 else ''}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 20000; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port} backlog=4096; location / {{ return 200 "hello from nginx\\n"; }} }}
}}
"""
    open(f"{d}/nginx.conf", "w").write(conf)
    p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", d, "-c", f"{d}/nginx.conf"],
                         stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close(); return p
        except OSError:
            time.sleep(0.05)
    p.kill(); sys.exit("nginx did not start")

def watch(port, seconds):
    """A browser's event stream: connects once the dashboard listens,
    reads until the run ends. Returns the events it read."""
    deadline = time.time() + seconds + 30
    while time.time() < deadline:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1); break
        except OSError:
            time.sleep(0.05)
    else:
        return 0
    s.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    s.settimeout(seconds + 30)
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.count(b"data: ")

def one(a, url, on, d):
    out = f"{d}/r.json"
    binary = a.other if on and a.option == "build" else a.headroom
    cmd = ["taskset", "-c", "1", binary, "run", "--url", url, "--vus", str(a.connections),
           "-d", f"{a.duration}s", "--threads", "1", "--quiet", "--out", out]
    events = [0]
    watcher = None
    if on and a.option == "trace":
        cmd.append("--trace")
    dashboard = on and a.option == "dashboard"
    if dashboard:
        port = free_port()
        cmd.append(f"--dashboard=127.0.0.1:{port}")
        watcher = threading.Thread(target=lambda: events.__setitem__(0, watch(port, a.duration)))
        watcher.start()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if watcher:
        watcher.join()
    cpu = usage.ru_utime + usage.ru_stime
    r = json.load(open(out))
    return r["requests"]["ok"], cpu, events[0]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--option", choices=["dashboard", "trace", "build"], default="dashboard")
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--other", help="with --option build: the other binary")
    a = ap.parse_args()
    if a.option == "build" and not a.other:
        ap.error("--option build needs --other BIN")
    d = tempfile.mkdtemp(prefix="headroom-dash-")
    for sub in ("body", "proxy", "fcgi", "uwsgi", "scgi"):
        os.makedirs(f"{d}/{sub}", exist_ok=True)
    port = free_port()
    nginx = start_nginx(d, port)
    url = f"http://127.0.0.1:{port}/"
    rates = {False: [], True: []}
    try:
        for i in range(a.rounds):
            for on in (False, True) if i % 2 == 0 else (True, False):
                ok, cpu, events = one(a, url, on, d)
                rate = ok / cpu
                rates[on].append(rate)
                label = f"{a.option:9}" if on else "plain    "
                seen = f"  {events} events read" if on and a.option == "dashboard" else ""
                print(f"round {i + 1} {label} {ok:>9} req  cpu {cpu:6.2f} s  {rate:>9.0f} req/cpu-s  "
                      f"{ok / a.duration:>8.0f} req/s{seen}", flush=True)
    finally:
        nginx.terminate(); nginx.wait()
    plain, on = statistics.median(rates[False]), statistics.median(rates[True])
    what = {"dashboard": "with the dashboard watched", "trace": "with --trace",
            "build": f"{a.other}"}[a.option]
    print(f"median requests per generator CPU-second: plain {plain:.0f}, {what} {on:.0f}; "
          f"its cost: {(plain / on - 1) * 100:+.2f} % of generator CPU per request "
          f"(rounds of {a.duration} s, {a.connections} users)")

if __name__ == "__main__":
    main()
