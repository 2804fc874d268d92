#!/usr/bin/env python3
"""Generator efficiency: headroom vs wrk against nginx on loopback.

nginx is pinned to CPU 0, the generator to CPU 1. headroom and wrk run one
after the other, interleaved, several rounds. For each run we take the
generator's own CPU time (user + system, from wait4's rusage) and the
requests it completed, and print requests per generator CPU-second and the
ratio headroom / wrk (median over rounds). Counts are checked against
nginx's own request counter (stub_status), which costs nginx nothing per
request; --access-log checks them against its access log instead, which
makes nginx ~10 % slower, so that both generators wait on it (the faster
one more often, with a wakeup per few responses).

Usage: bench/vs_wrk.py [--rounds 5] [--duration 10] [--connections 50]
                       [--headroom target/release/headroom] [--out DIR]
                       [--access-log] [--baseline PATH] [--tls] [--no-keepalive]
  --tls            HTTPS: nginx with a self-signed certificate (made here
                   by openssl), neither generator verifying it (wrk never
                   does; headroom with --insecure); TLS 1.3 both
  --no-keepalive   a new connection per request (headroom --no-keepalive,
                   wrk with a `Connection: close` header: it reconnects when
                   nginx closes); with --tls, a handshake per request
  --baseline PATH  an earlier headroom build, run in the same rounds: a
                   change measured against the build before it, both
                   against wrk, on the same host minutes apart (the host's
                   speed drifts by tens of percent between runs here)
"""
import urllib.request
import argparse, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start_nginx(d, port, access_log, tls):
    ssl = ""
    if tls:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", f"{d}/key.pem",
                        "-out", f"{d}/cert.pem"], check=True, capture_output=True)
        ssl = f"; ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; ssl_protocols TLSv1.3"
    conf = f"""{'user root;' if os.geteuid() == 0 else ''}
worker_processes 1;
worker_rlimit_nofile 30000;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 20000; }}
http {{
  access_log {f"{d}/access.log" if access_log else "off"};
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port}{" ssl" if tls else ""} backlog=4096{ssl};
             location / {{ return 200 "hello from nginx\\n"; }}
             location = /nginx-status {{ stub_status; }} }}
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

tls_on = False

def served_so_far(d, port, access_log):
    """Requests nginx has served: its access log's lines, or its request
    counter (which counts each status request, this one included)."""
    if access_log:
        return log_lines(d)
    import ssl
    scheme = "https" if tls_on else "http"
    text = urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/nginx-status", timeout=5,
                                  context=ssl._create_unverified_context()).read().decode()
    return int(re.search(r"\n\s*\d+\s+\d+\s+(\d+)", text).group(1))

def log_lines(d):
    try:
        with open(f"{d}/access.log") as f: return sum(1 for _ in f)
    except FileNotFoundError: return 0

def measured(cmd):
    """Runs cmd, returns (stdout, cpu seconds of the process tree, wall s)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    r = resource_of(p)
    if p.returncode != 0:
        sys.exit(f"{cmd[0:4]} failed ({p.returncode}): {err}")
    return out, r, wall

