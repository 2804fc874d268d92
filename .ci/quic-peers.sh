#!/usr/bin/env bash
# The HTTP/3 servers the tests load, built once into the cache:
# - Caddy (Apache-2.0) from the Go module proxy, into
#   ~/.cache/headroom/caddy-$CADDY_VERSION/caddy;
# - aioquic (BSD) from PyPI, in a virtualenv of Debian's python3 at
#   ~/.cache/headroom/aioquic-$AIOQUIC_VERSION (the second HTTP/3
#   implementation, and the hostile server: resets, GOAWAY).
# Needs go, python3-venv; idempotent.
set -euo pipefail

CADDY_VERSION=2.11.9
AIOQUIC_VERSION=1.2.0
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/headroom

# The machine's Go (1.26 here; Debian's golang-go is too old for Caddy
# 2.11), wherever PATH leaves it.
GO=$(command -v go || echo /usr/local/go/bin/go)

caddy_dir="$CACHE/caddy-$CADDY_VERSION"
if [ ! -x "$caddy_dir/caddy" ]; then
  mkdir -p "$caddy_dir"
  GOBIN="$caddy_dir" GOFLAGS=-mod=mod "$GO" install "github.com/caddyserver/caddy/v2/cmd/caddy@v$CADDY_VERSION"
fi

venv="$CACHE/aioquic-$AIOQUIC_VERSION"
if ! "$venv/bin/python" -c "import aioquic" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "aioquic==$AIOQUIC_VERSION"
fi
echo "$caddy_dir/caddy $venv/bin/python"
