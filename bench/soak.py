#!/usr/bin/env python3
"""Soak: one long open-model run at a moderate rate against the built-in
sample server, printing the generator's resident memory and open file
descriptors every minute, to show both stay flat. Not a test: it takes
--minutes (60 by default) and its figures go in the README.

The scenario exercises what keeps per-user state — a feeder, a template,
a body check, an extraction and a cookie jar (the login flow) — besides a
plain GET, so a leak in any of them would show as growth.

Usage: bench/soak.py [--minutes 60] [--rate 500]
                     [--headroom target/release/headroom] [--out DIR]
"""
import argparse, json, os, subprocess, sys, tempfile, time

SCENARIO = """
base_url = "{base}"

[load]
rate = {rate}
duration = "{minutes}m"
graceful_stop = "5s"

[[feeder]]
name = "users"
file = "users.csv"
order = "circular"

[[session]]
name = "login-then-browse"
weight = 1
steps = [
  {{ request = "login" }},
  {{ request = "private" }},
  {{ request = "hello" }},
]

[[request]]
name = "login"
path = "/login?user={{{{user}}}}"
check = [ {{ body_contains = "token" }} ]
extract = [ {{ name = "token", json_path = "$.token" }} ]

[[request]]
name = "private"
path = "/private"
headers = {{ Authorization = "Bearer {{{{token}}}}" }}
expect = {{ status = 200 }}

[[request]]
name = "hello"
path = "/hello?n={{{{random_int(1, 1000000)}}}}"
"""


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--rate", type=float, default=500,
                    help="sessions per second (3 requests each)")
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--out", default=None, help="folder for results.json and soak.csv")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="headroom-soak-")
    os.makedirs(out, exist_ok=True)

    target = subprocess.Popen([a.headroom, "target", "--listen", "127.0.0.1:0",
                               "--workers", "1", "--threads", "16"],
                              stdout=subprocess.PIPE, text=True)
    run = None
    try:
        base = next(w for w in target.stdout.readline().split() if w.startswith("http://"))
        with open(os.path.join(out, "users.csv"), "w") as f:
            f.write("user\n" + "".join(f"u{i}\n" for i in range(1000)))
        scenario = os.path.join(out, "soak.toml")
        with open(scenario, "w") as f:
            f.write(SCENARIO.format(base=base, rate=a.rate, minutes=a.minutes))
        run = subprocess.Popen([a.headroom, "run", scenario, "--quiet",
                                "--out", os.path.join(out, "results.json")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = []
        print(f"soak: {a.rate:g} sessions/s (3 requests each) for {a.minutes} min; "
              f"generator pid {run.pid}; files in {out}", flush=True)
        print(f"{'minute':>6} {'RSS MiB':>9} {'peak RSS MiB':>13} {'fds':>5}", flush=True)
        started = time.monotonic()
        minute = 0
        while run.poll() is None:
            minute += 1
            due = started + 60 * minute
            while time.monotonic() < due and run.poll() is None:
                time.sleep(1)
            if run.poll() is not None:
                break
            rss = status_kib(run.pid, "VmRSS") / 1024
            hwm = status_kib(run.pid, "VmHWM") / 1024
            n = fds(run.pid)
            rows.append((minute, rss, hwm, n))
            print(f"{minute:>6} {rss:>9.1f} {hwm:>13.1f} {n:>5}", flush=True)
        run.wait()
        with open(os.path.join(out, "soak.csv"), "w") as f:
            f.write("minute,rss_mib,peak_rss_mib,fds\n")
            f.writelines(f"{m},{r:.1f},{h:.1f},{n}\n" for m, r, h, n in rows)
        r = json.load(open(os.path.join(out, "results.json")))
        req = r["requests"]
        print(f"requests: {req['total']} total, {req['ok']} ok, {req['failed']} failed; "
              f"p99 {r['latency_ms']['p99']:.2f} ms; errors {r['errors']}")
        if len(rows) >= 2:
            first = rows[min(1, len(rows) - 1)]  # after a minute of warm-up
            last = rows[-1]
            print(f"RSS minute {first[0]}: {first[1]:.1f} MiB → minute {last[0]}: {last[1]:.1f} MiB "
                  f"({last[1] - first[1]:+.1f} MiB); fds {first[3]} → {last[3]}")
        return 0 if run.returncode == 0 else 1
    finally:
        if run and run.poll() is None:
            run.terminate()
        target.terminate()
        target.wait()


if __name__ == "__main__":
    sys.exit(main())
