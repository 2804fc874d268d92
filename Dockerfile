# headroom as a static binary in an empty image, for `headroom k8s` Jobs.
#   docker build -t registry.example/headroom:0.1 .
# The binary is linked against musl (no libc in the image); it runs as
# nobody (65534), reads the scenario from the ConfigMap volume and writes
# its results to stdout (`--out -`), so the root filesystem stays read-only.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p headroom \
    && strip target/x86_64-unknown-linux-musl/release/headroom

FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/headroom /usr/local/bin/headroom
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/headroom"]
