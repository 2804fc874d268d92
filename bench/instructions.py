#!/usr/bin/env python3
"""User-space instructions (and simulated L1 misses) per plain GET.

Wall-clock figures on a shared 2-core VM move by a few percent from run to
run; instruction counts do not. headroom runs under valgrind against nginx
(pinned to CPU 0) twice, for 20,000 and 60,000 requests; the difference over
40,000 is the cost of a request, without start-up and the end of the run —
but with the worker's work done once a second (closing the second's
histograms), which under valgrind's ~50x slowdown weighs ~50x what it does
at full speed: run it on a quiet machine, or the figure grows with the
wall time.
wrk runs once for a fixed time (it cannot stop at a count), so its figure
includes its start-up, a few thousand instructions spread over ~200,000
requests.

Usage: bench/instructions.py [--connections 50] [--cache]
                             [--headroom target/release/headroom] [--no-wrk]
                             [--engine auto|tasks]
  --engine  which of headroom's HTTP/1.1 paths: the event loop (auto, the
            default for plain requests) or a task per user (tasks)
  --cache   cachegrind with its cache and branch simulation (adds L1 data
            and instruction misses and mispredicted branches per request:
            what a request touches that is not in the CPU cache; the
            simulation leaves out the kernel, whose work between two
            requests evicts more)
"""
import argparse, os, re, shutil, signal, subprocess, sys, tempfile

# The same nginx as the wrk comparison (one worker on CPU 0, keep-alive
# without limit); its access log off, as there.
from vs_wrk import free_port, start_nginx


def valgrind(cmd, cache, d):
    """Instructions and L1 data misses (0 without --cache) of one run.
    callgrind counts the busiest thread alone (the generator's worker; not
    the monitor's once-a-second reads of /proc); cachegrind counts all."""
    for f in os.listdir(d):
        if f.startswith("cg.out"): os.remove(os.path.join(d, f))
    tool = ["--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes", "--cachegrind-out-file=/dev/null"] if cache \
        else ["--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={d}/cg.out"]
    out = subprocess.run(["taskset", "-c", "1", "valgrind", *tool, *cmd],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} under valgrind failed:\n{out.stderr[-2000:]}")
    text = out.stdout + out.stderr
    number = lambda pattern: int(re.search(pattern, text).group(1).replace(",", ""))
    if cache:
        return (number(r"I\s+refs:\s+([\d,]+)"), number(r"D1\s+misses:\s+([\d,]+)"),
                number(r"I1\s+misses:\s+([\d,]+)"), number(r"Mispredicts:\s+([\d,]+)"), text)
    per_thread = []
    for f in os.listdir(d):
        if f.startswith("cg.out"):
            totals = re.search(r"^(?:summary|totals): (\d+)", open(os.path.join(d, f)).read(), re.M)
            if totals:
                per_thread.append(int(totals.group(1)))
    return max(per_thread), 0, 0, 0, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--no-wrk", action="store_true")
    ap.add_argument("--engine", choices=["auto", "tasks"], default="auto")
    a = ap.parse_args()
    for tool in ("nginx", "valgrind", "taskset") + (() if a.no_wrk else ("wrk",)):
        if not shutil.which(tool): sys.exit(f"{tool} not found: apt-get install -y nginx-light valgrind wrk")
    d = tempfile.mkdtemp(prefix="headroom-instr-")
    port = free_port(); url = f"http://127.0.0.1:{port}/"
    nginx = start_nginx(d, port, access_log=False, tls=False)
    try:
        runs = {}
        for n in (20_000, 60_000):
            cmd = [a.headroom, "run", "--url", url, "-c", str(a.connections), "-n", str(n),
                   "--threads", "1", "--quiet", "--out", os.path.join(d, "r.json")]
            if a.engine != "auto":
                cmd += ["--engine", a.engine]
            runs[n] = valgrind(cmd, a.cache, d)[:4]
        instr = (runs[60_000][0] - runs[20_000][0]) / 40_000
        misses = (runs[60_000][1] - runs[20_000][1]) / 40_000
        code_misses = (runs[60_000][2] - runs[20_000][2]) / 40_000
        mispredicts = (runs[60_000][3] - runs[20_000][3]) / 40_000
        line = f"headroom ({a.engine}): {instr:,.0f} instructions per request"
        if a.cache:
            line += (f", {misses:.1f} L1 data misses, {code_misses:.1f} L1 instruction misses and"
                     f" {mispredicts:.1f} mispredicted branches per request")
        print(line + f" ({a.connections} connections; 60,000 minus 20,000 requests)")
        if not a.no_wrk:
            instr, miss, code_miss, mispredicted, text = valgrind(["wrk", "-t1", f"-c{a.connections}", "-d10s", url], a.cache, d)
            reqs = int(re.search(r"(\d+) requests in", text).group(1))
            line = f"wrk:      {instr / reqs:,.0f} instructions per request"
            if a.cache:
                line += (f", {miss / reqs:.1f} L1 data misses, {code_miss / reqs:.1f} L1 instruction"
                         f" misses and {mispredicted / reqs:.1f} mispredicted branches per request")
            print(line + f" ({reqs:,} requests in 10 s, start-up included)")
    finally:
        nginx.send_signal(signal.SIGQUIT); nginx.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
