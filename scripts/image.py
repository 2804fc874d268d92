#!/usr/bin/env python3
"""Build headroom's container image without a daemon, a builder or a registry.

usage: scripts/image.py BINARY OUT.tar [--tag NAME:TAG]

FROM scratch, one layer: the binary (stripped) at /usr/local/bin/headroom, the shared
libraries `ldd` says it loads (glibc, libgcc_s, the loader) at their paths,
the CA certificates (headroom trusts the system's roots for https
targets), an /etc/passwd and /etc/group naming nobody (65534), and a
world-writable /tmp. It runs as 65534. The tarball is an OCI image layout
(index.json, oci-layout, blobs/sha256/…) that also carries docker-save's
manifest.json, so each of these loads it:

    ctr -n k8s.io images import OUT.tar     # containerd (Kubernetes nodes)
    podman load -i OUT.tar
    docker load -i OUT.tar
    skopeo copy oci-archive:OUT.tar docker://registry.example/headroom:TAG

Bytes are reproducible: every mtime is 0 and names are sorted.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
import tempfile

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
USER = "65534:65534"


def shared_libraries(binary):
    """The absolute paths `ldd` resolves for BINARY (the vDSO has none)."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if m:
            paths.append(m.group(1))
    if not paths:
        raise SystemExit(f"image.py: ldd lists no libraries for {binary}: is it a dynamic ELF?")
    return paths


def entry(name, data=None, mode=0o644, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name.lstrip("/"))
    info.type, info.mode, info.mtime = kind, mode, 0
    if data is not None:
        info.size = len(data)
    return info, (io.BytesIO(data) if data is not None else None)


def stripped(binary):
    """The binary without its symbols and debug info (a third of its size)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "headroom")
        subprocess.run(["strip", "-o", out, binary], check=True)
        return open(out, "rb").read()


def layer(binary):
    files = {"/usr/local/bin/headroom": (stripped(binary), 0o755)}
    for lib in shared_libraries(binary):
        # Loaded by the path ldd printed: the loader's must be exact, and the
        # libraries' real files are copied (symlinks resolved).
        files[lib] = (open(os.path.realpath(lib), "rb").read(), 0o755)
    if os.path.exists(CA_BUNDLE):
        files[CA_BUNDLE] = (open(CA_BUNDLE, "rb").read(), 0o644)
    files["/etc/passwd"] = (b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0o644)
    files["/etc/group"] = (b"nogroup:x:65534:\n", 0o644)

    dirs = {"tmp"}
    for path in files:
        parts = path.strip("/").split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            info, _ = entry(d, mode=0o1777 if d == "tmp" else 0o755, kind=tarfile.DIRTYPE)
            tar.addfile(info)
        for path in sorted(files):
            data, mode = files[path]
            tar.addfile(*entry(path, data, mode))
    return buf.getvalue()


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("out")
    parser.add_argument("--tag", default="headroom:dev", help="the image's name (default headroom:dev)")
    args = parser.parse_args()

    diff = layer(args.binary)
    diff_id = "sha256:" + hashlib.sha256(diff).hexdigest()
    layer_digest, layer_gz = blob(gzip.compress(diff, mtime=0))
    config_digest, config = blob(json.dumps({
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Entrypoint": ["/usr/local/bin/headroom"], "User": USER, "WorkingDir": "/",
                   "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/image.py"}],
    }, sort_keys=True, separators=(",", ":")).encode())
    manifest_digest, manifest = blob(json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest, "size": len(layer_gz)}],
    }, sort_keys=True, separators=(",", ":")).encode())
    ref = args.tag if "/" in args.tag.split(":")[0] or "." in args.tag else "docker.io/library/" + args.tag
    index = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": len(manifest),
                       "annotations": {"io.containerd.image.name": ref,
                                       "org.opencontainers.image.ref.name": args.tag.rsplit(":", 1)[-1]}}],
    }, separators=(",", ":")).encode()
    path = lambda digest: "blobs/sha256/" + digest.split(":")[1]
    docker_manifest = json.dumps([{"Config": path(config_digest), "RepoTags": [args.tag],
                                   "Layers": [path(layer_digest)]}]).encode()

    with tarfile.open(args.out, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(entry(d, mode=0o755, kind=tarfile.DIRTYPE)[0])
        for name, data in sorted([
            (path(layer_digest), layer_gz), (path(config_digest), config),
            (path(manifest_digest), manifest), ("index.json", index),
            ("manifest.json", docker_manifest),
            ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
        ]):
            tar.addfile(*entry(name, data))
    print(f"{args.out}: {args.tag} ({len(layer_gz) / 1e6:.1f} MB compressed), "
          f"manifest {manifest_digest}")


if __name__ == "__main__":
    main()
