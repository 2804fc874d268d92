#!/usr/bin/env python3
"""HTTP/2 generator efficiency: headroom vs h2load (nghttp2, the C
reference) and oha --http2, against nginx over TLS (ALPN h2) and h2c.

nginx (one worker) is pinned to CPU 0, the generator to CPU 1. For each
point — connections x streams per connection, over TLS and h2c — the three
tools run one after the other, interleaved, several rounds. For each run:
the requests it completed, its own CPU time (user + system) and peak RSS
(CPU from wait4, RSS from /proc's VmHWM), and nginx's count of what it served (stub_status). Printed:
requests per generator CPU-second (median over rounds), the ratios
headroom/h2load and headroom/oha, and headroom's peak RSS per open stream.

Closed loops on all three: headroom `--connections C --streams M` runs
C x M users, each with one stream in flight, as h2load's `-c C -m M` and
oha's `-c C -p M` (C connections, M requests in parallel on each).

Usage: bench/h2.py [--rounds 3] [--duration 5] [--points 1x1,10x10,...]
                   [--headroom target/release/headroom] [--oha PATH]
                   [--out DIR]
Needs: nginx (nginx-light), h2load (nghttp2-client), oha (cargo install
--locked oha; skipped with a note when absent), taskset, openssl.
"""
import argparse, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

POINTS = [f"{c}x{m}" for c in (1, 10, 100) for m in (1, 10, 100)]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start_nginx(d, tls_port, clear_port, status_port):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.pem", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    conf = f"""{'user root;' if os.geteuid() == 0 else ''}
worker_processes 1;
worker_rlimit_nofile 30000;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 20000; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 10000000;
  http2_max_requests 10000000;
  http2_max_concurrent_streams 128;
  server {{
    listen 127.0.0.1:{tls_port} ssl http2 backlog=4096;
    listen 127.0.0.1:{clear_port} http2 backlog=4096;
    ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;
    location / {{ return 200 "hello from nginx\\n"; }}
  }}
  server {{ listen 127.0.0.1:{status_port}; location / {{ stub_status; }} }}
}}
"""
    open(f"{d}/nginx.conf", "w").write(conf)
    p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", d, "-c", f"{d}/nginx.conf"],
                         stderr=subprocess.DEVNULL)
    for port in (tls_port, clear_port, status_port):
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close(); break
            except OSError:
                time.sleep(0.05)
        else:
            p.kill(); sys.exit("nginx did not start")
    return p


def served(status_port):
    """Requests nginx has served (its counter counts this status request)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{status_port}/", timeout=5).read().decode()
    return int(re.search(r"\n\s*\d+\s+\d+\s+(\d+)", text).group(1))


