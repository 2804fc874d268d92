#!/usr/bin/env python3
"""gRPC unary calls per generator CPU-second: headroom vs ghz and vs h2load
sending the pre-encoded call (h2load checks no grpc-status; headroom and
ghz check every one).

The server is grpc-go (`bench/grpc-server`, built here with the machine's
Go), pinned to CPU 0; each generator is pinned to CPU 1 with one thread
(ghz `--cpus 1`). For each point — connections x streams — the three tools
run one after the other, several rounds. For each run: the calls it
completed OK, its own CPU time (user + system, from wait4). Printed: calls
per generator CPU-second (median over rounds) and the ratios
headroom/ghz and headroom/h2load.

Load shapes, alike on all three: C connections with M calls in flight on
each — headroom `--vus C*M --streams M` (closed model, one call in flight
per user), ghz `-c C*M --connections C`, h2load `-c C -m M`.

Server streaming (`--stream-points 10x10 --stream-times 100`): Countdown
calls of `times` replies each, messages received per generator CPU-second,
headroom (its `sockets.messages_received`, each message also timed) vs ghz
(its OK calls x times; ghz times whole calls only). h2load is left out: it
cannot read a stream's messages.

Usage: bench/grpc.py [--rounds 3] [--duration 5] [--points 1x1,10x10,100x10]
                     [--stream-points 10x10] [--stream-times 100]
                     [--headroom PATH] [--ghz PATH] [--out DIR]
Needs: go (builds the server), ghz (go install
github.com/bojand/ghz/cmd/ghz@v0.120.0), h2load (nghttp2-client), taskset.
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time

PROTO = """syntax = "proto3";
package demo.v1;
message HelloRequest { string name = 1; int32 times = 2; }
message HelloReply { string message = 1; int32 n = 2; }
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Countdown (HelloRequest) returns (stream HelloReply);
}
"""
HERE = os.path.dirname(os.path.abspath(__file__))
# HelloRequest{name: "ann"} as gRPC frames it: uncompressed, 5 bytes, the message.
CALL = bytes([0, 0, 0, 0, 5, 0x0A, 3]) + b"ann"


def start_server(d):
    binary = f"{d}/grpc-server"
    subprocess.run(["go", "build", "-o", binary, "."], cwd=f"{HERE}/grpc-server", check=True)
    p = subprocess.Popen(["taskset", "-c", "0", binary], stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline())
    return p, port


def measured(cmd, d):
    """Runs cmd; returns (stdout, cpu seconds)."""
    with open(f"{d}/out.txt", "w") as out, open(f"{d}/err.txt", "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({code}): {open(f'{d}/err.txt').read()[-2000:]}")
    return open(f"{d}/out.txt").read(), ru.ru_utime + ru.ru_stime


def run(tool, a, port, c, m, d, times=None):
    """One run: (OK calls, or messages received with `times`; CPU s; not OK)."""
    pin = ["taskset", "-c", "1"]
    proto = f"{d}/greeter.proto"
    method, data = "SayHello", '{"name": "ann"}'
    if times:
        method, data = "Countdown", '{"name": "ann", "times": %d}' % times
    if tool == "headroom":
        cmd = pin + [a.headroom, "run", "--grpc", f"grpc://127.0.0.1:{port}",
                     "--call", f"demo.v1.Greeter/{method}", "--data", data,
                     "--proto", proto, "--vus", str(c * m), "--streams", str(m),
                     "-d", f"{a.duration}s", "--threads", "1", "--quiet", "--out", f"{d}/r.json"]
        measured_out, cpu = measured(cmd, d)
        r = json.load(open(f"{d}/r.json"))
        call = r["per_request"][f"demo.v1.Greeter/{method}"]["requests"]
        if times:
            return r["sockets"]["messages_received"], cpu, call["failed"]
        return call["total"] - call["failed"], cpu, call["failed"]
    if tool == "ghz":
        cmd = pin + [a.ghz, "--insecure", "--cpus", "1", "--proto", proto,
                     "--call", f"demo.v1.Greeter.{method}", "-d", data,
                     "-c", str(c * m), "--connections", str(c), "-z", f"{a.duration}s",
                     "--format", "json", f"127.0.0.1:{port}"]
        text, cpu = measured(cmd, d)
        r = json.loads(text)
        ok = r.get("statusCodeDistribution", {}).get("OK", 0)
        return ok * (times or 1), cpu, r["count"] - ok
    cmd = pin + ["h2load", "-t", "1", "-c", str(c), "-m", str(m), "-D", str(a.duration),
                 "-d", f"{d}/call.bin", "-H", "content-type: application/grpc",
                 "-H", "te: trailers", f"http://127.0.0.1:{port}/demo.v1.Greeter/SayHello"]
    text, cpu = measured(cmd, d)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", text)
    return int(done.group(2)), cpu, int(done.group(1)) - int(done.group(2))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--points", default="1x1,10x10,100x10")
    p.add_argument("--headroom", default="target/release/headroom")
    p.add_argument("--ghz", default=shutil.which("ghz") or os.path.expanduser("~/go/bin/ghz"))
    p.add_argument("--tools", default="headroom,ghz,h2load")
    p.add_argument("--stream-points", default="")
    p.add_argument("--stream-times", type=int, default=100)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    tools = a.tools.split(",")
    d = tempfile.mkdtemp(prefix="headroom-grpc-bench-")
    open(f"{d}/greeter.proto", "w").write(PROTO)
    open(f"{d}/call.bin", "wb").write(CALL)
    server, port = start_server(d)
    rows = []
    try:
        unary = [(p, None, tools) for p in a.points.split(",") if p]
        streams = [(p, a.stream_times, [t for t in tools if t != "h2load"])
                   for p in a.stream_points.split(",") if p]
        for point, times, shape_tools in unary + streams:
            c, m = (int(x) for x in point.split("x"))
            label = f"{point} stream x{times}" if times else point
            unit = "messages" if times else "calls"
            per = {t: [] for t in shape_tools}
            for rnd in range(a.rounds):
                for tool in shape_tools:
                    ok, cpu, bad = run(tool, a, port, c, m, d, times)
                    per[tool].append({"ok": ok, "cpu_s": cpu, "not_ok": bad, "per_cpu_s": ok / cpu})
                    print(f"{label} round {rnd + 1} {tool}: {ok} OK {unit} ({bad} calls not), "
                          f"{cpu:.2f} CPU-s, {ok / cpu:,.0f} {unit} per CPU-s", flush=True)
            med = {t: statistics.median(x["per_cpu_s"] for x in per[t]) for t in shape_tools}
            row = {"point": label, "unit": unit, "median_per_cpu_s": med, "rounds": per}
            for peer in shape_tools[1:]:
                row[f"headroom_over_{peer}"] = med["headroom"] / med[peer]
            rows.append(row)
            ratios = ", ".join(f"{r[14:]} {row[r]:.2f}x" for r in row if r.startswith("headroom_over"))
            print(f"== {label}: " + ", ".join(f"{t} {med[t]:,.0f}" for t in shape_tools)
                  + f" {unit} per CPU-s; headroom/{ratios}", flush=True)
    finally:
        server.kill()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump({"rows": rows, "duration_s": a.duration}, open(f"{a.out}/grpc.json", "w"), indent=1)


if __name__ == "__main__":
    main()
