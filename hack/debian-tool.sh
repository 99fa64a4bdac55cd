#!/usr/bin/env bash
# Installs one Debian package's tool with apt-get, unless the machine has
# it already, and prints the path of the binary.
#
#   hack/debian-tool.sh fio
set -euo pipefail

name="${1:?usage: hack/debian-tool.sh NAME}"

case "$name" in
fio) package=fio ;;
*) echo "hack/debian-tool.sh: unknown tool $name" >&2; exit 2 ;;
esac

if ! command -v "$name" >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "hack/debian-tool.sh: installing $package needs root" >&2; exit 1; }
	echo "Installing $package from Debian" >&2
	# The package lists may be older than the mirror: refresh them once.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2 ||
		{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2; }
fi
command -v "$name"
