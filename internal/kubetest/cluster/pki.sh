#!/usr/bin/env bash
# Writes the cluster's certificates (ECDSA P-256, valid 30 days) and kubeconfigs into $RUN.
# The names the servers answer to are loopback names only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RUN/pki"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
# cert NAME SUBJECT EXTENSIONS signs NAME.key's certificate with the CA.
cert() {
  key "$1"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%b' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

key ca
openssl req -x509 -new -key ca.key -subj "/CN=agenticopd-kube-ca" -days 30 -out ca.crt
cert apiserver "/CN=kube-apiserver" \
  "subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:198.51.100.1\nextendedKeyUsage=serverAuth\n"
cert kubelet-serving "/CN=$NODE" "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
client="extendedKeyUsage=clientAuth\n"
cert admin "/O=system:masters/CN=agenticopd-admin" "$client"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
cert kubelet "/O=system:nodes/CN=system:node:$NODE" "$client"
cert kcm "/CN=system:kube-controller-manager" "$client"
cert scheduler "/CN=system:kube-scheduler" "$client"
key sa
openssl pkey -in sa.key -pubout -out sa.pub

for user in admin kubelet kcm scheduler; do
  cat >"$RUN/$user.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: agenticopd
  cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$RUN/pki/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$RUN/pki/$user.crt", client-key: "$RUN/pki/$user.key"}
contexts:
- name: agenticopd
  context: {cluster: agenticopd, user: $user}
current-context: agenticopd
KUBECONFIG
done
