#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, without Docker or a registry:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy built from the Go module proxy (hack/k8s-binaries.sh), containerd
# 2.x built from the Go module proxy, runc and the CNI plugins from Debian, PKI
# made with openssl, and a pause image built locally (hack/image.sh).
#
#   hack/local-cluster.sh up       start (idempotent); prints the kubeconfig
#   hack/local-cluster.sh status   what runs, and the node's state
#   hack/local-cluster.sh load TAR import an image archive into the node
#   hack/local-cluster.sh down     stop and remove everything up made
#
# Network safety comes first: the node address lives on a port-less local
# bridge, and every cluster range is blackholed, so no cluster traffic can
# leave the machine through the default route. State and logs are kept in
# $STATE; build outputs stay cached in ~/.cache/burstcache.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${BURSTCACHE_CLUSTER_STATE:-/var/lib/burstcache-cluster}"
CACHE="${BURSTCACHE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/burstcache}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
NODE="${NODE_NAME:-$(hostname -s | tr '[:upper:]' '[:lower:]')}"
NODE_IP=10.200.0.1
BRIDGE=k8s0
SERVICE_CIDR=10.96.0.0/16
POD_CIDR=10.244.0.0/16
BLACKHOLES=(10.200.0.0/16 10.96.0.0/12 10.244.0.0/16)
RUN=/run/burstcache-containerd
SOCK="$RUN/containerd.sock"
KUBELET_DIR=/var/lib/kubelet
PAUSE_IMAGE=docker.io/library/burstcache-pause:dev
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# Order in which processes start; down stops them in reverse.
PROCESSES=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=hack/local-cluster/pki.sh
. "$root/hack/local-cluster/pki.sh"
# shellcheck source=hack/local-cluster/config.sh
. "$root/hack/local-cluster/config.sh"
# shellcheck source=hack/local-cluster/processes.sh
. "$root/hack/local-cluster/processes.sh"
# shellcheck source=hack/local-cluster/host.sh
. "$root/hack/local-cluster/host.sh"

kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
ctr() { "$CTR_BIN/ctr" --address "$SOCK" -n k8s.io "$@"; }

# binaries builds (once, cached) or finds everything up runs.
binaries() {
	K8S_BIN="$("$root/hack/k8s-binaries.sh" "${COMPONENTS[@]}")"
	CTR_BIN="$CACHE/containerd-$CONTAINERD_VERSION"
	if [ ! -x "$CTR_BIN/containerd" ] || [ ! -x "$CTR_BIN/containerd-shim-runc-v2" ] || [ ! -x "$CTR_BIN/ctr" ]; then
		log "Building containerd $CONTAINERD_VERSION from the Go module proxy"
		mkdir -p "$CTR_BIN"
		(cd / && GOFLAGS= GOBIN="$CTR_BIN" CGO_ENABLED=0 go install \
			"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
			"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION")
	fi
	export PATH="$CTR_BIN:$PATH"
}

# packages installs what Debian provides, if missing.
packages() {
	local missing=()
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	command -v socat >/dev/null || missing+=(socat)
	command -v openssl >/dev/null || missing+=(openssl)
	if [ ${#missing[@]} -gt 0 ]; then
		log "Installing ${missing[*]} from Debian"
		DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >&2
	fi
}

pause_image() {
	if [ ! -f "$root/bin/images/pause.tar" ]; then
		(cd "$root" && hack/image.sh pause >/dev/null)
	fi
	ctr images import "$root/bin/images/pause.tar" >/dev/null
}

wait_for() {
	local what="$1" timeout="$2"
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "$what not ready after ${timeout}s (logs: $STATE/logs)"
		sleep 1
	done
}

node_ready() {
	[ "$(kubectl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
	local start=$SECONDS
	network_guard
	packages
	binaries
	mkdir -p "$STATE/logs" "$STATE/pids"
	host_prepare
	pki
	write_configs
	start_process containerd "$CTR_BIN/containerd" --config "$STATE/containerd.toml"
	wait_for containerd 30 ctr version
	pause_image
	start_control_plane
	start_process kubelet "$K8S_BIN/kubelet" --config "$STATE/kubelet.yaml" \
		--kubeconfig "$STATE/kubelet.kubeconfig" --node-ip "$NODE_IP" --hostname-override "$NODE"
	start_process kube-proxy "$K8S_BIN/kube-proxy" --config "$STATE/kube-proxy.yaml"
	wait_for "node $NODE" 120 node_ready
	# Pods are refused until the default ServiceAccount exists.
	wait_for "the default ServiceAccount" 60 kubectl -n default get serviceaccount default
	log "Node $NODE is Ready after $((SECONDS - start))s"
	echo "export KUBECONFIG=$STATE/admin.kubeconfig"
}

start_control_plane() {
	start_process etcd "$K8S_BIN/etcd" --name default --data-dir "$STATE/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster default=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
	start_process kube-apiserver "$K8S_BIN/kube-apiserver" "${APISERVER_FLAGS[@]}"
	wait_for kube-apiserver 90 kubectl get --raw /readyz
	start_process kube-controller-manager "$K8S_BIN/kube-controller-manager" "${CONTROLLER_MANAGER_FLAGS[@]}"
	start_process kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig "$STATE/kube-scheduler.kubeconfig" \
		--authentication-kubeconfig "$STATE/kube-scheduler.kubeconfig" \
		--authorization-kubeconfig "$STATE/kube-scheduler.kubeconfig" --bind-address 127.0.0.1 --leader-elect=false
}

status() {
	local p
	for p in "${PROCESSES[@]}"; do
		if running "$p"; then echo "$p: running (pid $(cat "$STATE/pids/$p.pid"))"; else echo "$p: stopped"; fi
	done
	if running kube-apiserver && [ -n "${K8S_BIN:-}" ]; then
		kubectl get nodes -o wide || true
		echo "export KUBECONFIG=$STATE/admin.kubeconfig"
	fi
}

# load imports an image archive (docker-archive or OCI) into the node.
load() {
	[ -f "${1:-}" ] || die "usage: hack/local-cluster.sh load IMAGE.tar"
	running containerd || die "the cluster is not up"
	ctr images import "$1"
}

down() {
	if running kube-apiserver && running kubelet; then
		delete_workloads
	fi
	remove_containers
	local i
	for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do
		stop_process "${PROCESSES[i]}"
	done
	host_restore
	rm -rf "$STATE" "$RUN"
	log "Local cluster removed"
}

[ "$(id -u)" = 0 ] || die "run as root: the cluster needs mounts, routes and iptables"
case "${1:-}" in
up) up ;;
down)
	K8S_BIN="$CACHE/k8s-${K8S_VERSION:-v1.36.3}/bin" CTR_BIN="$CACHE/containerd-$CONTAINERD_VERSION"
	down
	;;
status)
	K8S_BIN="$CACHE/k8s-${K8S_VERSION:-v1.36.3}/bin"
	status
	;;
load)
	CTR_BIN="$CACHE/containerd-$CONTAINERD_VERSION"
	load "${2:-}"
	;;
*) die "usage: hack/local-cluster.sh up|down|status|load TAR" ;;
esac
