#!/usr/bin/env bash
# Runs the end-to-end suite: uses the cluster of $KUBECONFIG if one answers,
# else starts the local cluster (hack/local-cluster.sh, root); loads the
# image built by `make image` into it, installs the chart, runs test/e2e
# (build tag e2e) and uninstalls, also when the suite fails. The suite runs
# on the node: it reads the host-path PFS (/srv/pfs) to check the data. HELM_ARGS adds
# install flags, for example HELM_ARGS="--set csi.enabled=false". E2E_FOCUS
# runs only the specs whose text matches it (a regular expression).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
NS="${E2E_NAMESPACE:-burstcache-system}"
LOCAL_KUBECONFIG="${BURSTCACHE_CLUSTER_STATE:-/var/lib/burstcache-cluster}/admin.kubeconfig"
kubectl="$(hack/k8s-binaries.sh kubectl)/kubectl"
helm="$(hack/tool.sh helm)"

if [ -z "${KUBECONFIG:-}" ] || ! "$kubectl" get --raw /readyz >/dev/null 2>&1; then
	hack/local-cluster.sh up >/dev/null
	export KUBECONFIG="$LOCAL_KUBECONFIG"
fi
# The suite's job: test/e2e/workload, alone in an image (no shell needed).
CGO_ENABLED=0 go build -trimpath -o bin/e2e-workload ./test/e2e/workload
go build -o bin/image-packer ./hack/image
bin/image-packer -binary bin/e2e-workload -path /workload -uid 1000 -user-name job \
	-tag burstcache-e2e-workload:dev -out bin/images/e2e-workload.tar
if [ "$KUBECONFIG" = "$LOCAL_KUBECONFIG" ]; then
	hack/local-cluster.sh load bin/images/burstcache.tar >/dev/null
	hack/local-cluster.sh load bin/images/e2e-workload.tar >/dev/null
fi

# A namespace that an earlier run's uninstall is still deleting refuses new
# content: wait until it is gone.
if [ "$("$kubectl" get namespace "$NS" -o jsonpath='{.status.phase}' 2>/dev/null)" = Terminating ]; then
	echo "Waiting for namespace $NS of an earlier run to be deleted" >&2
	"$kubectl" wait --for=delete "namespace/$NS" --timeout=10m >/dev/null
fi
# The e2e pool keeps its servers' cache directories here. A server drained
# by its instance's teardown removes its files when it stops, but a run that
# was interrupted, or a teardown that discarded data, leaves them, each with
# its preallocated slab: with no instance left they are scratch.
e2e_cache=/var/lib/burstcache-e2e/cache
if [ -d "$e2e_cache" ] && [ -z "$("$kubectl" get cacheinstances -A -o name 2>/dev/null)" ]; then
	rm -rf "${e2e_cache:?}"/*
fi
"$kubectl" create namespace "$NS" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" label namespace "$NS" --overwrite pod-security.kubernetes.io/enforce=privileged \
	pod-security.kubernetes.io/audit=restricted >/dev/null
uninstall() {
	"$helm" uninstall burstcache --namespace "$NS" --wait >/dev/null 2>&1 || true
	"$kubectl" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
}
trap uninstall EXIT
# shellcheck disable=SC2086
"$helm" upgrade --install burstcache charts/burstcache --namespace "$NS" --wait --timeout 5m ${HELM_ARGS:-}
export E2E_NAMESPACE="$NS" E2E_HELM="$helm"
if [ -n "${E2E_FOCUS:-}" ]; then
	go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/ -ginkgo.v -ginkgo.label-filter='!uninstall' -ginkgo.focus="$E2E_FOCUS"
	exit
fi
go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/ -ginkgo.v -ginkgo.label-filter='!uninstall'
# Last, alone: helm uninstall leaves nothing behind.
go test -tags e2e -count=1 -timeout 10m -v ./test/e2e/ -ginkgo.v -ginkgo.label-filter=uninstall
