#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl from the
# k8s.io/kubernetes module, fetched through the machine's GOPROXY, into $(build_dir)/bin.
# Cached: a second run with the same inputs (see build_dir) returns at once.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$(build_dir)
commands=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
built() { local c; for c in "${commands[@]}"; do [ -x "$out/bin/$c" ] || return 1; done; }
if built; then say "build: cached in $out"; exit 0; fi

mkdir -p "$W/build"
# Two builds into one work directory would share the source copy: one at a time.
exec {buildfd}>>"$W/build/.lock"
flock "$buildfd"
if built; then say "build: cached in $out (built meanwhile)"; exit 0; fi

command -v go >/dev/null || die "build: go not found (install Go 1.26 in /usr/local/go)"
# The module's own settings, whatever the caller's: the modules come through GOPROXY, the build
# cache is the work directory's (2.8 GB, removed by 'cluster.sh clean'), GOFLAGS and workspaces
# of the caller do not apply.
export GOCACHE=$W/gocache GOFLAGS="-mod=mod -trimpath -buildvcs=false" GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
say "build: Kubernetes $KUBE_VERSION ($(go version | cut -d' ' -f3), GOPROXY=$(go env GOPROXY)); a cold build takes 5-10 min on 2 cores"

dir=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || die "build: go mod download k8s.io/kubernetes@$KUBE_VERSION failed"
src=$W/build/src
rm -rf "$src" "$out.tmp"
cp -r "$dir" "$src"
chmod -R u+w "$src"
rm -f "$src/go.work" "$src/go.work.sum"

# The staging replaces become published modules (staging.txt); the rest are dropped.
while read -r mod ver; do
  case $mod in ''|'#'*) continue ;; esac
  sed -i "s#^\([[:space:]]*\)$mod => ./staging/src/$mod\$#\1$mod => $mod $ver#" "$src/go.mod"
done <"$HERE/staging.txt"
for mod in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z-]*\) => ./staging/.*#\1#p' "$src/go.mod"); do
  sed -i "\#^[[:space:]]*$mod => #d; \#^[[:space:]]*$mod v0.0.0\$#d" "$src/go.mod"
done
grep -v '^#' "$HERE/staging.sum" >>"$src/go.sum"

# The version the components report (kubectl version, the node's kubelet version).
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
(cd "$src" && go build -ldflags "$ldflags" -o "$out.tmp/bin/" $(printf './cmd/%s ' "${commands[@]}"))
rm -rf "$out"
mv "$out.tmp" "$out"
rm -rf "$src"
say "build: done in $(elapsed): $out/bin"
