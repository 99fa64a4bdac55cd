# What the local cluster changes on the host, and how down undoes exactly
# that: each change is recorded in $STATE/host-changes as it is made.
# Sourced by hack/local-cluster.sh.

record() { echo "$*" >>"$STATE/host-changes"; }
recorded() { [ -f "$STATE/host-changes" ] && grep -qxF "$*" "$STATE/host-changes"; }

# network_guard gives the node address to a port-less local bridge and
# blackholes the cluster ranges, and refuses to go on unless the node
# address is local: nothing the cluster sends may leave the machine.
network_guard() {
	mkdir -p "$STATE"
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		record "bridge $BRIDGE"
	fi
	# Outputs are read whole before they are matched: with pipefail, grep -q
	# closing the pipe early would turn a match into a failure.
	local addrs route holes r
	addrs="$(ip addr show dev "$BRIDGE")"
	[[ "$addrs" == *"inet $NODE_IP/32 "* ]] || ip addr add "$NODE_IP/32" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	route="$(ip route get "$NODE_IP")"
	[[ "$route" == local\ * ]] || die "$NODE_IP is not a local address ($route); refusing to start"
	holes="$(ip route show type blackhole)"
	for r in "${BLACKHOLES[@]}"; do
		if ! grep -qxE "blackhole $r *" <<<"$holes"; then
			ip route add blackhole "$r"
			record "blackhole $r"
		fi
	done
}

# host_prepare turns on IP forwarding and makes the kubelet root directory a
# shared mount, which Bidirectional mount propagation needs ("/" is private
# here).
host_prepare() {
	if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then
		recorded "ip_forward" || record "ip_forward $(cat /proc/sys/net/ipv4/ip_forward)"
		echo 1 >/proc/sys/net/ipv4/ip_forward
	fi
	if [ ! -d "$KUBELET_DIR" ]; then
		mkdir -p "$KUBELET_DIR"
		record "created $KUBELET_DIR"
	fi
	if ! mountpoint -q "$KUBELET_DIR"; then
		mount --bind "$KUBELET_DIR" "$KUBELET_DIR"
		mount --make-rshared "$KUBELET_DIR"
		record "bind $KUBELET_DIR"
	fi
	if [ ! -d /var/lib/cni ]; then
		mkdir -p /var/lib/cni
		record "created /var/lib/cni"
	fi
	mkdir -p "$RUN"
}

# unmount_under DIR: every mount at or below DIR, deepest first.
unmount_under() {
	local m
	findmnt -rn -o TARGET | awk -v d="$1" 'index($0, d) == 1' | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
	done
}

host_restore() {
	[ -f "$STATE/host-changes" ] || return 0
	local m
	for m in $(findmnt -rn -o TARGET | grep '^/run/netns/cni-' || true); do
		umount "$m" 2>/dev/null || true
		rm -f "$m"
	done
	unmount_under "$KUBELET_DIR/"
	recorded "bind $KUBELET_DIR" && unmount_under "$KUBELET_DIR"
	unmount_under "$STATE/"
	unmount_under "$RUN"
	ip link show cni0 >/dev/null 2>&1 && ip link delete cni0
	rm -rf /var/lib/cni/networks/burstcache /var/lib/cni/results
	remove_iptables_chains
	remove_cgroups
	local what arg
	while read -r what arg; do
		case "$what" in
		bridge) ip link delete "$arg" 2>/dev/null || true ;;
		blackhole) ip route del blackhole "$arg" 2>/dev/null || true ;;
		ip_forward) echo "$arg" >/proc/sys/net/ipv4/ip_forward ;;
		created) rm -rf "$arg" ;;
		esac
	done <"$STATE/host-changes"
}

# remove_iptables_chains drops the KUBE-* chains of kube-proxy and kubelet
# and the CNI-* chains of the bridge plugin, and every rule that jumps to
# them, keeping all other rules.
remove_iptables_chains() {
	local family table rules
	for family in iptables ip6tables; do
		command -v "$family-save" >/dev/null || continue
		for table in filter nat mangle; do
			rules="$("$family-save" -t "$table" 2>/dev/null)" || continue
			grep -qE 'KUBE-|CNI-' <<<"$rules" || continue
			grep -vE 'KUBE-|CNI-' <<<"$rules" | "$family-restore" -T "$table"
		done
	done
}

# remove_cgroups removes the (empty) cgroups kubelet made for pods.
remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}
