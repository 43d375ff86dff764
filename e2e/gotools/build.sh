#!/usr/bin/env bash
# Build the Go tools the tests drive (promtool, kwok, kubeconform, ...) from the Go module proxy into a
# git-ignored cache, one Go module per tool set: e2e/gotools/<name>/go.mod pins the versions with `tool`
# directives (`go get -tool pkg@version`), and every tool of that module is built with `go build -o DIR tool`.
# Skipped when the binaries were built from the same go.mod and go.sum (their SHA-256 is kept in
# <dir>/.sources), so a copied or restored .cache is not rebuilt because of file times.
#
# An optional <name>/tags file lists Go build tags for that module (e.g. promtool's remove_all_sd, which leaves
# out the service-discovery plugins a rule checker never uses); it is part of the stamp.
#
#   e2e/gotools/build.sh NAME                       -> .cache/gotools/NAME/bin/
#   FITGATE_GOTOOLS_DIR=/some/dir build.sh NAME      -> /some/dir/NAME/bin/
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
name="${1:?usage: build.sh NAME (a directory of e2e/gotools with a go.mod)}"
module="$here/$name"
[ -f "$module/go.mod" ] || { echo "build.sh: no Go module at $module" >&2; exit 2; }
out="${FITGATE_GOTOOLS_DIR:-$root/.cache/gotools}/$name/bin"
command -v go >/dev/null || { echo "build.sh: Go is required to build the test tools (apt-get install golang or see go.dev)" >&2; exit 2; }
sha256="$(command -v sha256sum || echo "shasum -a 256")"
stamped=("$module/go.mod" "$module/go.sum")
tags=""
if [ -f "$module/tags" ]; then
  stamped+=("$module/tags")
  tags="$(tr -s ' \n' ',' < "$module/tags" | sed 's/^,//; s/,$//')"
fi
hash="$(cat "${stamped[@]}" | $sha256 | cut -d' ' -f1)"
if [ -f "$out/.sources" ] && [ "$(cat "$out/.sources")" = "$hash" ]; then
  echo "$name tools: up to date in $out"
  exit 0
fi
source "$root/e2e/controlplane/go_build.sh"
echo "building the $name tools into $out (a progress line every ${FITGATE_BUILD_PROGRESS_SECONDS:-30} s)"
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
cd "$module"
export CGO_ENABLED="${CGO_ENABLED:-0}"
go_build -trimpath -p "${FITGATE_GO_JOBS:-2}" ${tags:+-tags "$tags"} -ldflags "-s -w" -o "$out.tmp/" tool
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$hash" > "$out/.sources"
