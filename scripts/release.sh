#!/usr/bin/env bash
# The release archive: headroom-VERSION-TARGET.tar.gz (+ .sha256) in
# target/dist/ (or --out DIR), holding
#   bin/headroom                      the binary (stripped)
#   share/man/man1/headroom*.1        man pages, one per command
#   share/completions/                headroom.bash, _headroom (zsh), headroom.fish
#   share/schemas/                    JSON Schemas of scenario, study and results files
#   LICENSE-MIT, LICENSE-APACHE       headroom's licence (either)
#   THIRD-PARTY-LICENSES.md           every crate compiled in, with its licence texts
#   README.md
# Everything but the binary comes from the binary itself (man pages,
# completions and schemas are generated from its own definitions), so the
# archive cannot describe another build.
#
# Usage: scripts/release.sh [--profile P] [--binary PATH] [--out DIR]
#   --profile P    cargo profile to build (default release: fat LTO, 6.5 % less
#                  CPU per request than without — bench/README.md)
#   --binary PATH  package this already built binary instead of building
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
profile=release binary= out=$root/target/dist
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "scripts/release.sh: unknown argument '$1' (--profile P, --binary PATH, --out DIR)" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  cargo build --locked --profile "$profile" -p headroom
  binary=${CARGO_TARGET_DIR:-$root/target}/$profile/headroom
fi
[ -x "$binary" ] || { echo "scripts/release.sh: $binary is not an executable" >&2; exit 1; }

version=$("$binary" --version | awk '{print $2}')
target=$(rustc -vV | sed -n 's/^host: //p')
name=headroom-$version-$target
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir=$stage/$name
mkdir -p "$dir/bin" "$dir/share/man/man1" "$dir/share/completions" "$dir/share/schemas"

strip -o "$dir/bin/headroom" "$binary"
"$dir/bin/headroom" docs --out "$stage/docs" > /dev/null
cp "$stage"/docs/man/*.1 "$dir/share/man/man1/"
"$dir/bin/headroom" completions bash > "$dir/share/completions/headroom.bash"
"$dir/bin/headroom" completions zsh > "$dir/share/completions/_headroom"
"$dir/bin/headroom" completions fish > "$dir/share/completions/headroom.fish"
for which in scenario study results; do
  "$dir/bin/headroom" schema "$which" > "$dir/share/schemas/$which.schema.json"
done
cp LICENSE-MIT LICENSE-APACHE README.md "$dir/"
python3 scripts/third-party-licenses.py "$dir/THIRD-PARTY-LICENSES.md"

# Reproducible bytes: sorted names, one owner, the last commit's time.
stamp=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$stamp" \
  -C "$stage" -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1))"
