#!/usr/bin/env python3
"""WebSocket load: messages per generator CPU-second and memory per idle
socket, headroom against Gatling 3 (its WebSocket DSL) and Artillery 2
(its `ws` engine) when installed, on the same echo server in the same run.

    python3 bench/websocket.py --rounds 3 --out bench/runs/DATE-websocket

Each tool loads Python's `websockets` echo server (tests/common/
socket_server.py, pinned to the other core): U users, each with its
socket, sending a text message and waiting for its echo, over and over.
Messages are counted by the server; CPU is read from /proc for the
generator's process tree over a steady window after a warm-up (so start-up
— a JVM's — is not counted). Idle memory: the generator holds N sockets
open doing nothing; (RSS with N − RSS with 1) / (N − 1).

Peers: Gatling from .ci/gatling.sh (javac compiles bench/websocket/
EchoSimulation.java); Artillery from `npm install artillery@2.0.34` in
~/.cache/headroom/artillery (skipped when absent). k6 is not used here
(its licence, the AGPL, is not one this project takes on).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "crates/headroom/tests/common/socket_server.py"
HEADROOM = Path(os.environ.get("HEADROOM_BIN", ROOT / "target/release/headroom"))
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "headroom"
GATLING_LIB = CACHE / "gatling-3.15.1/lib"
ARTILLERY = CACHE / "artillery/node_modules/.bin/artillery"
TICK = os.sysconf("SC_CLK_TCK")
# Idle sockets open over this many seconds (as bench/connections.py ramps
# its users): the figure is what a held socket costs, not the transient of
# thousands of handshakes at once.
RAMP_S = 8


def tree(pid):
    """pid and its descendants."""
    children = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(p.name))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid):
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICK


def rss_bytes(pid):
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Echo:
    """The echo server, pinned to CPU 1."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["taskset", "-c", "1", "/usr/bin/python3", str(SERVER), "echo", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        ready = self.proc.stdout.readline().split()
        assert ready[0] == b"ready", ready
        self.port = int(ready[1])

    def counts(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/count", timeout=5) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def headroom_cmd(port, users, seconds, idle, work):
    steps = (
        '{ hold = "%ds" }' % seconds
        if idle
        else '{ repeat = 100000000, steps = [ { send = "hello", name = "echo", '
        'expect = { contains = "hello", within = "5s" } } ] }'
    )
    ramp = f'ramp_up = "{RAMP_S}s"' if idle else ""
    text = f"""base_url = "http://127.0.0.1:{port}"
[load]
model = "closed"
vus = {users}
{ramp}
duration = "{seconds}s"
[[session]]
name = "ws"
steps = [ {{ ws = "/", name = "connect" }}, {steps}, {{ close = 1000 }} ]
"""
    path = work / f"headroom-{users}-{idle}.toml"
    path.write_text(text)
    return [str(HEADROOM), "run", str(path), "--threads", "1", "--quiet",
            "--out", str(work / "headroom.json")]


def gatling_cmd(port, users, seconds, idle, work):
    cp = f"{GATLING_LIB}/*:{work}/classes"
    return ["java", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
            f"-Dport={port}", f"-Dusers={users}", f"-Dseconds={seconds}",
            f"-Didle={'true' if idle else 'false'}", f"-Dramp={RAMP_S if idle else 0}",
            "-XX:ActiveProcessorCount=1",
            "-cp", cp, "io.gatling.app.Gatling", "-s", "EchoSimulation",
            "-rf", str(work / "gatling-results"), "-nr"]


def artillery_cmd(port, users, seconds, idle, work):
    # Artillery's `match` reads JSON (its regex match needs an HTTP
    # content type a WebSocket message has not): a JSON message it is.
    echo = {"send": {"payload": {"m": "hello"}, "match": {"json": "$.m", "value": "hello"}}}
    flow = [{"think": seconds}] if idle else [{"loop": [echo], "count": 100000000}]
    script = {
        "config": {
            "target": f"ws://127.0.0.1:{port}",
            "phases": [{"duration": RAMP_S if idle else 1, "arrivalCount": users}],
        },
        "scenarios": [{"engine": "ws", "flow": flow}],
    }
    path = work / f"artillery-{users}-{idle}.json"
    path.write_text(json.dumps(script))
    return [str(ARTILLERY), "run", "--quiet", str(path)]


TOOLS = {"headroom": headroom_cmd, "gatling": gatling_cmd, "artillery": artillery_cmd}


def throughput(tool, echo, users, warmup, window, work):
    """Messages the server received per generator CPU-second over the window."""
    seconds = int(warmup + window + 5)
    cmd = ["taskset", "-c", "0"] + TOOLS[tool](echo.port, users, seconds, False, work)
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(warmup)
        c0, m0, t0 = cpu_seconds(proc.pid), echo.counts()["received"], time.monotonic()
        time.sleep(window)
        c1, m1, t1 = cpu_seconds(proc.pid), echo.counts()["received"], time.monotonic()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    cpu = c1 - c0
    return {"messages": m1 - m0, "cpu_s": cpu, "wall_s": t1 - t0,
            "per_cpu_s": (m1 - m0) / cpu if cpu > 0 else None,
            "per_s": (m1 - m0) / (t1 - t0)}


def idle_rss(tool, echo, sockets, work, settle=RAMP_S + 40):
    """RSS of the generator once `sockets` sockets are open (the server's
    handshake count says so), bounded by `settle` seconds."""
    before = echo.counts()["handshakes"]
    cmd = ["taskset", "-c", "0"] + TOOLS[tool](echo.port, sockets, settle + 20, True, work)
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + settle
        while echo.counts()["handshakes"] - before < sockets and time.monotonic() < deadline:
            time.sleep(0.5)
        opened = echo.counts()["handshakes"] - before
        time.sleep(2)
        rss = rss_bytes(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return rss, opened


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--warmup", type=float, default=8, help="seconds before the window (a JVM's JIT)")
    ap.add_argument("--window", type=float, default=6)
    ap.add_argument("--idle", type=int, default=5000, help="sockets held for the memory figure")
    ap.add_argument("--tools", default="headroom,gatling,artillery")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not HEADROOM.exists():
        sys.exit(f"build it first: cargo build --release ({HEADROOM})")
    tools = [t for t in args.tools.split(",") if t]
    work = Path(tempfile.mkdtemp(prefix="headroom-ws-bench-"))
    if "gatling" in tools:
        if not (GATLING_LIB / "gatling-app-3.15.1.jar").exists():
            print("gatling: not installed (.ci/gatling.sh): skipped", file=sys.stderr)
            tools.remove("gatling")
        else:
            subprocess.run(["javac", "-cp", f"{GATLING_LIB}/*", "-d", str(work / "classes"),
                            str(ROOT / "bench/websocket/EchoSimulation.java")], check=True)
    if "artillery" in tools and not ARTILLERY.exists():
        print(f"artillery: not installed ({ARTILLERY}): skipped", file=sys.stderr)
        tools.remove("artillery")

    echo = Echo()
    results = {"throughput": {t: [] for t in tools}, "idle": {}}
    try:
        for r in range(args.rounds):
            for t in tools:
                m = throughput(t, echo, args.users, args.warmup, args.window, work)
                results["throughput"][t].append(m)
                print(f"round {r + 1} {t}: {m['messages']:,} messages in {m['wall_s']:.1f} s, "
                      f"{m['cpu_s']:.2f} CPU-s → {m['per_cpu_s'] or 0:,.0f} msg/CPU-s", flush=True)
        for t in tools:
            one, _ = idle_rss(t, echo, 1, work)
            many, opened = idle_rss(t, echo, args.idle, work)
            per = (many - one) / max(opened - 1, 1)
            results["idle"][t] = {"rss_1": one, "rss_n": many, "sockets": opened,
                                  "bytes_per_socket": per}
            print(f"idle {t}: {opened:,} sockets, RSS {many / 2**20:.1f} MiB "
                  f"(1 socket: {one / 2**20:.1f} MiB) → {per / 1024:.2f} KiB per socket", flush=True)
    finally:
        echo.stop()

    def median(t):
        return statistics.median(m["per_cpu_s"] for m in results["throughput"][t])

    lines = ["| tool | messages per generator CPU-second (median of rounds) | vs headroom | "
             "KiB per idle socket |", "|---|---|---|---|"]
    base = median("headroom") if "headroom" in tools else None
    for t in tools:
        idle = results["idle"].get(t, {})
        ratio = f"{base / median(t):.1f}× fewer" if base and t != "headroom" else "—"
        lines.append(f"| {t} | {median(t):,.0f} | {ratio} | "
                     f"{idle.get('bytes_per_socket', 0) / 1024:.2f} ({idle.get('sockets', 0):,} sockets) |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
        (args.out / "RESULTS.md").write_text(
            f"`python3 bench/websocket.py {' '.join(sys.argv[1:])}`\n\n{table}\n")


if __name__ == "__main__":
    main()
