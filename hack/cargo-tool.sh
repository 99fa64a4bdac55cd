#!/usr/bin/env bash
# Installs one pinned Rust tool from crates.io with `cargo install` into a
# cache outside the checkout (keyed by version, so a second run and fresh
# clones reuse it) and links it into bin/. Prints the path of the binary.
#
#   hack/cargo-tool.sh pjdfstest|fsx
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${BURSTCACHE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/burstcache}"
name="${1:?usage: hack/cargo-tool.sh NAME}"

case "$name" in
pjdfstest) crate=pjdfstest version=0.2.2 ;;
fsx) crate=fsx version=0.3.2 ;;
*) echo "hack/cargo-tool.sh: unknown tool $name" >&2; exit 2 ;;
esac

cargo="$(command -v cargo || true)"
[ -n "$cargo" ] || cargo="$HOME/.cargo/bin/cargo"
[ -x "$cargo" ] || { echo "hack/cargo-tool.sh: cargo not found" >&2; exit 1; }

dir="$CACHE/tools/$name-$version"
if [ ! -x "$dir/bin/$name" ]; then
	echo "Installing $crate $version from crates.io" >&2
	mkdir -p "$dir"
	# --locked builds with the dependency versions the crate was published with.
	"$cargo" install --locked --quiet --root "$dir" --version "=$version" "$crate" >&2
fi
mkdir -p "$root/bin"
ln -sf "$dir/bin/$name" "$root/bin/$name"
echo "$root/bin/$name"
