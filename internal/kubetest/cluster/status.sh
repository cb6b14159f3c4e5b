#!/usr/bin/env bash
# Says whether the test cluster is up: exit 0 and its owner and kubeconfig when every
# component runs and the API server is ready; exit 3 when no cluster is up; exit 1 when one is
# half up (cluster.sh down clears it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ ! -d "$RUN" ]; then echo "down"; exit 3; fi
[ -e "$RUN/ready" ] || { echo "broken: not ready (a failed or running up; owner: $(cat "$RUN/owner" 2>/dev/null))"; exit 1; }
for name in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  pid=$(cat "$RUN/$name.pid" 2>/dev/null || true)
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name:0:15}" ] ||
    { echo "broken: $name is not running (logs: $LOGS/$name.log)"; exit 1; }
done
BIN=$RUN/bin
kctl get --raw /readyz >/dev/null 2>&1 || { echo "broken: the API server is not ready"; exit 1; }
echo "up"
echo "owner: $(cat "$RUN/owner")"
echo "kubeconfig: $RUN/admin.kubeconfig"
echo "containerd: $RUN/containerd/containerd.sock"
