#!/usr/bin/env python3
"""Monitor overhead: `headroom monitor` watching a tree of 200 processes
that listen on 20 sockets (10 TCP, 10 unix; every process holds all of
them, as a prefork server's workers do) at 1 Hz for --seconds; prints its
CPU use as % of one core (target: < 1 %), and checks from its own samples
that it saw all 200 processes and the accept queues of all 20 sockets.

Usage: bench/monitor_overhead.py [--seconds 30] [--processes 200] [--sockets 20]
                                 [--headroom target/release/headroom]
"""
import argparse, json, os, signal, socket, subprocess, sys, tempfile, time, urllib.request

def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--processes", type=int, default=200)
    ap.add_argument("--sockets", type=int, default=20)
    ap.add_argument("--headroom", default="target/release/headroom")
    a = ap.parse_args()
    # A root with processes-1 sleeping children: a tree like a big prefork server.
    sockdir = tempfile.mkdtemp(prefix="headroom-bench-")
    root = subprocess.Popen([sys.executable, "-c", f"""
import os, socket, time, signal
listeners = []
for i in range({a.sockets}):
    if i % 2 == 0:
        s = socket.socket(); s.bind(("127.0.0.1", 0))
    else:
        s = socket.socket(socket.AF_UNIX); s.bind("{sockdir}/s%d.sock" % i)
    s.listen(128); listeners.append(s)
kids = []
for _ in range({a.processes - 1}):
    pid = os.fork()
    if pid == 0:
        time.sleep(3600); os._exit(0)
    kids.append(pid)
signal.signal(signal.SIGTERM, lambda *_: ([os.kill(k, 9) for k in kids], os._exit(0)))
print('ready', flush=True)
time.sleep(3600)
"""], stdout=subprocess.PIPE, text=True)
    assert root.stdout.readline().strip() == "ready"
    mon = subprocess.Popen([a.headroom, "monitor", "--listen", "127.0.0.1:0", "--pid", str(root.pid),
                            "--token", "bench", "--interval", "1s"], stdout=subprocess.PIPE, text=True)
    try:
        url = next(w for w in mon.stdout.readline().split() if w.startswith("http://"))
        time.sleep(2)
        t0, c0 = time.monotonic(), cpu_ticks(mon.pid)
        time.sleep(a.seconds)
        t1, c1 = time.monotonic(), cpu_ticks(mon.pid)
        req = urllib.request.Request(f"{url}/samples?since_ms=0", headers={"Authorization": "Bearer bench"})
        samples = json.load(urllib.request.urlopen(req))
        seen = max(s["server"]["processes"] for s in samples)
        queues = max(len(s["server"].get("accept_queues", [])) for s in samples)
        pct = (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0) * 100
        version = subprocess.run([a.headroom, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"{version}: watching {seen} processes and {queues} accept queues at 1 Hz for {t1 - t0:.0f} s: "
              f"{(c1 - c0) / os.sysconf('SC_CLK_TCK'):.2f} CPU-s = {pct:.2f} % of one core (target < 1 %)")
        if seen != a.processes:
            sys.exit(f"saw {seen} processes, expected {a.processes}")
        if queues != a.sockets:
            sys.exit(f"saw {queues} accept queues, expected {a.sockets}")
    finally:
        mon.terminate(); mon.wait()
        root.terminate(); root.wait()

if __name__ == "__main__":
    main()
