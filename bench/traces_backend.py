#!/usr/bin/env python3
"""From an exemplar to its trace in a real tracing backend: Jaeger v2
(all-in-one, memory storage, OTLP/HTTP in, its query API out; loopback,
free ports) receives the spans of a server instrumented with the
OpenTelemetry SDK (`bench/traces/instrumented_server.py`), which continues
the trace of each request's `traceparent`. headroom runs a traced mix
(fast `/` and `/sleep?ms=20`) against it; then each of results.json's
ranked exemplars is looked up in Jaeger by its trace ID, and its server
span must be the child of the exemplar's span ID.

Usage: bench/traces_backend.py --jaeger PATH --python VENV_PYTHON
                               [--headroom target/release/headroom] [--seconds 5]

Jaeger: `go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0`
in a scratch module, then `go build`; the Python: a venv with
opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http.
"""
import argparse, json, os, socket, subprocess, sys, tempfile, time, urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def wait_port(port, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} never listened on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jaeger", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--headroom", default="target/release/headroom")
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="headroom-traces-")
    query, query_grpc, otlp, port = free_port(), free_port(), free_port(), free_port()
    metrics = free_port()
    config = open(os.path.join(os.path.dirname(__file__), "traces/jaeger.yaml")).read()
    for name, value in (("{otlp}", otlp), ("{query}", query), ("{query_grpc}", query_grpc),
                        ("{metrics}", metrics)):
        config = config.replace(name, str(value))
    open(f"{d}/jaeger.yaml", "w").write(config)
    jaeger = subprocess.Popen([a.jaeger, "--config", f"{d}/jaeger.yaml"],
                              stdout=open(f"{d}/jaeger.log", "w"), stderr=subprocess.STDOUT)
    server = None
    try:
        wait_port(otlp, "Jaeger's OTLP receiver"); wait_port(query, "Jaeger's query API")
        server = subprocess.Popen([a.python, os.path.join(os.path.dirname(__file__), "traces/instrumented_server.py"),
                                   str(port), f"http://127.0.0.1:{otlp}/v1/traces"], stdout=subprocess.PIPE)
        server.stdout.readline()
        scenario = f"""base_url = "http://127.0.0.1:{port}"
[load]
vus = 4
duration = "{a.seconds}s"
[[request]]
name = "fast"
path = "/"
[[request]]
name = "slow"
path = "/sleep?ms=20"
"""
        open(f"{d}/mix.toml", "w").write(scenario)
        out = f"{d}/results.json"
        r = subprocess.run([a.headroom, "run", f"{d}/mix.toml", "--trace", "--quiet", "--out", out])
        if r.returncode != 0:
            sys.exit(f"headroom exited {r.returncode}")
        server.terminate(); server.wait(timeout=60)  # its spans flushed
        results = json.load(open(out))
        ranked = sorted((e for e in results["exemplars"] if e.get("rank")), key=lambda e: e["rank"])
        found = children = 0
        deadline = time.time() + 30
        for e in ranked:
            while True:
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{query}/api/traces/{e['trace_id']}").read()
                    spans = json.loads(body)["data"][0]["spans"]
                    break
                except Exception:
                    if time.time() > deadline:
                        spans = []; break
                    time.sleep(0.5)
            if spans:
                found += 1
                parents = {ref["spanID"] for s in spans for ref in s.get("references", [])
                           if ref.get("refType") == "CHILD_OF"}
                children += e["span_id"] in parents
        total = results["requests"]["total"]
        print(f"{total} requests traced; of results.json's {len(ranked)} ranked exemplars, "
              f"{found} traces found in Jaeger by trace ID, {children} with the server's span a child "
              f"of the exemplar's span ID; slowest {ranked[0]['latency_ms']:.1f} ms ({ranked[0]['name']}), "
              f"100th {ranked[-1]['latency_ms']:.1f} ms")
    finally:
        if server and server.poll() is None:
            server.kill()
        jaeger.terminate(); jaeger.wait()

if __name__ == "__main__":
    main()
