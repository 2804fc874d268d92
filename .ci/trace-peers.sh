#!/usr/bin/env bash
# The tracing backend the trace tests hand spans to, built once into the
# cache:
# - Jaeger v2 all-in-one (Apache-2.0) from the Go module proxy, into
#   ~/.cache/headroom/jaeger-$JAEGER_VERSION/jaeger (its go.mod has replace
#   directives, so `go install pkg@version` refuses it: built from a
#   scratch module that requires it as a tool);
# - the OpenTelemetry Python SDK and its OTLP/HTTP exporter (Apache-2.0)
#   from PyPI, in a virtualenv of Debian's python3 at
#   ~/.cache/headroom/otel-$OTEL_VERSION, for the instrumented server
#   (bench/traces/instrumented_server.py).
# Needs go, python3-venv; idempotent.
set -euo pipefail

JAEGER_VERSION=1.76.0
OTEL_VERSION=1.45.2
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/headroom
GO=$(command -v go || echo /usr/local/go/bin/go)

jaeger_dir="$CACHE/jaeger-$JAEGER_VERSION"
if [ ! -x "$jaeger_dir/jaeger" ]; then
  scratch=$(mktemp -d)
  (
    cd "$scratch"
    "$GO" mod init jaeger-build >/dev/null 2>&1
    "$GO" get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@v$JAEGER_VERSION"
    mkdir -p "$jaeger_dir"
    "$GO" build -o "$jaeger_dir/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger
  )
  rm -rf "$scratch"
fi

venv="$CACHE/otel-$OTEL_VERSION"
if ! "$venv/bin/python" -c "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "opentelemetry-sdk==$OTEL_VERSION" \
    "opentelemetry-exporter-otlp-proto-http==$OTEL_VERSION"
fi
echo "$jaeger_dir/jaeger $venv/bin/python"
