# headroom in a distroless image, for `headroom k8s` Jobs.
#   docker build -t registry.example/headroom:0.1 .
# A glibc build in gcr.io/distroless/cc-debian12 (glibc 2.36, libgcc_s,
# CA certificates; no shell): the binary the test suite runs, with glibc's
# allocator. A static musl build FROM scratch measured the same here
# (bench/runs/2026-11-27-musl-vs-glibc: 125,610 vs 129,388 requests per
# generator CPU-second, one core) — it is one `--target` away, but nothing
# tests it. `.ci/image-check.sh` checks the binary against this image's
# libraries (no container builder runs on the CI machine). It runs as
# nobody (65534), reads the scenario from the ConfigMap volume and writes
# to stdout (`--out - --report-to -`), so the root filesystem stays
# read-only.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p headroom \
    && strip target/release/headroom

FROM gcr.io/distroless/cc-debian12
COPY --from=build /src/target/release/headroom /usr/local/bin/headroom
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/headroom"]
