# Starting and stopping the local cluster's processes by the PIDs recorded
# when they started, never by name. Sourced by hack/local-cluster.sh.

# running NAME: the recorded process is alive and still runs the recorded
# executable (a reused PID does not count).
running() {
	local f="$STATE/pids/$1.pid" pid exe
	[ -f "$f" ] || return 1
	read -r pid exe <"$f"
	[ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]
}

# start_process NAME BINARY ARGS...: start it in its own session, logging to
# $STATE/logs/NAME.log, unless it already runs.
start_process() {
	local name="$1"
	shift
	if running "$name"; then
		return
	fi
	log "Starting $name"
	setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	local pid=$!
	echo "$pid $(readlink -f "$1")" >"$STATE/pids/$name.pid"
	sleep 0.2
	running "$name" || die "$name exited at once: $(tail -n 5 "$STATE/logs/$name.log")"
}

# stop_process NAME: SIGTERM, then SIGKILL after 15 s.
stop_process() {
	local name="$1" pid exe i
	running "$name" || { rm -f "$STATE/pids/$name.pid"; return 0; }
	read -r pid exe <"$STATE/pids/$name.pid"
	log "Stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 150; i++)); do
		running "$name" || break
		sleep 0.1
	done
	if running "$name"; then
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.5
	fi
	rm -f "$STATE/pids/$name.pid"
}

# delete_workloads stops the controllers that would replace pods, then lets
# kubelet stop every pod and tear its sandbox and network down.
delete_workloads() {
	stop_process kube-controller-manager
	stop_process kube-scheduler
	log "Deleting every pod"
	kubectl delete pods --all --all-namespaces --grace-period=10 --timeout=90s --wait >/dev/null 2>&1 ||
		log "some pods did not stop in time; their containers are killed next"
}

# remove_containers kills and deletes whatever containerd still runs, so
# that no shim outlives the cluster.
remove_containers() {
	running containerd || return 0
	local id
	for id in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	sleep 1
	for id in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks delete -f "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr containers ls -q 2>/dev/null); do
		ctr containers delete "$id" >/dev/null 2>&1 || true
	done
}
