#!/usr/bin/env bash
# headroom built with profile-guided optimisation: target/pgo/headroom.
#
# Why: at 50 connections ~40 % of headroom's user-space CPU per request was
# the CPU fetching code (its hot path spread over tokio, the engine and the
# HTTP client, more than the 32 KiB instruction cache holds); laid out by a
# profile, the hot code sits together (cachegrind: 10.3 -> 0.3 simulated
# instruction-cache misses per request at 1,000 connections). Figures:
# README "Performance".
#
# How: an instrumented build runs a short training load (plain GETs at 50
# and 1,000 connections, an open-model rate, the login-flow scenario)
# against the built-in sample server on a free loopback port; the counts
# it writes are merged (llvm-profdata, from rustup's llvm-tools) and the
# release build uses them. Two release builds: ~2x `cargo build --release`.
#
# Usage: scripts/pgo-build.sh        (from anywhere; needs rustup)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/target/pgo
profiles=$out/profiles

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$sysroot/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools
fi

rm -rf "$profiles"
mkdir -p "$profiles"
RUSTFLAGS="-Cprofile-generate=$profiles" \
    cargo build --release --locked -p headroom --target-dir "$out/instrumented"
trained=$out/instrumented/release/headroom

# The sample server, stopped by its PID however the training ends. It is
# the instrumented binary too; its own counts are merged with the rest (it
# is part of the binary).
log=$out/target.log
"$trained" target --listen 127.0.0.1:0 --workers 0 --threads 8 > "$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    base=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)
    [ -n "$base" ] && break
    sleep 0.1
done
[ -n "$base" ] || { echo "the sample server did not start: $(cat "$log")" >&2; exit 1; }

train() { "$trained" run --quiet --out "$out/training.json" "$@"; }
train --url "$base/hello" -c 50 -d 3s --threads 1
train --url "$base/hello" -c 1000 -d 3s --threads 1
train --url "$base/hello" --rate 2000 -d 3s --threads 1
BASE_URL=$base USERS=8 DURATION=3s train examples/login-flow.toml

kill "$server"
wait "$server" 2>/dev/null || true
trap - EXIT

"$profdata" merge -o "$out/headroom.profdata" "$profiles"
RUSTFLAGS="-Cprofile-use=$out/headroom.profdata" \
    cargo build --release --locked -p headroom --target-dir "$out/build"
cp "$out/build/release/headroom" "$out/headroom"
echo "built $out/headroom (profile-guided)"
