#!/usr/bin/env python3
"""Generator-added latency: what headroom reports minus what the server spent.

A small HTTP server in this script (one thread per connection, loopback)
records its own service time for every request: from the moment the whole
request head has been read to the moment the response has been handed to
the kernel. headroom then loads it lightly (open model, --rate R over one
connection, so requests never queue), and the bench prints headroom's p50
latency, the server's p50 service time, and their difference: the latency
the generator and the loopback round trip add. The target is < 50 us.

At a low rate both the server's thread and the generator sleep between
requests, and each wake-up is in the figure; so headroom also runs one
user back to back (closed model, --vus 1), as wrk is run for comparison
where it is installed (one connection, back to back: its p50 is from its
--latency output).

Usage: bench/added_latency.py [--rate 200] [--duration 10]
                              [--headroom target/release/headroom]
"""
import argparse, json, os, re, socket, statistics, subprocess, sys, tempfile, threading, time

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"


class Server:
    """Keep-alive HTTP/1.1 on loopback; records service times in ns."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.times = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        buf = b""
        mine = []
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                buf += data
                while b"\r\n\r\n" in buf:
                    start = time.perf_counter_ns()
                    _, buf = buf.split(b"\r\n\r\n", 1)
                    conn.sendall(RESPONSE)
                    mine.append(time.perf_counter_ns() - start)
        except OSError:
            pass
        finally:
            conn.close()
            with self.lock:
                self.times.extend(mine)

    def take(self):
        with self.lock:
            t, self.times = self.times, []
        return t


def p50_us(values_ns):
    return statistics.median(values_ns) / 1000.0 if values_ns else float("nan")


def run_headroom(binary, url, rate, duration, out):
    """Open model at `rate` over one connection, or (rate None) one user
    back to back, as wrk -c1 runs."""
    load = ["--rate", str(rate), "--connections", "1"] if rate else ["--vus", "1"]
    cmd = [binary, "run", url, *load, "--duration", f"{duration}s", "--threads", "1", "-q", "--out", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    service = r.get("service_time_ms") or r["latency_ms"]
    return r["latency_ms"]["p50"] * 1000.0, service["p50"] * 1000.0, r["requests"]["total"]


def wrk_p50_us(url, duration):
    try:
        out = subprocess.run(["wrk", "-t1", "-c1", f"-d{duration}s", "--latency", url],
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if not m:
        return None
    scale = {"us": 1.0, "ms": 1000.0, "s": 1e6}[m.group(2)]
    return float(m.group(1)) * scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--headroom", default="target/release/headroom")
    a = ap.parse_args()
    server = Server()
    url = f"http://127.0.0.1:{server.port}/"
    with tempfile.TemporaryDirectory() as d:
        h_p50, h_service_p50, total = run_headroom(a.headroom, url, a.rate, a.duration, os.path.join(d, "r.json"))
    time.sleep(0.2)
    server_p50 = p50_us(server.take())
    with tempfile.TemporaryDirectory() as d:
        c_p50, _, c_total = run_headroom(a.headroom, url, None, min(a.duration, 5), os.path.join(d, "c.json"))
    time.sleep(0.2)
    server_closed_p50 = p50_us(server.take())
    w_p50 = wrk_p50_us(url, min(a.duration, 5))
    time.sleep(0.2)  # the server files a connection's times when it closes
    server_wrk_p50 = p50_us(server.take())
    print(f"headroom open model, {a.rate} req/s over 1 connection for {a.duration} s: {total} requests")
    print(f"  headroom p50 {h_p50:.1f} us (from the intended send; {h_service_p50:.1f} us from the actual send)")
    print(f"  server's own service time p50 {server_p50:.1f} us")
    print(f"  generator-added latency (headroom p50 - server p50): {h_p50 - server_p50:.1f} us (target < 50 us)")
    print(f"headroom, 1 user back to back (as wrk -c1): {c_total} requests, p50 {c_p50:.1f} us; "
          f"server p50 {server_closed_p50:.1f} us; added {c_p50 - server_closed_p50:.1f} us")
    if w_p50 is not None:
        print(f"wrk, 1 connection back to back: p50 {w_p50:.1f} us; server p50 {server_wrk_p50:.1f} us; "
              f"added {w_p50 - server_wrk_p50:.1f} us")
    else:
        print("wrk not installed: no comparison")


if __name__ == "__main__":
    main()
