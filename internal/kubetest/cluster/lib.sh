# Shared by the cluster scripts (sourced, not run). Sets the paths every step uses and the
# few helpers they share.
#
# AGENTICOPD_KUBE_WORK  the work directory (default /var/tmp/agenticopd-kube): the build cache,
#                       the built binaries, and the running cluster's state and logs.
# AGENTICOPD_KUBE_LOCK_FD  a descriptor the caller already holds the machine lock on (the Go
#                       package passes its own); otherwise each step takes the lock itself.

KUBE_VERSION=v1.31.14
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=${AGENTICOPD_KUBE_WORK:-/var/tmp/agenticopd-kube}
RUN=$W/run       # the running cluster's state; removed by down
LOGS=$W/logs     # the last cluster's logs; kept for reading after down
# One cluster per machine, whatever the work directory: its ports, /run/containerd, the kubepods
# cgroups and the kubelet's sysctls are the machine's.
LOCK=/run/lock/agenticopd-kube.lock
# Ports, all on 127.0.0.1.
APISERVER_PORT=16443
ETCD_PORT=23790
ETCD_PEER_PORT=23800
KUBELET_PORT=10950
KUBELET_HEALTHZ_PORT=10951
KCM_PORT=10957
SCHEDULER_PORT=10959
# The node's name is the host name the API server dials the kubelet by: localhost resolves to
# loopback everywhere, so exec and logs traffic stays on 127.0.0.1.
NODE=localhost
PAUSE_IMAGE=agenticopd.local/pause:3.10
# The CNI plugins of Debian's containernetworking-plugins.
CNI_BIN=/usr/lib/cni

export PATH=$PATH:/usr/local/go/bin

say() { printf 'kube: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# elapsed prints the seconds since T0 (set by the step) with one decimal.
T0=$(date +%s%N)
elapsed() { local ns=$(($(date +%s%N) - T0)); printf '%d.%01ds' $((ns / 1000000000)) $((ns / 100000000 % 10)); }

# lock takes the machine lock on a descriptor (the caller's, or a new one), waiting up to
# $1 seconds. The descriptor is LOCKFD; daemons are started with it closed so that the lock
# ends with the step that took it.
lock() {
  if [ -n "${AGENTICOPD_KUBE_LOCK_FD:-}" ]; then
    LOCKFD=$AGENTICOPD_KUBE_LOCK_FD
  else
    mkdir -p "$(dirname "$LOCK")"
    exec {LOCKFD}>>"$LOCK"
  fi
  flock -w "${1:-900}" "$LOCKFD" || die "another cluster step holds $LOCK (see the pid in $LOCK.pid)"
  echo $$ >"$LOCK.pid"
  # The steps this one runs (down from up, status) use the same lock.
  export AGENTICOPD_KUBE_LOCK_FD=$LOCKFD
}

need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root"; }

# kctl runs the built kubectl as the cluster's admin.
kctl() { "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }

# wait_for runs "$@" every 0.2 s until it succeeds, for at most $1 seconds; the name is $2.
wait_for() {
  local limit=$1 what=$2 i; shift 2
  for ((i = 0; i < limit * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what not reached after ${limit}s (logs: $LOGS)"
}

# build_dir prints where build.sh puts (and finds) the binaries for the current inputs: the
# Kubernetes version, the Go toolchain, the staging table, its sums and the build script.
build_dir() {
  local key
  key=$({ echo "$KUBE_VERSION"; go version; cat "$HERE/staging.txt" "$HERE/staging.sum" "$HERE/build.sh"; } | sha256sum | cut -c1-16)
  echo "$W/build/$KUBE_VERSION-$key"
}
