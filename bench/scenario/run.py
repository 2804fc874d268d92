#!/usr/bin/env python3
"""A realistic scripted session, headroom vs k6 vs Locust: requests per
generator CPU-second.

Two sessions (`--session`): `shop` (below) and `api` (headroom-api.toml,
locustfile-api.py: log in, then three rounds of an item and the account,
7 requests per iteration, a JSON-path check on every response).

The session (headroom.toml, k6.js, locustfile.py, jmeter.jmx — one each,
the same requests): log in with a form post, extract the token from the JSON answer,
three GETs of items from a CSV feeder with the token in a header, a body
check on every response, cookies on. The server is nginx on CPU 0 (a
`return` per location: the login answers JSON with a token and sets a
cookie, items answer 401 without a Bearer token); each generator runs
alone on CPU 1, one thread/process, USERS users, interleaved over rounds.
headroom's bare GET (`headroom run URL -c USERS`) runs in the same rounds:
the scripted session's cost is its rate against that.

CPU is the generator's own (user + system, from wait4's rusage, children
included); requests are what each tool counted, checked against nginx's
access log (k6 and Locust stop with requests in flight, so theirs may
differ by a few).

Usage: bench/scenario/run.py [--session shop|api] [--rounds 3] [--duration 10] [--users 20]
         [--headroom target/release/headroom] [--k6 k6] [--locust locust]
         [--jmeter ApacheJMeter.jar] [--tools headroom,headroom-bare,k6,locust,jmeter] [--out DIR]
Peers: `go install go.k6.io/k6@latest`, `pip install locust`, `.ci/jmeter.sh`
(JMeter 5.6.3 from Maven Central; its JVM start-up is in its CPU time).
"""
import argparse, json, os, random, shutil, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))

NGINX = """{user}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
worker_rlimit_nofile 8192;
events {{ worker_connections 4096; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  map $request_id $cart_total {{ ~^[0-7] 60; default 120; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location = /login {{
      default_type application/json;
      add_header Set-Cookie "session=s-$arg_user; Path=/; HttpOnly";
      return 200 '{{"user":"$arg_user","token":"tok-$arg_user"}}\\n';
    }}
    location /item/ {{
      default_type application/json;
      if ($http_authorization !~ "^Bearer tok-") {{ return 401 '{{"ok":false}}\\n'; }}
      return 200 '{{"item":"$uri","ok":true}}\\n';
    }}
    location = /account {{
      default_type application/json;
      if ($http_authorization !~ "^Bearer tok-") {{ return 401 '{{"ok":false}}\\n'; }}
      return 200 '{{"user":"$arg_user","ok":true,"plan":"pro","limits":{{"requests":1000,"storage_gb":50}},"tags":["a","b","c"]}}\\n';
    }}
    # The shop flow (examples/shop): a product list, a cart whose total
    # passes 100 on about half the adds, a checkout.
    location = /products {{
      default_type application/json;
      return 200 '{{"products":[{{"id":"p0","name":"Product 0","price":10,"stock":0}},{{"id":"p1","name":"Product 1","price":17,"stock":0}},{{"id":"p2","name":"Product 2","price":24,"stock":1}},{{"id":"p3","name":"Product 3","price":31,"stock":3}},{{"id":"p4","name":"Product 4","price":38,"stock":7}},{{"id":"p5","name":"Product 5","price":45,"stock":0}},{{"id":"p6","name":"Product 6","price":52,"stock":0}},{{"id":"p7","name":"Product 7","price":59,"stock":1}},{{"id":"p8","name":"Product 8","price":66,"stock":3}},{{"id":"p9","name":"Product 9","price":73,"stock":7}},{{"id":"p10","name":"Product 10","price":80,"stock":0}},{{"id":"p11","name":"Product 11","price":87,"stock":0}}]}}';
    }}
    location = /cart {{
      default_type application/json;
      return 200 '{{"total":$cart_total}}';
    }}
    location = /checkout {{
      default_type application/json;
      return 200 '{{"ok":true}}';
    }}
    location / {{ return 200 "hello from nginx\\n"; }}
  }}
}}
"""


