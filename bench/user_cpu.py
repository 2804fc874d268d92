#!/usr/bin/env python3
"""User-space and kernel CPU per plain GET, headroom vs wrk, by sampling.

This virtual machine has no hardware counters, and the kernel's own
user/system split (rusage) is charged a 4 ms tick at a time, too coarse for
~1 us per request. So `perf record` samples the generator's CPU clock
(5 kHz; a sample every 200 us of its CPU time) while it loads nginx (the
same nginx as bench/vs_wrk.py: pinned to CPU 0, the generator to CPU 1),
and each sample counts as user or kernel time by where it landed (the
vDSO's clock reads count as user time, as they run in user mode). Per
request: samples x 200 us / requests completed. headroom and wrk alternate,
several rounds; the table shows medians.

Usage: bench/user_cpu.py [--rounds 3] [--duration 4] [--connections 50]
                         [--headroom target/release/headroom] [--baseline PATH]
                         [--out DIR]
  --out DIR  keeps every round (rounds.json) and the printed summary
"""
import argparse, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile

from vs_wrk import free_port, start_nginx

HZ = 5000


def sampled(cmd, d):
    """Runs cmd under perf; returns (stdout, user seconds, kernel seconds)."""
    data = os.path.join(d, "perf.data")
    p = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HZ), "-o", data, "--", *cmd],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[2]} under perf failed ({p.returncode}): {p.stderr[-2000:]}")
    # One line per sample, its instruction pointer last: the kernel's
    # addresses are the top half of the address space (0xffff...).
    samples = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True, text=True)
    kernel = user = 0
    for line in samples.stdout.split():
        if int(line, 16) >= 1 << 63:
            kernel += 1
        else:
            user += 1
    return p.stdout, user / HZ, kernel / HZ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--baseline", default=None, help="an earlier headroom build to run in the same rounds")
    ap.add_argument("--out", default=None, help="a folder for every round and the summary")
    a = ap.parse_args()
    for tool in ("nginx", "wrk", "taskset", "perf"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install -y nginx-light wrk util-linux linux-perf")
    d = tempfile.mkdtemp(prefix="headroom-usercpu-")
    port = free_port(); url = f"http://127.0.0.1:{port}/"
    nginx = start_nginx(d, port, access_log=False, tls=False)
    tools = {"wrk": None, "headroom": a.headroom}
    if a.baseline:
        tools["baseline"] = a.baseline
    per = {t: [] for t in tools}
    rows = []
    try:
        for rnd in range(1, a.rounds + 1):
            for tool, binary in tools.items():
                if binary is None:
                    out, user, kernel = sampled(["taskset", "-c", "1", "wrk", "-t1", f"-c{a.connections}",
                                                 f"-d{a.duration}s", url], d)
                    reqs = int(re.search(r"(\d+) requests in", out).group(1))
                else:
                    res = os.path.join(d, "r.json")
                    _, user, kernel = sampled(["taskset", "-c", "1", binary, "run", "--url", url, "-c",
                                               str(a.connections), "-d", f"{a.duration}s", "--threads", "1",
                                               "--quiet", "--out", res], d)
                    reqs = json.load(open(res))["requests"]["total"]
                per[tool].append((user / reqs * 1e6, kernel / reqs * 1e6))
                rows.append(dict(round=rnd, tool=tool, binary=binary or "wrk", requests=reqs, user_s=user,
                                 kernel_s=kernel, user_us_per_request=per[tool][-1][0],
                                 kernel_us_per_request=per[tool][-1][1]))
                print(f"round {rnd} {tool:9s} {reqs:9d} req  user {user:5.2f} s  kernel {kernel:5.2f} s  "
                      f"per request: user {per[tool][-1][0]:.3f} us, kernel {per[tool][-1][1]:.3f} us", flush=True)
    finally:
        nginx.send_signal(signal.SIGQUIT); nginx.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)
    summary = [f"{a.connections} connections, {a.duration} s x {a.rounds} rounds, perf cpu-clock at {HZ} Hz; "
               f"medians per request:"]
    for tool, values in per.items():
        user = statistics.median(v[0] for v in values); kernel = statistics.median(v[1] for v in values)
        summary.append(f"  {tool:9s} user {user:.3f} us  kernel {kernel:.3f} us  total {user + kernel:.3f} us")
    print("\n".join(summary))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "rounds.json"), "w") as f:
            json.dump(dict(connections=a.connections, duration_s=a.duration, hz=HZ, rounds=rows), f, indent=1)
        with open(os.path.join(a.out, "summary"), "w") as f:
            f.write("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
