#!/usr/bin/env python3
"""An HTTP server instrumented with the OpenTelemetry Python SDK, as a
user's service would be: each request continues the trace its
`traceparent` names (the W3C propagator) with a server span, exported by
OTLP/HTTP to a collector or tracing backend (Jaeger, an OpenTelemetry
collector). `/sleep?ms=N` answers after N ms; anything else at once.

    instrumented_server.py PORT OTLP_TRACES_URL

Needs `opentelemetry-sdk` and `opentelemetry-exporter-otlp-proto-http`
(PyPI). Prints `ready PORT` once listening; flushes its spans on SIGTERM.
"""
import signal, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

PORT, OTLP = int(sys.argv[1]), sys.argv[2]
provider = TracerProvider(resource=Resource.create({"service.name": "instrumented-server"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=OTLP), max_queue_size=65536))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("instrumented-server")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        parent = propagate.extract(dict(self.headers.items()))
        url = urlparse(self.path)
        with tracer.start_as_current_span("GET " + url.path, context=parent,
                                          kind=trace.SpanKind.SERVER):
            ms = int(parse_qs(url.query).get("ms", ["0"])[0])
            if url.path == "/sleep" and ms > 0:
                time.sleep(ms / 1000.0)
            body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


def stop(*_):
    provider.shutdown()  # exports what is left
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(f"ready {PORT}", flush=True)
server.serve_forever()
