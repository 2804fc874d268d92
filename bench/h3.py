#!/usr/bin/env python3
"""HTTP/3 generator efficiency: headroom's HTTP/3 against its own HTTP/2
and HTTP/1.1 and against oha's HTTP/3, all against one Caddy (HTTP/1.1, 2
and 3 on one port, TLS with a certificate made here).

Caddy (GOMAXPROCS=1) is pinned to CPU 0, the generator to CPU 1. For each
point — connections x streams per connection — every tool runs once per
round, interleaved. For each run: the requests it completed, its own CPU
time (user + system) and peak RSS, and Caddy's count of what it served
(`caddy_http_requests_total` from its metrics). Printed: requests per
generator CPU-second (median over rounds), headroom's HTTP/3 over its own
HTTP/2 and over oha's HTTP/3, and whether every headroom total equalled
Caddy's count.

Closed loops: headroom `--connections C --streams M` runs C x M users, each
with one stream in flight, as oha's `-c C -p M`. HTTP/1.1 has no streams:
C x M connections, one request in flight on each.

Usage: bench/h3.py [--rounds 3] [--duration 5] [--points 1x10,10x10]
                   [--headroom target/release/headroom] [--caddy PATH]
                   [--oha PATH] [--out DIR]
Needs: Caddy (.ci/quic-peers.sh builds it into ~/.cache/headroom), oha
built with HTTP/3 (`cargo install --locked oha --features http3 --root
~/.cache/headroom/oha-http3`; skipped with a note when absent), taskset,
openssl.
"""
import argparse, importlib.util, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

# The shared pieces of bench/h2.py (a run measured, a free port).
_spec = importlib.util.spec_from_file_location("bench_h2", os.path.join(os.path.dirname(__file__), "h2.py"))
bench_h2 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_h2)

CACHE = os.path.expanduser("~/.cache/headroom")
POINTS = ["1x10", "10x10", "10x100"]
TOOLS = ["headroom-h3", "headroom-h2", "headroom-h1", "oha-h3"]


def start_caddy(caddy, d, port, admin_port):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.pem", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    conf = f"""{{
	admin 127.0.0.1:{admin_port}
	auto_https off
	storage file_system {d}/storage
	metrics
	servers {{
		protocols h1 h2 h3
	}}
}}
https://127.0.0.1:{port} {{
	tls {d}/cert.pem {d}/key.pem
	respond "hello from caddy" 200
}}
"""
    open(f"{d}/Caddyfile", "w").write(conf)
    env = dict(os.environ, GOMAXPROCS="1", HOME=d, XDG_DATA_HOME=d, XDG_CONFIG_HOME=d)
    p = subprocess.Popen(["taskset", "-c", "0", caddy, "run", "--adapter", "caddyfile", "--config",
                          f"{d}/Caddyfile"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            served(admin_port)
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit("caddy did not start")


def served(admin_port):
    """Requests Caddy has served (all protocols)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read().decode()
    return int(sum(float(m) for m in re.findall(r'^caddy_http_requests_total\{[^}]*\} (\S+)$', text, re.M)))


def command(tool, a, url, c, m, d):
    pin = ["taskset", "-c", "1"]
    if tool.startswith("headroom"):
        proto = {"headroom-h3": ["--http3", "--connections", str(c), "--streams", str(m)],
                 "headroom-h2": ["--http2", "--connections", str(c), "--streams", str(m)],
                 "headroom-h1": ["--vus", str(c * m)]}[tool]
        return pin + [a.headroom, "run", "--url", url, *proto, "-d", f"{a.duration}s", "--threads", "1",
                      "--insecure", "--quiet", "--out", f"{d}/r.json"]
    return pin + [a.oha, "--http-version", "3", "-c", str(c), "-p", str(m), "-z", f"{a.duration}s", "--insecure",
                  "--no-tui", "--output-format", "json", url]


