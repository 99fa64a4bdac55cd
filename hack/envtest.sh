#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kubectl for envtest
# (KUBEBUILDER_ASSETS), building them from the Go module proxy the first time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$("$root/hack/k8s-binaries.sh" kube-apiserver etcd kubectl)"
mkdir -p "$root/bin"
ln -sfn "$dir" "$root/bin/k8s"
echo "$root/bin/k8s"
