# shellcheck shell=bash
# Sourced by e2e/controlplane/build.sh and e2e/gotools/build.sh.
# A cold build compiles Kubernetes' packages for minutes without a word: `go build -v` names each package it
# compiles (on stderr) into a file, and a line every FITGATE_BUILD_PROGRESS_SECONDS (30) says how far it is.
go_build() {  # go build ARGS..., with progress lines; on failure the end of go's output
  local packages start=$SECONDS heartbeat rc=0
  packages="$(mktemp)"
  (
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM  # ends its own sleep too: nothing is left behind
    while :; do
      sleep "${FITGATE_BUILD_PROGRESS_SECONDS:-30}" & nap=$!
      wait "$nap"
      elapsed=$((SECONDS - start))
      echo "  ... still building: $(wc -l < "$packages" | tr -d ' ') packages compiled in $((elapsed / 60)) min $((elapsed % 60)) s"
    done
  ) &
  heartbeat=$!
  go build -v "$@" 2> "$packages" || rc=$?
  kill "$heartbeat" 2>/dev/null || true
  wait "$heartbeat" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "build.sh: go build failed (exit $rc); the end of its output:" >&2
    tail -n 40 "$packages" >&2
  else
    echo "  done: $(wc -l < "$packages" | tr -d ' ') packages compiled in $((SECONDS - start)) s"
  fi
  rm -f "$packages"
  return "$rc"
}

