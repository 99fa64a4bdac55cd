#!/usr/bin/env bash
# Generates the generated parts of charts/burstcache (crds/, templates/generated/,
# dashboards/, README.md) from config/ with kustomize (built into kubectl) and hack/chart.
# `make chart` runs it; `make verify` fails when its output differs from the
# committed chart.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
kubectl="$(hack/k8s-binaries.sh kubectl)/kubectl"
"$kubectl" kustomize config/default | go run ./hack/chart -chart charts/burstcache -config config
