#!/usr/bin/env bash
# Starts the test cluster: etcd, containerd, kube-apiserver, kube-controller-manager,
# kube-scheduler and a kubelet, all on 127.0.0.1, with their state under $RUN. Run through
# cluster.sh up; it holds the machine lock. Exits 0 at once when a cluster is already up.
#
# Before it changes anything it records in $RUN/baseline what down.sh must put back.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "cluster.sh up"
lock 900

if "$HERE/status.sh" >/dev/null 2>&1; then
  say "up: already up ($(cat "$RUN/owner")); kubeconfig $RUN/admin.kubeconfig"
  exit 0
fi
# Whatever a failed or killed run left is undone first.
"$HERE/down.sh"

for c in etcd containerd containerd-shim-runc-v2 runc ctr openssl flock iptables; do
  command -v "$c" >/dev/null || die "up: $c not found: apt-get install etcd-server containerd runc iptables openssl"
done
[ -x "$CNI_BIN/loopback" ] || die "up: $CNI_BIN/loopback not found: apt-get install containernetworking-plugins"
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -e "$d" ] && die "up: $d exists: another kubelet runs on this machine"
done

"$HERE/build.sh"
bindir=$(build_dir)/bin

mkdir -p "$RUN" "$LOGS"
rm -f "$LOGS"/*.log
T0=$(date +%s%N)
"$HERE/baseline.sh" record

# From here on a failure (or a signal) leaves the machine as it was.
undo() { local rc=$?; [ -e "$RUN/ready" ] && return; say "up: failed; undoing (logs: $LOGS)"; "$HERE/down.sh" || true; exit $((rc ? rc : 1)); }
trap undo EXIT
trap 'exit 130' INT TERM
echo "${AGENTICOPD_KUBE_OWNER:-cluster.sh up (pid $$, $(date -u +%FT%TZ))}" >"$RUN/owner"
ln -sfn "$bindir" "$RUN/bin"
BIN=$RUN/bin
mkdir -p "$RUN"/{pki,etcd,containerd,cni,cni-bin,kubelet,pod-logs,runc,images}

render() {
  sed -e "s#@RUN@#$RUN#g" -e "s#@KUBELET_PORT@#$KUBELET_PORT#g" \
    -e "s#@KUBELET_HEALTHZ_PORT@#$KUBELET_HEALTHZ_PORT#g" "$HERE/$1" >"$2"
}
render containerd.toml "$RUN/containerd/config.toml"
render kubelet.yaml "$RUN/kubelet.yaml"
cp "$HERE/cni.json" "$RUN/cni/10-none.conf"

"$HERE/pki.sh"
say "up: certificates ($(elapsed))"

# daemon NAME CMD... starts CMD in a session of its own, its output in $LOGS/NAME.log, its pid
# in $RUN/NAME.pid, without the lock's descriptor (the lock ends with this script).
daemon() {
  local name=$1; shift
  setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 {LOCKFD}>&- &
  echo $! >"$RUN/$name.pid"
}

daemon etcd etcd --name agenticopd --data-dir "$RUN/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "agenticopd=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls ""
daemon containerd containerd --config "$RUN/containerd/config.toml"

# The service range is a documentation range (TEST-NET-2): nothing routes it, nothing here
# connects to it. No endpoint reconciler, so the API server advertises no address of its own.
daemon kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --advertise-address 127.0.0.1 \
  --endpoint-reconciler-type none \
  --cert-dir "$RUN/pki" --tls-cert-file "$RUN/pki/apiserver.crt" --tls-private-key-file "$RUN/pki/apiserver.key" \
  --client-ca-file "$RUN/pki/ca.crt" \
  --kubelet-client-certificate "$RUN/pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$RUN/pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$RUN/pki/ca.crt" \
  --kubelet-preferred-address-types Hostname \
  --service-account-key-file "$RUN/pki/sa.pub" --service-account-signing-key-file "$RUN/pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range 198.51.100.0/24 \
  --authorization-mode Node,RBAC --allow-privileged=true \
  --enable-priority-and-fairness=false --profiling=false

# The pause image and the CNI plugin, while the API server starts: built from this repository
# with the environment's Go settings (its module cache and build cache).
(cd "$HERE/../../.." && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o "$RUN/images/" \
  ./internal/kubetest/cmd/kubetest-pause ./internal/kubetest/cmd/kubetest-image ./internal/kubetest/cmd/kubetest-cni)
mv "$RUN/images/kubetest-cni" "$RUN/cni-bin/"
ln -s "$CNI_BIN/loopback" "$RUN/cni-bin/loopback"
wait_for 60 "containerd's socket" test -S "$RUN/containerd/containerd.sock"
"$RUN/images/kubetest-image" -o "$RUN/images/pause.tar" "$PAUSE_IMAGE" "$RUN/images/kubetest-pause"
ctr -a "$RUN/containerd/containerd.sock" -n k8s.io images import "$RUN/images/pause.tar" >/dev/null
say "up: pause image imported ($(elapsed))"

wait_for 120 "the API server's /readyz" kctl get --raw /readyz
say "up: API server ready ($(elapsed))"

daemon kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$RUN/kcm.kubeconfig" --authentication-kubeconfig "$RUN/kcm.kubeconfig" \
  --authorization-kubeconfig "$RUN/kcm.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --cert-dir "$RUN/pki/kcm" \
  --service-account-private-key-file "$RUN/pki/sa.key" --root-ca-file "$RUN/pki/ca.crt" \
  --cluster-signing-cert-file "$RUN/pki/ca.crt" --cluster-signing-key-file "$RUN/pki/ca.key" \
  --use-service-account-credentials=true --leader-elect=false --profiling=false
daemon kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig "$RUN/scheduler.kubeconfig" --authentication-kubeconfig "$RUN/scheduler.kubeconfig" \
  --authorization-kubeconfig "$RUN/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --cert-dir "$RUN/pki/scheduler" \
  --leader-elect=false --profiling=false
daemon kubelet "$BIN/kubelet" \
  --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
  --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" \
  --hostname-override "$NODE"

node_ready() {
  [ "$(kctl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 120 "node $NODE Ready" node_ready
say "up: node Ready ($(elapsed))"
# The kubelet sets vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops and
# the root key quotas once, when it starts; a machine shared with others gets its own values back
# at once (the kubelet does not check them again).
"$HERE/baseline.sh" restore-sysctls
wait_for 60 "the default service account" kctl -n default get serviceaccount default
touch "$RUN/ready"
trap - EXIT
say "up: ready in $(elapsed); KUBECONFIG=$RUN/admin.kubeconfig"
