#!/usr/bin/env bash
# Build kube-apiserver and etcd from this Go module into a git-ignored cache.
# Skipped when the binaries are newer than go.mod, go.sum and every main.go here.
#
#   e2e/controlplane/build.sh            -> .cache/kube/bin/{kube-apiserver,etcd}
#   FITGATE_KUBE_BIN=/some/dir build.sh  -> somewhere else
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${FITGATE_KUBE_BIN:-$root/.cache/kube/bin}"
kube_version="$(awk '$1=="k8s.io/kubernetes"{print $2}' "$here/go.mod")"
minor="$(echo "$kube_version" | cut -d. -f2)"
mkdir -p "$bin"
command -v go >/dev/null || { echo "build.sh: Go is required to build the e2e control plane (apt-get install golang or see go.dev)" >&2; exit 2; }

up_to_date() {  # $1 = binary
  [ -x "$1" ] || return 1
  for src in "$here/go.mod" "$here/go.sum" "$here"/cmd/*/main.go; do
    [ "$src" -nt "$1" ] && return 1
  done
  return 0
}

cd "$here"
export CGO_ENABLED=0
if up_to_date "$bin/kube-apiserver"; then
  echo "kube-apiserver $kube_version: up to date in $bin"
else
  echo "building kube-apiserver $kube_version into $bin (cold: ~15-25 min on 2 cores)"
  go build -trimpath -p "${FITGATE_GO_JOBS:-2}" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$kube_version \
    -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$minor \
    -X k8s.io/component-base/version.gitTreeState=clean" \
    -o "$bin/kube-apiserver.tmp" ./cmd/kube-apiserver
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
fi
if up_to_date "$bin/etcd"; then
  echo "etcd: up to date in $bin"
else
  echo "building etcd into $bin"
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" ./cmd/etcd
  mv "$bin/etcd.tmp" "$bin/etcd"
fi
echo "$kube_version" > "$bin/VERSION"
