#!/usr/bin/env bash
# Build kube-apiserver and etcd from this Go module into a git-ignored cache.
# Skipped when each binary was built from the same go.mod, go.sum and main.go as here: the SHA-256 of
# those files is kept beside it (<binary>.sources), so a copied or restored .cache is not rebuilt
# because of file times. A binary without that record but newer than its sources is adopted once.
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

sha256="$(command -v sha256sum || echo "shasum -a 256")"
sources_hash() {  # $1 = cmd name
  cat "$here/go.mod" "$here/go.sum" "$here/cmd/$1/main.go" | $sha256 | cut -d' ' -f1
}

up_to_date() {  # $1 = binary, $2 = cmd name
  [ -x "$1" ] || return 1
  if [ -f "$1.sources" ]; then
    [ "$(cat "$1.sources")" = "$(sources_hash "$2")" ]
    return
  fi
  for src in "$here/go.mod" "$here/go.sum" "$here/cmd/$2/main.go"; do  # built before the record existed
    [ "$src" -nt "$1" ] && return 1
  done
  sources_hash "$2" > "$1.sources"
}

source "$here/go_build.sh"

cd "$here"
export CGO_ENABLED=0
if up_to_date "$bin/kube-apiserver" kube-apiserver; then
  echo "kube-apiserver $kube_version: up to date in $bin"
else
  echo "building kube-apiserver $kube_version into $bin (cold: ~7 min on 2 idle cores, up to ~16 min on a busy machine; a progress line every 30 s)"
  go_build -trimpath -p "${FITGATE_GO_JOBS:-2}" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$kube_version \
    -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$minor \
    -X k8s.io/component-base/version.gitTreeState=clean" \
    -o "$bin/kube-apiserver.tmp" ./cmd/kube-apiserver
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
  sources_hash kube-apiserver > "$bin/kube-apiserver.sources"
fi
if up_to_date "$bin/etcd" etcd; then
  echo "etcd: up to date in $bin"
else
  echo "building etcd into $bin"
  go_build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" ./cmd/etcd
  mv "$bin/etcd.tmp" "$bin/etcd"
  sources_hash etcd > "$bin/etcd.sources"
fi
echo "$kube_version" > "$bin/VERSION"