def measured(cmd, d):
    """Runs cmd; returns (stdout, cpu seconds, peak RSS KiB, wall s)."""
    out_path = f"{d}/out.txt"
    t0 = time.monotonic()
    with open(out_path, "w") as out, open(f"{d}/err.txt", "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        # Peak RSS from /proc (VmHWM of the program exec'd): wait4's
        # ru_maxrss keeps the forked Python's before the exec.
        peak = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    hwm = [l for l in f if l.startswith("VmHWM:")]
                peak = max(peak, int(hwm[0].split()[1])) if hwm else peak
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {open(f'{d}/err.txt').read()[-2000:]}")
    return open(out_path).read(), ru.ru_utime + ru.ru_stime, peak, wall


def command(tool, a, url, c, m, d):
    pin = ["taskset", "-c", "1"]
    if tool == "headroom":
        tls = ["--insecure"] if url.startswith("https") else []
        return pin + [a.headroom, "run", "--url", url, "--http2", "--connections", str(c),
                      "--streams", str(m), "-d", f"{a.duration}s", "--threads", "1",
                      "--quiet", "--out", f"{d}/r.json"] + tls
    if tool == "h2load":
        return pin + ["h2load", "-t", "1", "-c", str(c), "-m", str(m), "-D", str(a.duration), url]
    return pin + [a.oha, "--http2", "-c", str(c), "-p", str(m), "-z", f"{a.duration}s",
                  "--insecure", "--no-tui", "--output-format", "json", url]


def completed(tool, out, d):
    if tool == "headroom":
        return json.load(open(f"{d}/r.json"))["requests"]["total"]
    if tool == "h2load":
        return int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    summary = json.loads(out)
    codes = summary.get("statusCodeDistribution", {})
    return sum(codes.values()) + sum(summary.get("errorDistribution", {}).values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--points", default=",".join(POINTS), help="CONNECTIONSxSTREAMS,...")
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--oha", default=shutil.which("oha") or os.path.expanduser("~/.cargo/bin/oha"))
    ap.add_argument("--out", default=None, help="folder for raw.csv and summary")
    a = ap.parse_args()
    for tool in ("nginx", "h2load", "taskset", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install -y nginx-light nghttp2-client util-linux openssl")
    tools = ["headroom", "h2load"] + (["oha"] if os.path.exists(a.oha) else [])
    if "oha" not in tools:
        print(f"oha not found at {a.oha}: cargo install --locked oha; measuring without it")
    d = tempfile.mkdtemp(prefix="headroom-bench-h2-")
    tls_port, clear_port, status_port = free_port(), free_port(), free_port()
    nginx = start_nginx(d, tls_port, clear_port, status_port)
    points = [tuple(int(x) for x in p.split("x")) for p in a.points.split(",")]
    rows = []
    try:
        for rnd in range(1, a.rounds + 1):
            for scheme, port in (("tls", tls_port), ("h2c", clear_port)):
                url = f"{'https' if scheme == 'tls' else 'http'}://127.0.0.1:{port}/"
                for c, m in points:
                    for tool in tools:
                        before = served(status_port)
                        out, cpu, rss, wall = measured(command(tool, a, url, c, m, d), d)
                        reqs = completed(tool, out, d)
                        time.sleep(0.3)
                        saw = served(status_port) - before - 1
                        rows.append(dict(round=rnd, scheme=scheme, c=c, m=m, tool=tool, requests=reqs,
                                         served=saw, cpu_s=cpu, rss_kib=rss, wall_s=wall,
                                         per_cpu_s=reqs / cpu if cpu else 0.0))
                        print(f"round {rnd} {scheme} {c:3d}x{m:<3d} {tool:8s} {reqs:9d} req "
                              f"(nginx {saw:9d})  cpu {cpu:6.2f} s  {reqs / cpu if cpu else 0:9.0f} "
                              f"req/cpu-s  rss {rss / 1024:6.1f} MiB", flush=True)
    finally:
        nginx.send_signal(signal.SIGQUIT); nginx.wait(timeout=10)

    def median(scheme, c, m, tool, key="per_cpu_s"):
        values = [r[key] for r in rows if (r["scheme"], r["c"], r["m"], r["tool"]) == (scheme, c, m, tool)]
        return statistics.median(values) if values else float("nan")

    h2load_v = subprocess.run(["h2load", "--version"], capture_output=True, text=True).stdout.strip()
    hr_v = subprocess.run([a.headroom, "--version"], capture_output=True, text=True).stdout.strip()
    lines = [f"{hr_v} vs {h2load_v}" + (" and oha" if "oha" in tools else "") +
             f"; {a.duration} s x {a.rounds} rounds per point; nginx (1 worker) on CPU 0, generator on CPU 1",
             "requests per generator CPU-second (median); ratio = headroom / peer; peak RSS in MiB "
             "(median) of headroom / h2load / oha",
             f"{'':4s} {'c x m':>8s} {'headroom':>10s} {'h2load':>10s} {'oha':>10s} {'vs h2load':>9s} "
             f"{'vs oha':>7s} {'RSS MiB':>20s}"]
    for scheme in ("tls", "h2c"):
        for c, m in points:
            h = median(scheme, c, m, "headroom")
            n = median(scheme, c, m, "h2load")
            o = median(scheme, c, m, "oha")
            rss = "/".join(f"{median(scheme, c, m, t, 'rss_kib') / 1024:.1f}"
                           for t in ("headroom", "h2load", "oha"))
            lines.append(f"{scheme:4s} {f'{c}x{m}':>8s} {h:10.0f} {n:10.0f} {o:10.0f} {h / n:9.2f} "
                         f"{h / o:7.2f} {rss:>20s}")
    exact = sum(r["requests"] == r["served"] for r in rows if r["tool"] == "headroom")
    lines.append(f"counts: headroom's totals equal nginx's in {exact}/{sum(r['tool'] == 'headroom' for r in rows)} runs")
    summary = "\n".join(lines)
    print(summary)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "raw.csv"), "w") as f:
            f.write("round,scheme,connections,streams,tool,requests,served,cpu_s,rss_kib,wall_s,per_cpu_s\n")
            for r in rows:
                f.write(f"{r['round']},{r['scheme']},{r['c']},{r['m']},{r['tool']},{r['requests']},{r['served']},"
                        f"{r['cpu_s']:.3f},{r['rss_kib']},{r['wall_s']:.3f},{r['per_cpu_s']:.1f}\n")
        open(os.path.join(a.out, "summary"), "w").write(summary + "\n")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
