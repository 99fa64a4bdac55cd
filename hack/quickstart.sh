#!/usr/bin/env bash
# The quickstart: builds burstcache, starts a standalone cache (two cache
# servers and a FUSE mount) over a scratch "parallel file system" directory,
# runs a short workload through the mount, shows the cache's status, tears it
# down (writing every dirty byte back), and proves that the backing directory
# holds exactly the bytes the workload wrote.
#
#   hack/quickstart.sh [WORKDIR]     (default /tmp/burstcache-quickstart; needs root for FUSE)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-/tmp/burstcache-quickstart}"
bin="$root/bin/burstcache"
pfs="$work/pfs" mnt="$work/mnt" cache="$work/cache" expected="$work/expected"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		"$bin" local down --mount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null || true
	fi
}
trap cleanup EXIT

step "Building bin/burstcache"
make -C "$root" --no-print-directory build >/dev/null
"$bin" version

step "Preparing $work: a backing directory standing in for the parallel file system"
cleanup
rm -rf "$work"
mkdir -p "$pfs/input" "$mnt" "$expected"
head -c $((8 << 20)) /dev/urandom >"$pfs/input/dataset.bin"   # already on the PFS: read through the cache
cp "$pfs/input/dataset.bin" "$expected/dataset.bin"

step "Starting a cache: 2 servers, 256 MiB, mounted at $mnt"
"$bin" local up --backing "$pfs" --mount "$mnt" --cache-dir "$cache" --servers 2 --capacity 256Mi

step "Running a workload through the mount"
mkdir -p "$mnt/run/checkpoints"
cmp "$mnt/input/dataset.bin" "$expected/dataset.bin"          # cold read: copied up from the PFS
cmp "$mnt/input/dataset.bin" "$expected/dataset.bin"          # warm read: served from the cache
for i in 1 2 3; do                                              # checkpoints: written to SSD, written back later
	head -c $((12 << 20)) /dev/urandom | tee "$expected/ckpt.$i" >"$mnt/run/checkpoints/ckpt.$i"
done
for i in $(seq 1 20); do echo "step $i loss=0.$((RANDOM % 1000))"; done | tee "$expected/train.log" >"$mnt/run/train.log"
echo "appended line" | tee -a "$expected/train.log" >>"$mnt/run/train.log"
ls -l "$mnt/run/checkpoints"

step "Cache status (like DataWarp's dwstat)"
"$bin" local status --mount "$mnt"

step "Tearing down: every dirty byte is written back before the servers stop"
"$bin" local down --mount "$mnt"

step "Checking the backing directory"
cmp "$pfs/input/dataset.bin" "$expected/dataset.bin"
for i in 1 2 3; do cmp "$pfs/run/checkpoints/ckpt.$i" "$expected/ckpt.$i"; done
cmp "$pfs/run/train.log" "$expected/train.log"
echo "OK: $pfs holds exactly the bytes written through the cache"
