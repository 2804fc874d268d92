#!/usr/bin/env python3
"""Many concurrent keep-alive connections from one machine.

nginx (several workers, several listen addresses, raised fd limits and
accept queues) on
loopback; headroom `run --processes P --local-address 127.0.0.2-127.0.0.9`
holds N closed-model users, each its own keep-alive connection, each
sending a request every THINK seconds. One process may hold at most its
open-files hard limit (~19,900 here), and one source address reaches one
destination address and port through at most ~28k ephemeral ports: hence
processes and source addresses.

Every second it samples the generator's processes (the parent and its
children): total RSS, and the established TCP connections to nginx. At the
end it prints the peak connections held, the generator's peak total RSS
(and per connection: all of it, and above an empty run — the same
processes holding one user each — measured first), and checks the merged results' total against
nginx's access log, exactly.

Usage: bench/connections.py [--connections 100000] [--processes 6]
       [--think 10] [--ramp 40] [--hold 30] [--headroom target/release/headroom]
       [--out DIR]
"""
import argparse, glob, json, os, resource, shutil, signal, socket, subprocess, sys, tempfile, time

LISTEN = ["127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.1.4"]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start_nginx(d, port, workers, reuseport=False):
    # reuseport (one accept queue per worker) is off by default: on this
    # 2-core machine it left connections unaccepted for tens of seconds
    # (30,000 users: 17,406 held, p99 22.9 s; without it 30,002, p99 0.77 ms).
    rp = " reuseport" if reuseport else ""
    listens = "\n    ".join(f"listen {a}:{port} backlog=65535{rp};" for a in LISTEN)
    # A worker may hold no more than the hard open-files limit (20,000 here,
    # and not raisable without CAP_SYS_RESOURCE): connections are capped
    # below it, and accept_mutex makes a worker that is 7/8 full leave
    # accepting to the others — so 100,000 connections need 6+ workers.
    fds = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per_worker = min(fds - 500, 60_000)
    conf = f"""{'user root;' if os.geteuid() == 0 else ''}
worker_processes {workers};
worker_rlimit_nofile {per_worker + 200};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections {per_worker}; accept_mutex on; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  server {{
    {listens}
    location / {{ return 200 "hello from nginx\n"; }}
  }}
}}
"""
    open(f"{d}/nginx.conf", "w").write(conf)
    p = subprocess.Popen(["nginx", "-p", d, "-c", f"{d}/nginx.conf"], stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection((LISTEN[0], port), timeout=0.1).close(); return p
        except OSError:
            time.sleep(0.05)
    p.kill(); sys.exit(f"nginx did not start: {open(f'{d}/error.log').read()}")


def tree(pid):
    """pid and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for f in glob.glob(f"/proc/{p}/task/*/children"):
            try:
                todo += [int(c) for c in open(f).read().split()]
            except OSError:
                pass
    return out


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def established_to(port):
    """ESTABLISHED TCP connections to nginx's port, counted by `ss` (netlink:
    fast with 100k sockets, where reading /proc/net/tcp takes seconds)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True).stdout
    return out.count("\n")


SYSCTLS = {"net.core.somaxconn": "65535", "net.ipv4.tcp_max_syn_backlog": "65535"}


def tune():
    """Accept queues long enough for thousands of connects a second (the
    defaults, 4096 and 2048, overflow: `nstat TcpExtListenOverflows`).
    Returns the old values, to put back."""
    old = {}
    for key, value in SYSCTLS.items():
        path = "/proc/sys/" + key.replace(".", "/")
        old[path] = open(path).read().strip()
        try:
            open(path, "w").write(value)
        except OSError as e:
            print(f"cannot set {key}={value} ({e}); connects may time out", file=sys.stderr)
    return old


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--connections", type=int, default=100_000)
    a.add_argument("--processes", type=int, default=6)
    a.add_argument("--think", type=float, default=10)
    a.add_argument("--ramp", type=float, default=40)
    a.add_argument("--hold", type=float, default=30)
    a.add_argument("--nginx-workers", type=int, default=8)
    a.add_argument("--headroom", default="target/release/headroom")
    a.add_argument("--out")
    a.add_argument("--reuseport", action="store_true", help="nginx listens with reuseport")
    a.add_argument("--no-tune", action="store_true", help="leave somaxconn and tcp_max_syn_backlog as they are")
    a = a.parse_args()
    if not shutil.which("nginx"):
        sys.exit("nginx not found: apt-get install -y nginx-light")
    old = {} if a.no_tune else tune()
    try:
        run(a)
    finally:
        for path, value in old.items():
            open(path, "w").write(value)


