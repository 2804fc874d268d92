#!/usr/bin/env python3
"""Open-model accuracy at high rates: headroom asked for R requests per
second against nginx on loopback — how close is the achieved rate, how late
do requests go out (send lag: actual send time minus intended), and how
much of a core does the generator use?

nginx (worker_processes from --nginx-workers) runs on CPU 0, headroom on
CPU 1 with one thread, so the generator's limit shows as CPU near 100 %
and lag growing, the server's as achieved < offered with the generator's
CPU to spare. Each rate runs --rounds times; the median round is printed.
The two cores' busy time (from /proc/stat: user, system and the kernel's
interrupt work — loopback TCP's softirq lands on the sending core, and the
process's own CPU time leaves it out) shows when the machine itself is full.

Each rate runs on each of `--engines` (auto: the event loop; tasks: a
tokio task per connection), so the two paths are compared in one run.

Usage: bench/open_rates.py [--rates 20000,50000,100000] [--duration 10]
         [--rounds 3] [--engines auto,tasks] [--headroom target/release/headroom] [--out DIR]
"""
import argparse, json, os, resource, shutil, socket, statistics, subprocess, sys, tempfile, time

NGINX = """{user}
worker_processes {workers};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
worker_rlimit_nofile 30000;
events {{ worker_connections 20000; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port} backlog=4096; location / {{ return 200 "hello from nginx\\n"; }} }}
}}
"""


def core_ticks():
    """Busy and all ticks of CPU 0 and CPU 1, from /proc/stat."""
    out = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0] in ("cpu0", "cpu1"):
            t = [int(x) for x in f[1:9]]
            out[f[0]] = (sum(t) - t[3] - t[4], sum(t))
    return out


def busy_pct(before, after, cpu):
    (b0, t0), (b1, t1) = before[cpu], after[cpu]
    return 100.0 * (b1 - b0) / max(1, t1 - t0)


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="20000,50000,100000")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--engines", default="auto,tasks")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="headroom-open-")
    port = free_port()
    with open(f"{d}/nginx.conf", "w") as f:
        f.write(NGINX.format(d=d, port=port, workers=a.nginx_workers,
                             user="user root;" if os.geteuid() == 0 else ""))
    nginx = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", d, "-c", f"{d}/nginx.conf"],
                             stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close(); break
        except OSError:
            time.sleep(0.05)
    rows = []
    try:
        runs = [(int(r), e) for r in a.rates.split(",") for e in a.engines.split(",")]
        for rate, engine in runs:
            for rnd in range(1, a.rounds + 1):
                res = os.path.join(d, "r.json")
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                ticks = core_ticks()
                p = subprocess.run(["taskset", "-c", "1", a.headroom, "run", f"http://127.0.0.1:{port}/",
                                    "--rate", str(rate), "-d", f"{a.duration}s", "--threads", "1",
                                    "--engine", engine, "--quiet", "--out", res],
                                   capture_output=True, text=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                ticks_after = core_ticks()
                if p.returncode not in (0, 1):
                    sys.exit(f"headroom failed: {p.stderr}")
                r = json.load(open(res))
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                planned = rate * a.duration
                sent = r["requests"]["total"]
                lag = r.get("send_lag_ms") or {}
                row = dict(rate=rate, engine=r["meta"].get("generator_engine", engine), round=rnd,
                           planned=planned, requests=sent,
                           failed=r["requests"]["failed"], achieved_rps=r["throughput_rps"],
                           off_pct=(sent - planned) / planned * 100.0,
                           achieved_pct=(r["throughput_rps"] - rate) / rate * 100.0,
                           lag_p50_ms=lag.get("p50"), lag_p99_ms=lag.get("p99"), lag_max_ms=lag.get("max"),
                           cpu_pct=cpu / r["duration_s"] * 100.0, p99_ms=r["latency_ms"]["p99"],
                           connections=r["connections"]["opened"],
                           server_core_pct=busy_pct(ticks, ticks_after, "cpu0"),
                           generator_core_pct=busy_pct(ticks, ticks_after, "cpu1"))
                rows.append(row)
                print(f"{rate:>7} req/s {row['engine']:<10} round {rnd}: {sent:>8} of {planned} ({row['off_pct']:+.2f} %), "
                      f"{row['failed']} failed, send lag p50 {lag.get('p50', 0):.3f} p99 {lag.get('p99', 0):.3f} ms, "
                      f"generator CPU {row['cpu_pct']:.0f} % of a core, latency p99 {row['p99_ms']:.2f} ms, "
                      f"{row['connections']} connections; cores busy: server {row['server_core_pct']:.0f} %, "
                      f"generator {row['generator_core_pct']:.0f} %",
                      flush=True)
    finally:
        nginx.terminate(); nginx.wait()
        shutil.rmtree(d, ignore_errors=True)
    print(f"\nmedian of {a.rounds} rounds, {a.duration} s each; nginx ({a.nginx_workers} worker) on CPU 0, "
          "headroom (1 thread) on CPU 1")
    print(f"{'target':>8} {'engine':>10} {'achieved vs target':>19} {'sent vs planned':>16} "
          f"{'lag p99 ms':>11} {'gen CPU %':>10} {'connections':>12} {'cores busy %':>13}")
    for rate, engine in sorted({(x["rate"], x["engine"]) for x in rows}):
        xs = [x for x in rows if x["rate"] == rate and x["engine"] == engine]
        med = lambda k: statistics.median(x[k] for x in xs if x[k] is not None)
        print(f"{rate:>8} {engine:>10} {med('achieved_pct'):>+18.2f}% {med('off_pct'):>+15.2f}% "
              f"{med('lag_p99_ms'):>11.3f} {med('cpu_pct'):>10.0f} {med('connections'):>12.0f} "
              f"{med('server_core_pct'):>6.0f} {med('generator_core_pct'):>6.0f}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(rows, open(os.path.join(a.out, "rounds.json"), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