def completed(tool, out, d):
    """Requests a run completed, read as bench/h2.py reads them."""
    return bench_h2.completed("headroom" if tool.startswith("headroom") else "oha", out, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--points", default=",".join(POINTS), help="CONNECTIONSxSTREAMS,...")
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--caddy", default=f"{CACHE}/caddy-2.11.9/caddy")
    ap.add_argument("--oha", default=f"{CACHE}/oha-http3/bin/oha")
    ap.add_argument("--out", default=None, help="folder for raw.csv and summary")
    a = ap.parse_args()
    for tool in ("taskset", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    if not os.path.exists(a.caddy):
        sys.exit(f"caddy not found at {a.caddy}: run .ci/quic-peers.sh")
    tools = [t for t in TOOLS if t != "oha-h3" or os.path.exists(a.oha)]
    if "oha-h3" not in tools:
        print(f"oha not found at {a.oha}: cargo install --locked oha --features http3 "
              f"--root {CACHE}/oha-http3; measuring without it")
    d = tempfile.mkdtemp(prefix="headroom-bench-h3-")
    port, admin_port = bench_h2.free_port(), bench_h2.free_port()
    caddy = start_caddy(a.caddy, d, port, admin_port)
    url = f"https://127.0.0.1:{port}/"
    points = [tuple(int(x) for x in p.split("x")) for p in a.points.split(",")]
    rows = []
    try:
        for rnd in range(1, a.rounds + 1):
            for c, m in points:
                for tool in tools:
                    before = served(admin_port)
                    out, cpu, rss, wall = bench_h2.measured(command(tool, a, url, c, m, d), d)
                    reqs = completed(tool, out, d)
                    time.sleep(0.3)
                    saw = served(admin_port) - before
                    rows.append(dict(round=rnd, c=c, m=m, tool=tool, requests=reqs, served=saw, cpu_s=cpu,
                                     rss_kib=rss, wall_s=wall, per_cpu_s=reqs / cpu if cpu else 0.0))
                    print(f"round {rnd} {c:3d}x{m:<3d} {tool:12s} {reqs:9d} req (caddy {saw:9d})  "
                          f"cpu {cpu:6.2f} s  {reqs / cpu if cpu else 0:9.0f} req/cpu-s  "
                          f"rss {rss / 1024:6.1f} MiB", flush=True)
    finally:
        caddy.send_signal(signal.SIGTERM); caddy.wait(timeout=10)

    def median(c, m, tool, key="per_cpu_s"):
        values = [r[key] for r in rows if (r["c"], r["m"], r["tool"]) == (c, m, tool)]
        return statistics.median(values) if values else float("nan")

    hr_v = subprocess.run([a.headroom, "--version"], capture_output=True, text=True).stdout.strip()
    # A `go install` build says `unknown` for its version: the folder
    # .ci/quic-peers.sh put it in names it.
    caddy_v = os.path.basename(os.path.dirname(os.path.abspath(a.caddy)))
    oha_v = (subprocess.run([a.oha, "--version"], capture_output=True, text=True).stdout.strip()
             if "oha-h3" in tools else "no oha")
    lines = [f"{hr_v}, {oha_v} (HTTP/3), {caddy_v}; {a.duration} s x {a.rounds} rounds per point; "
             "Caddy (GOMAXPROCS=1) on CPU 0, generator on CPU 1",
             "requests per generator CPU-second (median); h3/h2 = headroom's HTTP/3 over its own HTTP/2",
             f"{'c x m':>8s} {'hr h3':>9s} {'hr h2':>9s} {'hr h1.1':>9s} {'oha h3':>9s} {'h3/h2':>6s} "
             f"{'h3 vs oha':>9s} {'RSS MiB h3/h2/oha':>18s}"]
    for c, m in points:
        h3, h2, h1, oha = (median(c, m, t) for t in TOOLS)
        rss = "/".join(f"{median(c, m, t, 'rss_kib') / 1024:.1f}" for t in ("headroom-h3", "headroom-h2", "oha-h3"))
        lines.append(f"{f'{c}x{m}':>8s} {h3:9.0f} {h2:9.0f} {h1:9.0f} {oha:9.0f} {h3 / h2:6.2f} "
                     f"{h3 / oha:9.2f} {rss:>18s}")
    ours = [r for r in rows if r["tool"].startswith("headroom")]
    exact = sum(r["requests"] == r["served"] for r in ours)
    lines.append(f"counts: headroom's totals equal Caddy's in {exact}/{len(ours)} runs")
    summary = "\n".join(lines)
    print(summary)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "raw.csv"), "w") as f:
            f.write("round,connections,streams,tool,requests,served,cpu_s,rss_kib,wall_s,per_cpu_s\n")
            for r in rows:
                f.write(",".join(str(r[k]) for k in ("round", "c", "m", "tool", "requests", "served", "cpu_s",
                                                      "rss_kib", "wall_s", "per_cpu_s")) + "\n")
        with open(os.path.join(a.out, "summary"), "w") as f:
            f.write(summary + "\n")


if __name__ == "__main__":
    main()
