#!/usr/bin/env bash
# A single-node Kubernetes for the repository's tests, built from source through the machine's
# GOPROXY and run from Debian's etcd, containerd, runc and CNI plugins (see ../README.md).
#
#   cluster.sh build        build the Kubernetes binaries (cached by inputs in the work dir)
#   cluster.sh up           build, then start the cluster (as root; no-op when it is up)
#   cluster.sh status       say whether it is up (exit 0), down (3) or half up (1)
#   cluster.sh env          print the KUBECONFIG line for a shell
#   cluster.sh down         stop it and undo every change it made to the machine (as root)
#   cluster.sh clean        down, then remove the work dir (binaries, build cache, logs)
#   cluster.sh down-on-eof  wait until standard input closes, then down (the Go package's
#                           guard: it holds the pipe, so down runs however the test process ends)
#
# AGENTICOPD_KUBE_WORK sets the work dir (default /var/tmp/agenticopd-kube). One cluster per
# machine: every step but build and status takes the lock /run/lock/agenticopd-kube.lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
  build|up|down|status) exec "$here/$1.sh" ;;
  env)
    . "$here/lib.sh"
    echo "export KUBECONFIG=$RUN/admin.kubeconfig" ;;
  clean)
    . "$here/lib.sh"
    "$here/down.sh"
    rm -rf "$W" ;;
  down-on-eof)
    cat >/dev/null || true
    exec "$here/down.sh" ;;
  *)
    sed -n '2,/^set/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2 ;;
esac