# Each session's script for each tool (data.csv is made by the run).
SESSIONS = {
    "shop": {"headroom": "headroom.toml", "k6": "k6.js", "locust": "locustfile.py",
             "jmeter": "jmeter.jmx"},
    # headroom-js: the same session with a script hook on every request.
    "api": {"headroom": "headroom-api.toml", "headroom-js": "headroom-api-js.toml",
            "locust": "locustfile-api.py"},
    # examples/shop as written (a JavaScript step, an `if`, signed calls),
    # Gatling's and Locust's the same flow in their own code.
    "shop-js": {"headroom": "shop.toml", "gatling": "ShopSimulation.java",
                "locust": "locustfile-shop.py"},
}
# Files a session's tools read beside their own.
EXTRA = {"api": ["api-hooks.js"], "shop-js": ["../../examples/shop/shop.js"]}
SOURCES = {"shop.toml": "../../examples/shop/shop.toml"}
DESCRIBED = {
    "shop": "login form post, JSON token, 3 feeder GETs with the token, body checks, cookies",
    "api": "login form post, JSON token, 3 rounds of item + account with the token, "
           "a JSON-path check on every response, 7 requests, cookies",
    "shop-js": "products, pick a random in-stock product (JSON, a script), add it signed "
               "(HMAC-SHA256), check out signed when the cart passes 100",
}
GATLING_LIB = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                           "headroom", "gatling-3.15.1", "lib")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start_nginx(d, port):
    with open(f"{d}/nginx.conf", "w") as f:
        f.write(NGINX.format(d=d, port=port, user="user root;" if os.geteuid() == 0 else ""))
    p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", d, "-c", f"{d}/nginx.conf"],
                         stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill(); sys.exit("nginx did not start")


