#!/usr/bin/env bash
# Builds Kubernetes binaries (kube-apiserver, etcd, kubectl, and for a local
# cluster kubelet, kube-controller-manager, kube-scheduler, kube-proxy) from the
# Go module proxy, since nothing else can be downloaded here. The results are
# cached outside the checkout, keyed by version, so fresh clones on the same
# machine reuse them; the directory holding them is printed on stdout.
#
#   hack/k8s-binaries.sh [component...]   (default: kube-apiserver etcd kubectl)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
CACHE="${BURSTCACHE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/burstcache}"
OUT="$CACHE/k8s-$K8S_VERSION/bin"
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver etcd kubectl)

missing=()
for c in "${components[@]}"; do
	[ -x "$OUT/$c" ] || missing+=("$c")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "$OUT"
	exit 0
fi

mkdir -p "$OUT"
work="$CACHE/k8s-$K8S_VERSION/wrapper"
mkdir -p "$work"
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${K8S_VERSION#v1.}"

# The wrapper module requires k8s.io/kubernetes and pins every staging module
# (listed in the kubernetes go.mod as local replaces) to its published version.
kmod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
{
	echo "module burstcache.local/k8s-binaries"
	echo
	echo "go 1.26.0"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $K8S_VERSION"
	echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
	echo ")"
	echo
	grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging/' "$kmod" |
		awk -v v="$staging" '{ printf "replace %s => %s %s\n", $1, $1, v }'
} >"$work/go.mod"
cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO

cd "$work"
echo "Building ${missing[*]} $K8S_VERSION from the Go module proxy (cold: 10-20 minutes on 2 cores)" >&2
GOFLAGS=-mod=mod go mod tidy -e >&2 2>/dev/null || GOFLAGS=-mod=mod go mod tidy >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
pkgs=()
for c in "${missing[@]}"; do
	case "$c" in
	etcd) ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy | kubelet | kubectl) pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
	*) echo "unknown component $c" >&2; exit 2 ;;
	esac
done
export CGO_ENABLED=0
if [ ${#pkgs[@]} -gt 0 ]; then
	go build -trimpath -ldflags "$ldflags" -o "$OUT/" "${pkgs[@]}" >&2
fi
for c in "${missing[@]}"; do
	if [ "$c" = etcd ]; then
		go build -trimpath -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
		mv "$OUT/etcd.tmp" "$OUT/etcd"
	fi
done
echo "$OUT"
