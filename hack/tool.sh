#!/usr/bin/env bash
# Installs one pinned Go tool from the Go module proxy into a cache outside the
# checkout (keyed by version, so fresh clones reuse it) and links it into bin/.
# Prints the path of the installed binary.
#
#   hack/tool.sh controller-gen|ginkgo|golangci-lint|helm|kwok|csi-sanity
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${BURSTCACHE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/burstcache}"
name="${1:?usage: hack/tool.sh NAME}"

# ginkgo must match the library version in go.mod, so it is read from there.
ginkgo_version() { awk '$1 == "github.com/onsi/ginkgo/v2" { print $2 }' "$root/go.mod"; }

case "$name" in
controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen version=v0.21.0 ;;
ginkgo) pkg=github.com/onsi/ginkgo/v2/ginkgo version="$(ginkgo_version)" ;;
golangci-lint) pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint version=v2.15.0 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.19.0 ;;
kwok) pkg=sigs.k8s.io/kwok/cmd/kwok version=v0.8.0 ;;
csi-sanity) pkg=github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity version=v5.4.0 ;;
*) echo "hack/tool.sh: unknown tool $name" >&2; exit 2 ;;
esac
[ -n "$version" ] || { echo "hack/tool.sh: no version for $name" >&2; exit 2; }

dir="$CACHE/tools/$name-$version"
if [ ! -x "$dir/$name" ]; then
	echo "Installing $name $version from the Go module proxy" >&2
	mkdir -p "$dir"
	# GOFLAGS from the environment (for example -mod=vendor) must not leak into
	# a tool install outside this module.
	GOFLAGS= GOBIN="$dir" CGO_ENABLED=0 go install "$pkg@$version" >&2
fi
mkdir -p "$root/bin"
ln -sf "$dir/$name" "$root/bin/$name"
echo "$root/bin/$name"
