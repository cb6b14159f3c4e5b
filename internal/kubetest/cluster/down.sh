#!/usr/bin/env bash
# Stops the test cluster and undoes what it did to the machine: its processes and the pods'
# processes, its mounts, the kubepods cgroups, the sysctls the kubelet set, iptables chains and
# the paths outside the work directory (baseline.sh). Safe to run at any time: after a clean up,
# after a failed or killed one, and again after itself. Keeps $LOGS and the build cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "cluster.sh down"
lock 900
T0=$(date +%s%N)

# The cluster's own processes, found by what they run and the work directory in their command
# line (pid files may be gone after a failed up); the pods' processes, found by their cgroups.
ours() {
  local pid comm
  for pid in $(pgrep -f -- "$RUN/" || true); do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    case $comm in
      etcd|containerd|containerd-shim*|kube-apiserver|kube-controller|kube-scheduler|kubelet) echo "$pid" ;;
    esac
  done
}
pods() { find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u || true; }
pidof_() { [ -f "$RUN/$1.pid" ] && cat "$RUN/$1.pid"; }
is_ours() { # is_ours PID NAME: the pid is alive and still runs NAME
  [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "${2:0:15}" ]
}

# stop NAME...: SIGTERM, up to 10 s to exit, then SIGKILL.
stop() {
  local name pid pids=() i
  for name in "$@"; do
    pid=$(pidof_ "$name" || true)
    is_ours "$pid" "$name" && pids+=("$pid")
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# The node first, so nothing starts containers again; then every pod process; then the rest.
stop kubelet kube-scheduler kube-controller-manager
for ((i = 0; i < 25; i++)); do
  p=$(pods)
  [ -z "$p" ] && break
  kill -KILL $p 2>/dev/null || true
  sleep 0.2
done
stop containerd
stop kube-apiserver etcd
# Whatever is left (the shims, a daemon whose pid file was lost).
for ((i = 0; i < 25; i++)); do
  p=$(ours)
  [ -z "$p" ] && break
  kill -KILL $p 2>/dev/null || true
  sleep 0.2
done
[ -z "$(ours)" ] || say "down: processes left: $(ours | tr '\n' ' ')"
[ -z "$(pods)" ] || say "down: pod processes left: $(pods | tr '\n' ' ')"

# Mounts under the work directory (container root filesystems, volumes, network namespaces,
# shm) and under the machine paths the cluster uses, deepest first.
under=("$W" /run/containerd /var/lib/kubelet /run/netns)
for ((i = 0; i < 3; i++)); do
  m=$(awk '{print $5}' /proc/self/mountinfo | while read -r mp; do
    for u in "${under[@]}"; do case $mp in "$u"/*) echo "$mp" ;; esac; done
  done | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  [ -z "$m" ] && break
  for mp in $m; do umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true; done
done

# The kubepods cgroups, in every hierarchy, leaves first.
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
done
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$d" ] && say "down: cgroup $d is left (processes still in it?)"
done

[ -d "$RUN" ] && "$HERE/baseline.sh" restore
if awk '{print $5}' /proc/self/mountinfo | grep -q "^$W/"; then
  die "down: mounts under $W are left; not removing $RUN (see /proc/self/mountinfo)"
fi
rm -rf "$RUN"
say "down: done in $(elapsed)"