def log_lines(d):
    try:
        with open(f"{d}/access.log") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def measured(cmd, env, cwd):
    """Runs cmd on CPU 1; returns (stdout, CPU seconds of it and its children)."""
    p = subprocess.Popen(["taskset", "-c", "1", *cmd], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    out, err = p.communicate()
    # communicate() reaped it; its rusage is in the children totals.
    if p.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({p.returncode}): {err[-2000:]}")
    return out, err


def children_cpu():
    r = os.times()
    return r.children_user + r.children_system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--session", choices=sorted(SESSIONS), default="shop")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--k6", default=shutil.which("k6") or os.path.expanduser("~/go/bin/k6"))
    ap.add_argument("--locust", default=shutil.which("locust") or "locust")
    ap.add_argument("--jmeter", default=os.path.join(
        os.environ.get("HEADROOM_JMETER_HOME") or os.path.expanduser("~/.cache/headroom/jmeter-5.6.3"),
        "bin", "ApacheJMeter.jar"), help="JMeter 5's ApacheJMeter.jar (.ci/jmeter.sh puts one there)")
    ap.add_argument("--tools", default="headroom,headroom-bare,headroom-tasks,locust,jmeter",
                    help="k6 too, where it may be installed (go install go.k6.io/k6@latest)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    headroom = os.path.abspath(a.headroom)
    tools = a.tools.split(",")
    files = SESSIONS[a.session]
    missing = [t for t in tools
               if t in ("k6", "locust", "jmeter", "gatling", "headroom-js") and t not in files]
    if missing:
        sys.exit(f"session {a.session} has no script for {', '.join(missing)}")
    d = tempfile.mkdtemp(prefix="headroom-scenario-")
    work = os.path.join(d, "work")
    os.makedirs(work)
    for f in list(files.values()) + EXTRA.get(a.session, []):
        shutil.copy(os.path.join(HERE, SOURCES.get(f, f)), work)
    if "gatling" in tools:
        # Gatling 3 (.ci/gatling.sh): the simulation compiled once.
        subprocess.run(["javac", "-cp", f"{GATLING_LIB}/*", "-d", os.path.join(work, "classes"),
                        os.path.join(work, files["gatling"])], check=True)
        # Gatling's default logging (warnings), as its bundle ships it.
        shutil.copy(os.path.join(HERE, "logback.xml"), os.path.join(work, "classes"))
    rnd = random.Random(7)
    with open(os.path.join(work, "data.csv"), "w") as f:
        f.write("user,item1,item2,item3\n")
        for i in range(1000):
            f.write(f"u{i}," + ",".join(str(rnd.randrange(1, 100000)) for _ in range(3)) + "\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    nginx = start_nginx(d, port)
    env = dict(os.environ, BASE_URL=base, USERS=str(a.users), DURATION=f"{a.duration}s",
               K6_NO_USAGE_REPORT="true")
    rows = []
    try:
        for r in range(1, a.rounds + 1):
            for tool in tools:
                before_log, before_cpu = log_lines(d), children_cpu()
                if tool in ("headroom", "headroom-tasks", "headroom-js"):
                    # headroom-tasks: the same session on a tokio task per
                    # user (--engine tasks), against the event loop.
                    res = os.path.join(d, "r.json")
                    engine = "tasks" if tool == "headroom-tasks" else "auto"
                    file = files["headroom-js" if tool == "headroom-js" else "headroom"]
                    measured([headroom, "run", file, "--threads", "1", "--quiet",
                              "--engine", engine, "--out", res], env, work)
                    got = json.load(open(res))
                    reqs, failed = got["requests"]["total"], got["requests"]["failed"]
                elif tool == "headroom-bare":
                    res = os.path.join(d, "b.json")
                    measured([headroom, "run", base + "/", "-c", str(a.users), "-d", f"{a.duration}s",
                              "--threads", "1", "--quiet", "--out", res], env, work)
                    got = json.load(open(res))
                    reqs, failed = got["requests"]["total"], got["requests"]["failed"]
                elif tool == "k6":
                    res = os.path.join(d, "k6.json")
                    measured([a.k6, "run", "--quiet", "--no-color", "--summary-export", res, files["k6"]],
                             env, work)
                    m = json.load(open(res))["metrics"]
                    reqs = int(m["http_reqs"]["count"])
                    failed = int(m["http_req_failed"].get("passes", 0))
                    checks = m["checks"]
                    failed += int(checks.get("fails", 0))
                elif tool == "locust":
                    out, _ = measured([a.locust, "-f", files["locust"], "--headless", "-u", str(a.users),
                                       "-r", str(a.users), "-t", f"{a.duration}s", "--host", base,
                                       "--json", "--skip-log", "--stop-timeout", "5"], env, work)
                    stats = json.loads(out)
                    reqs = sum(s["num_requests"] for s in stats)
                    failed = sum(s["num_failures"] for s in stats)
                elif tool == "gatling":
                    # One JVM on one core; its start-up is in the figure.
                    measured(["java", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                              "-XX:ActiveProcessorCount=1", f"-Dport={port}",
                              f"-Dusers={a.users}", f"-Dseconds={a.duration}",
                              "-cp", f"{GATLING_LIB}/*:{work}/classes", "io.gatling.app.Gatling",
                              "-s", "ShopSimulation", "-rf", os.path.join(d, "gatling"), "-nr"],
                             env, work)
                    time.sleep(0.3)
                    reqs, failed = log_lines(d) - before_log, 0
                elif tool == "jmeter":
                    jtl = os.path.join(d, "jmeter.jtl")
                    if os.path.exists(jtl):
                        os.remove(jtl)
                    # One JVM on one core; its start-up (~2 s of CPU) is in
                    # the figure, as it is in every run of JMeter.
                    measured(["java", "-XX:ActiveProcessorCount=1", "-jar", a.jmeter, "-n", "-t", files["jmeter"],
                              f"-Jhost=127.0.0.1", f"-Jport={port}", f"-Jusers={a.users}",
                              f"-Jseconds={a.duration}", "-Jjmeterengine.nongui.port=0",
                              "-l", jtl, "-j", os.path.join(d, "jmeter.log")], env, work)
                    with open(jtl) as f:
                        lines = f.read().splitlines()[1:]
                    reqs = len(lines)
                    failed = sum(1 for line in lines if ",false," in line)
                else:
                    sys.exit(f"unknown tool {tool}")
                cpu = children_cpu() - before_cpu
                time.sleep(0.3)
                served = log_lines(d) - before_log
                rows.append(dict(round=r, tool=tool, requests=reqs, failed=failed, served=served,
                                 cpu_s=cpu, per_cpu_s=reqs / cpu if cpu else 0.0))
                x = rows[-1]
                print(f"round {r} {tool:<14} {reqs:>9} req ({failed} failed; server saw {served:>9})"
                      f"  cpu {cpu:6.2f} s  {x['per_cpu_s']:>9.0f} req/cpu-s", flush=True)
    finally:
        nginx.terminate(); nginx.wait()
    med = {t: statistics.median(x["per_cpu_s"] for x in rows if x["tool"] == t) for t in tools}
    lines = [f"scripted session {a.session} ({DESCRIBED[a.session]}); "
             f"{a.users} users, {a.duration} s x {a.rounds} rounds; nginx on CPU 0, generator on CPU 1",
             "requests per generator CPU-second (median): " +
             ", ".join(f"{t} {med[t]:.0f}" for t in tools)]
    if "headroom" in med:
        for peer in ("k6", "locust", "jmeter"):
            if peer in med and med[peer]:
                lines.append(f"headroom / {peer}: {med['headroom'] / med[peer]:.1f}x")
        if "gatling" in med and med["gatling"]:
            lines.append(f"headroom / gatling: {med['headroom'] / med['gatling']:.1f}x")
        if "headroom-js" in med:
            lines.append(f"headroom with a script hook per request / declarative: "
                         f"{med['headroom-js'] / med['headroom']:.2f}")
        if "headroom-bare" in med:
            lines.append(f"headroom scripted / its bare GET: {med['headroom'] / med['headroom-bare']:.2f}")
        if "headroom-tasks" in med and med["headroom-tasks"]:
            lines.append(f"headroom event loop / tasks: {med['headroom'] / med['headroom-tasks']:.2f}")
    print("\n".join(lines))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "rounds.json"), "w") as f:
            json.dump(rows, f, indent=1)
        with open(os.path.join(a.out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
