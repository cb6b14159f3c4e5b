#!/usr/bin/env bash
# What the machine looked like before the cluster: recorded by up, put back by down.
#
#   baseline.sh record            writes $RUN/baseline/* (before up changes anything)
#   baseline.sh restore-sysctls   sets every recorded sysctl that differs back
#   baseline.sh restore           the sysctls, then iptables chains and paths the cluster added
set -euo pipefail
. "$(dirname "$0")/lib.sh"
B=$RUN/baseline

# The kubelet sets the first six when it starts (unless protectKernelDefaults, which makes it
# refuse to start instead); the rest are what a CNI bridge or kube-proxy would change, recorded
# in case a configuration that uses them comes back.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet)
# Paths the kubelet, containerd or the CNI plugins create outside the work directory whatever
# their configuration says. Those absent before up are removed by down.
PATHS=(/var/lib/kubelet /var/lib/cni /run/containerd /run/netns /var/log/containers /var/log/pods
  /var/lib/containerd /opt/containerd /etc/cni /opt/cni /etc/kubernetes /run/runc)
TABLES=(filter nat mangle)

chains() { # chains CMD: "CMD TABLE CHAIN" for every KUBE-* and CNI-* chain
  local t
  for t in "${TABLES[@]}"; do
    "$1" -w -t "$t" -S 2>/dev/null | awk -v c="$1" -v t="$t" '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print c, t, $2}' || true
  done
}

record() {
  mkdir -p "$B"
  local s p
  for s in "${SYSCTLS[@]}"; do
    [ -e "/proc/sys/${s//.//}" ] && echo "$s=$(sysctl -n "$s")"
  done >"$B/sysctls"
  for p in "${PATHS[@]}"; do [ -e "$p" ] || echo "$p"; done >"$B/absent-paths"
  ls -A /run/containerd/s 2>/dev/null >"$B/shim-sockets" || true
  { chains iptables; chains ip6tables; } >"$B/chains"
  touch "$B/complete"
}

restore_sysctls() {
  [ -f "$B/sysctls" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    [ "$(sysctl -n "$k")" = "$v" ] || sysctl -qw "$k=$v"
  done <"$B/sysctls"
}

restore_chains() {
  local cmd t ch
  { chains iptables; chains ip6tables; } | while read -r cmd t ch; do
    grep -qxF "$cmd $t $ch" "$B/chains" 2>/dev/null && continue
    # The rules that jump to the chain go first, then its own rules, then the chain.
    "$cmd" -w -t "$t" -S | awk -v ch="$ch" '$1 == "-A" && $2 != ch && / -j / { for (i = 1; i <= NF; i++) if ($i == "-j" && $(i+1) == ch) { $1 = "-D"; print; break } }' |
      while read -r rule; do eval "$cmd -w -t $t $rule" || true; done
    "$cmd" -w -t "$t" -F "$ch" 2>/dev/null || true
    echo "$cmd $t $ch"
  done | while read -r cmd t ch; do "$cmd" -w -t "$t" -X "$ch" 2>/dev/null || true; done
}

restore_paths() {
  local p s
  if [ -f "$B/absent-paths" ]; then
    while read -r p; do rm -rf "$p"; done <"$B/absent-paths"
  fi
  # A /run/containerd that was there before (another containerd) keeps its own shim sockets.
  if [ -d /run/containerd/s ]; then
    for s in $(ls -A /run/containerd/s); do
      grep -qxF "$s" "$B/shim-sockets" 2>/dev/null || rm -f "/run/containerd/s/$s"
    done
  fi
  # The same for the kubelet's log links when /var/log/containers was there before.
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$RUN/*" -delete 2>/dev/null || true
  fi
}

case ${1:-} in
  record) record ;;
  restore-sysctls) restore_sysctls ;;
  restore) restore_sysctls; restore_chains; restore_paths ;;
  *) die "usage: baseline.sh record|restore-sysctls|restore" ;;
esac
