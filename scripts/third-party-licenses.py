#!/usr/bin/env python3
"""Write the licences of every crate compiled into the headroom binary.

usage: third-party-licenses.py OUT.md

The crates are those `cargo metadata` resolves for the `headroom` package
through normal dependencies (build scripts and proc-macros run at build
time and ship nothing). Each crate's licence expression comes from its
manifest, and its licence texts from the files it ships (LICENSE*,
COPYING*, NOTICE*): the authors' own words, not a template. A crate that
ships none is listed with its expression and says so.
"""
import json
import pathlib
import subprocess
import sys

TEXT_NAMES = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "COPYRIGHT", "UNLICENSE")


def compiled_in(metadata):
    """Package ids reachable from headroom's binary through normal edges."""
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    packages = {p["id"]: p for p in metadata["packages"]}
    root = next(p["id"] for p in metadata["packages"] if p["name"] == "headroom")
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            normal = any(k["kind"] is None for k in dep["dep_kinds"])
            target = packages[dep["pkg"]]
            proc_macro = any("proc-macro" in t["kind"] for t in target["targets"])
            if normal and not proc_macro:
                todo.append(dep["pkg"])
    return [packages[p] for p in seen]


def licence_texts(package):
    root = pathlib.Path(package["manifest_path"]).parent
    files = []
    if package.get("license_file"):
        files.append(root / package["license_file"])
    for entry in sorted(root.iterdir()):
        if entry.is_file() and entry.name.upper().startswith(TEXT_NAMES) and entry not in files:
            files.append(entry)
    return files


def main(out):
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked",
             "--filter-platform", "x86_64-unknown-linux-gnu"],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    workspace = set(metadata["workspace_members"])
    crates = sorted(
        (p for p in compiled_in(metadata) if p["id"] not in workspace),
        key=lambda p: (p["name"], p["version"]),
    )
    lines = [
        "# Third-party licences",
        "",
        f"The headroom binary is built from these {len(crates)} crates besides its own.",
        "",
        "| crate | version | licence |",
        "|---|---|---|",
    ]
    lines += [f"| {p['name']} | {p['version']} | {p.get('license') or 'see its text'} |" for p in crates]
    missing = []
    for p in crates:
        lines += ["", f"## {p['name']} {p['version']}", "", f"Licence: {p.get('license') or 'see below'}"]
        texts = licence_texts(p)
        if not texts:
            missing.append(p["name"])
            lines += ["", "(the crate ships no licence file; its manifest's expression above applies)"]
        for path in texts:
            lines += ["", f"### {path.name}", "", "```", path.read_text(errors="replace").rstrip(), "```"]
    pathlib.Path(out).write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(crates)} crates, {len(crates) - len(missing)} with licence texts"
          + (f"; without: {', '.join(missing)}" if missing else ""))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
