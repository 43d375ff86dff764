#!/usr/bin/env bash
# Build the e2e control plane from Go modules into a git-ignored cache: kube-apiserver and etcd (this module,
# what every e2e test needs) and, when named, kube-controller-manager and kube-scheduler (the module in
# controllers/, for the scheduling tests: a go.mod of their own, so adding them did not change this module's
# go.mod or go.sum, which would have rebuilt everyone's kube-apiserver).
# A binary is skipped when it was built from the same go.mod, go.sum and main.go as here: the SHA-256 of
# those files is kept beside it (<binary>.sources), so a copied or restored .cache is not rebuilt
# because of file times. A binary without that record but newer than its sources is adopted once.
#
#   e2e/controlplane/build.sh                 -> .cache/kube/bin/{kube-apiserver,etcd}
#   e2e/controlplane/build.sh kube-scheduler  -> only that one (names: kube-apiserver etcd
#                                                kube-controller-manager kube-scheduler, or all)
#   FITGATE_KUBE_BIN=/some/dir build.sh       -> somewhere else
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${FITGATE_KUBE_BIN:-$root/.cache/kube/bin}"
kube_version="$(awk '$1=="k8s.io/kubernetes"{print $2}' "$here/go.mod")"
minor="$(echo "$kube_version" | cut -d. -f2)"
mkdir -p "$bin"
command -v go >/dev/null || { echo "build.sh: Go is required to build the e2e control plane (apt-get install golang or see go.dev)" >&2; exit 2; }

module_of() {  # $1 = cmd name -> the directory of the Go module that builds it
  case "$1" in
    kube-apiserver|etcd) echo "$here" ;;
    kube-controller-manager|kube-scheduler) echo "$here/controllers" ;;
    *) echo "build.sh: unknown component '$1' (kube-apiserver, etcd, kube-controller-manager, kube-scheduler or all)" >&2; return 2 ;;
  esac
}

sha256="$(command -v sha256sum || echo "shasum -a 256")"
sources_hash() {  # $1 = cmd name
  local m
  m="$(module_of "$1")"
  cat "$m/go.mod" "$m/go.sum" "$m/cmd/$1/main.go" | $sha256 | cut -d' ' -f1
}

up_to_date() {  # $1 = binary, $2 = cmd name
  local m
  m="$(module_of "$2")"
  [ -x "$1" ] || return 1
  if [ -f "$1.sources" ]; then
    [ "$(cat "$1.sources")" = "$(sources_hash "$2")" ]
    return
  fi
  for src in "$m/go.mod" "$m/go.sum" "$m/cmd/$2/main.go"; do  # built before the record existed
    [ "$src" -nt "$1" ] && return 1
  done
  sources_hash "$2" > "$1.sources"
}

source "$here/go_build.sh"
export CGO_ENABLED=0

build_kube() {  # $1 = cmd name: a Kubernetes component, stamped with the release it is built from
  local m
  m="$(module_of "$1")"
  if up_to_date "$bin/$1" "$1"; then
    echo "$1 $kube_version: up to date in $bin"
    return
  fi
  case "$1" in
    kube-apiserver) echo "building kube-apiserver $kube_version into $bin (cold: ~7 min on 2 idle cores, up to ~16 min on a busy machine; a progress line every 30 s)" ;;
    *) echo "building $1 $kube_version into $bin (after kube-apiserver, mostly its compiled packages; see docs/development.md for cold times)" ;;
  esac
  (cd "$m" && go_build -trimpath -p "${FITGATE_GO_JOBS:-2}" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$kube_version \
    -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$minor \
    -X k8s.io/component-base/version.gitTreeState=clean" \
    -o "$bin/$1.tmp" "./cmd/$1")
  mv "$bin/$1.tmp" "$bin/$1"
  sources_hash "$1" > "$bin/$1.sources"
}

build_etcd() {
  if up_to_date "$bin/etcd" etcd; then
    echo "etcd: up to date in $bin"
    return
  fi
  echo "building etcd into $bin"
  (cd "$here" && go_build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" ./cmd/etcd)
  mv "$bin/etcd.tmp" "$bin/etcd"
  sources_hash etcd > "$bin/etcd.sources"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver etcd)
[ "${components[*]}" != all ] || components=(kube-apiserver etcd kube-controller-manager kube-scheduler)
for c in "${components[@]}"; do module_of "$c" >/dev/null; done  # an unknown name fails before any build
for c in "${components[@]}"; do
  if [ "$c" = etcd ]; then build_etcd; else build_kube "$c"; fi
done
echo "$kube_version" > "$bin/VERSION"
