#!/usr/bin/env bash
# Run fitgate's e2e suite on a kind cluster instead of the built-in loopback control plane.
# Needs Docker and kind (https://kind.sigs.k8s.io). Without a Docker engine it says so and exits 0.
#
#   e2e/kind/run.sh            create the cluster (if needed), run the suite, keep the cluster
#   e2e/kind/run.sh --delete   delete the cluster afterwards
#   e2e/kind/run.sh --check    only report whether kind can run here
#   e2e/kind/run.sh --chart    also build the operator image, load it into kind and install the Helm
#                              chart in-cluster (Service-mode webhook), then apply the examples
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
name="${FITGATE_KIND_CLUSTER:-fitgate-e2e}"
image="${FITGATE_KIND_IMAGE:-kindest/node:v1.37.0}"

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "e2e/kind: skipped: no Docker engine is reachable (docker info failed); the loopback control plane runs the suite instead"
  exit 0
fi
if ! command -v kind >/dev/null 2>&1; then
  echo "e2e/kind: skipped: kind is not installed (go install sigs.k8s.io/kind@latest)"
  exit 0
fi
[ "${1:-}" = "--check" ] && { echo "e2e/kind: Docker and kind are available"; exit 0; }

kubeconfig="$root/.cache/kind/$name.kubeconfig"
mkdir -p "$(dirname "$kubeconfig")"
if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --name "$name" --image "$image" --wait 120s
fi
kind get kubeconfig --name "$name" > "$kubeconfig"
cd "$root"
make setup >/dev/null
status=0
FITGATE_E2E_KUBECONFIG="$kubeconfig" .venv/bin/python -m pytest e2e -m e2e || status=$?
if [ "${1:-}" = "--chart" ]; then
  docker build -t fitgate:kind .
  kind load docker-image fitgate:kind --name "$name"
  helm=$(.venv/bin/python -m e2e.tools --print)/helm
  KUBECONFIG="$kubeconfig" "$helm" upgrade --install fitgate charts/fitgate -n fitgate-system --create-namespace \
    --set image.repository=fitgate --set image.tag=kind --set image.pullPolicy=Never --wait --timeout 180s || status=$?
  # kind nodes carry no GPU labels: every example is Unknown/DoesNotFit until GPU labels are added
  KUBECONFIG="$kubeconfig" kubectl apply --dry-run=server -f examples/ || true
fi
[ "${1:-}" = "--delete" ] && kind delete cluster --name "$name"
exit $status