def sampled(cmd, port, t0, quiet=False):
    """Runs the generator, sampling its processes every second: returns
    (exit code, peak connections held, peak total RSS in KiB, samples)."""
    gen = subprocess.Popen(cmd)
    peak_conns, peak_rss, samples = 0, 0, []
    while gen.poll() is None:
        time.sleep(1)
        pids = tree(gen.pid)
        rss = sum(rss_kib(p) for p in pids)
        conns = established_to(port)
        peak_conns, peak_rss = max(peak_conns, conns), max(peak_rss, rss)
        samples.append({"t_s": round(time.monotonic() - t0, 1), "processes": len(pids),
                        "rss_kib": rss, "connections": conns})
        if len(samples) % 5 == 0 and not quiet:
            print(f"  {samples[-1]['t_s']:6.1f} s  {conns:7d} connections  "
                  f"{rss / 1024:7.1f} MiB RSS in {len(pids)} processes", flush=True)
    return gen.wait(), peak_conns, peak_rss, samples


def run(a):
    d = tempfile.mkdtemp(prefix="headroom-conns-")
    port = free_port()
    nginx = start_nginx(d, port, a.nginx_workers, a.reuseport)
    # The merged results stay in the temporary folder (hundreds of KB);
    # --out keeps the summary and the per-second samples (bench.json).
    results = os.path.join(d, "results.json")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    duration = a.ramp + a.hold

    def command(users, ramp, seconds, out):
        return [a.headroom, "run", "--url", f"http://{LISTEN[0]}:{port}/",
                "--vus", str(users), "--think-time", f"{a.think}s",
                "--ramp-up", f"{ramp}s", "-d", f"{seconds}s",
                "--processes", str(a.processes),
                "--local-address", "127.0.0.2-127.0.0.9",
                "--connect-timeout", "30s", "-q", "--out", out]

    # The empty run: the same processes holding one user each, so what the
    # connections cost is the difference.
    empty_cmd = command(a.processes, 1, 8, os.path.join(d, "empty.json"))
    print("$ " + " ".join(empty_cmd), flush=True)
    _, _, empty_rss, _ = sampled(empty_cmd, port, time.monotonic(), quiet=True)
    print(f"  empty run: {empty_rss / 1024:.1f} MiB RSS", flush=True)
    before = sum(1 for _ in open(f"{d}/access.log"))

    cmd = command(a.connections, a.ramp, duration, results)
    print("$ " + " ".join(cmd), flush=True)
    code, peak_conns, peak_rss, samples = sampled(cmd, port, time.monotonic())
    time.sleep(1)
    nginx.send_signal(signal.SIGQUIT)
    try:
        nginx.wait(timeout=60)
    except subprocess.TimeoutExpired:
        nginx.kill()
    served = sum(1 for _ in open(f"{d}/access.log")) - before
    errors = open(f"{d}/error.log").read().strip().splitlines()
    if errors:
        print(f"nginx error.log ({len(errors)} lines), last: {errors[-3:]}")
    r = json.load(open(results))
    total = r["requests"]["total"]
    summary = {
        "command": cmd, "exit": code,
        "connections_wanted": a.connections, "peak_connections_held": peak_conns,
        "generator_peak_rss_mib": round(peak_rss / 1024, 1),
        "kib_per_connection": round(peak_rss / max(peak_conns, 1), 2),
        "empty_run_rss_mib": round(empty_rss / 1024, 1),
        "kib_per_connection_above_empty": round((peak_rss - empty_rss) / max(peak_conns, 1), 2),
        "requests_total": total, "requests_ok": r["requests"]["ok"],
        "errors": r["errors"], "served_by_nginx": served,
        # Every request nginx logged is one headroom counted OK, and every
        # request headroom counted is OK or failed with a class.
        "counts_exact": served == r["requests"]["ok"] and total == r["requests"]["ok"] + r["requests"]["failed"],
        "all_ok": total == r["requests"]["ok"],
        "p99_ms": r["latency_ms"]["p99"], "shards": len(r["meta"].get("shards", [])),
    }
    print(json.dumps(summary, indent=2))
    if a.out:
        json.dump({"summary": summary, "samples": samples}, open(os.path.join(a.out, "bench.json"), "w"), indent=1)
    shutil.rmtree(d, ignore_errors=True)
    sys.exit(0 if summary["counts_exact"] and summary["all_ok"] and code == 0 else 1)


if __name__ == "__main__":
    main()