_last_rusage = {}
def resource_of(p):
    # Popen reaps via waitpid; use RUSAGE_CHILDREN deltas instead.
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    prev = _last_rusage.get("v", (0.0, 0.0))
    cur = (ru.ru_utime, ru.ru_stime)
    _last_rusage["v"] = cur
    return (cur[0] - prev[0]) + (cur[1] - prev[1])

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--out", default=None, help="folder for raw.csv and summary")
    ap.add_argument("--baseline", default=None, help="an earlier headroom build to run in the same rounds")
    ap.add_argument("--access-log", action="store_true",
                    help="count served requests from nginx's access log (slows nginx)")
    ap.add_argument("--tls", action="store_true", help="HTTPS (a self-signed certificate, not verified)")
    ap.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    a = ap.parse_args()
    global tls_on
    tls_on = a.tls
    for tool in ("nginx", "wrk", "taskset"):
        if not shutil.which(tool): sys.exit(f"{tool} not found: apt-get install -y nginx-light wrk util-linux")
    d = tempfile.mkdtemp(prefix="headroom-bench-")
    port = free_port(); url = f"{'https' if a.tls else 'http'}://127.0.0.1:{port}/"
    nginx = start_nginx(d, port, a.access_log, a.tls)
    import resource; ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    _last_rusage["v"] = (ru.ru_utime, ru.ru_stime)
    tools = ("wrk", "headroom") + (("baseline",) if a.baseline else ())
    rows = []
    try:
        for rnd in range(1, a.rounds + 1):
            for tool in tools:
                before = served_so_far(d, port, a.access_log)
                if tool == "wrk":
                    cmd = ["taskset", "-c", "1", "wrk", "-t1", f"-c{a.connections}", f"-d{a.duration}s", url]
                    if a.no_keepalive:
                        cmd[4:4] = ["-H", "Connection: close"]
                    out, cpu, wall = measured(cmd)
                    m = re.search(r"(\d+) requests in", out)
                    reqs = int(m.group(1))
                else:
                    res = os.path.join(d, "r.json")
                    binary = a.headroom if tool == "headroom" else a.baseline
                    cmd = ["taskset", "-c", "1", binary, "run", "--url", url, "-c", str(a.connections),
                           "-d", f"{a.duration}s", "--threads", "1", "--quiet", "--out", res]
                    cmd += ["--insecure"] if a.tls else []
                    cmd += ["--no-keepalive"] if a.no_keepalive else []
                    out, cpu, wall = measured(cmd)
                    reqs = json.load(open(res))["requests"]["total"]
                time.sleep(0.3)
                # Less the status request that read `before`, when counted.
                served = served_so_far(d, port, a.access_log) - before - (0 if a.access_log else 1)
                rows.append(dict(round=rnd, tool=tool, requests=reqs, served=served, cpu_s=cpu, wall_s=wall,
                                 per_cpu_s=reqs / cpu if cpu else 0.0, rps=reqs / wall))
                r = rows[-1]
                print(f"round {rnd} {tool:9s} {reqs:9d} req (server saw {served:9d})  cpu {cpu:6.2f} s  "
                      f"{r['per_cpu_s']:10.0f} req/cpu-s  {r['rps']:9.0f} req/s", flush=True)
    finally:
        nginx.send_signal(signal.SIGQUIT); nginx.wait(timeout=10)
    med = {t: statistics.median(r["per_cpu_s"] for r in rows if r["tool"] == t) for t in tools}
    of = lambda tool: [r["per_cpu_s"] for r in rows if r["tool"] == tool]
    ratios = [h / w for h, w in zip(of("headroom"), of("wrk"))]
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    hr_v = subprocess.run([a.headroom, "--version"], capture_output=True, text=True).stdout.strip()
    counted = "nginx's access log" if a.access_log else "nginx's request counter"
    how = ("HTTPS (TLS 1.3)" if a.tls else "HTTP") + (", a new connection per request" if a.no_keepalive else ", keep-alive")
    summary = (f"{hr_v} vs {wrk_v}; {how}; {a.connections} connections, {a.duration} s x {a.rounds} rounds; nginx on CPU 0, generator on CPU 1; counts from {counted}\n"
               f"requests per generator CPU-second (median): headroom {med['headroom']:.0f}, wrk {med['wrk']:.0f}\n"
               f"ratio headroom/wrk: median {statistics.median(ratios):.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})\n"
               f"counts: headroom totals equal {counted} in {sum(r['requests']==r['served'] for r in rows if r['tool']=='headroom')}/{a.rounds} rounds")
    if a.baseline:
        base = [h / w for h, w in zip(of("baseline"), of("wrk"))]
        gain = [h / b for h, b in zip(of("headroom"), of("baseline"))]
        summary += (f"\nbaseline {a.baseline}: {med['baseline']:.0f} req/cpu-s, ratio baseline/wrk: median {statistics.median(base):.3f}"
                    f" (rounds: {', '.join(f'{x:.3f}' for x in base)})\n"
                    f"headroom/baseline: median {statistics.median(gain):.3f} (rounds: {', '.join(f'{x:.3f}' for x in gain)})")
    print(summary)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "raw.csv"), "w") as f:
            f.write("round,tool,requests,served,cpu_s,wall_s,per_cpu_s,rps\n")
            for r in rows:
                f.write(f"{r['round']},{r['tool']},{r['requests']},{r['served']},{r['cpu_s']:.3f},{r['wall_s']:.3f},{r['per_cpu_s']:.1f},{r['rps']:.1f}\n")
        open(os.path.join(a.out, "summary"), "w").write(summary + "\n")
    shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    main()
