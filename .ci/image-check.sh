#!/usr/bin/env bash
# The container image's binary, checked where no container builder runs
# (the CI machine's `docker` is a client without an engine, and podman or
# buildah would need base images from a registry CI cannot reach). The
# Dockerfile copies a glibc build of headroom into
# gcr.io/distroless/cc-debian12, which holds glibc 2.36 (libc, libm, the
# loader), libgcc_s and nothing else: the binary must run, need no other
# shared library, and no glibc symbol newer than 2.36.
set -euo pipefail
bin=${1:?usage: .ci/image-check.sh path/to/headroom}
dockerfile=${2:-Dockerfile}
"$bin" --version
grep -q '^FROM rust:1-bookworm AS build' "$dockerfile" || {
  echo "$dockerfile: the build stage is no longer Debian 12 (bookworm), the runtime's glibc"; exit 1; }
grep -q '^FROM gcr.io/distroless/cc-debian12' "$dockerfile" || {
  echo "$dockerfile: the runtime image is no longer distroless/cc-debian12"; exit 1; }
provided="libc.so.6 libm.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2 libpthread.so.0 libdl.so.2 librt.so.1"
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for lib in $needed; do
  case " $provided " in
    *" $lib "*) ;;
    *) echo "$bin needs $lib, which distroless/cc-debian12 does not have"; exit 1 ;;
  esac
done
newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
if [ "$(printf '%s\n2.36\n' "$newest" | sort -V | tail -1)" != "2.36" ]; then
  echo "$bin needs glibc $newest; distroless/cc-debian12 has 2.36"; exit 1
fi
echo "image binary: runs, needs $(echo $needed | tr '\n' ' ')(all in distroless/cc-debian12), glibc <= $newest"
