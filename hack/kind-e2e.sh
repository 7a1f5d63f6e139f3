#!/usr/bin/env bash
# Run the end-to-end suite on a kind cluster instead of the local control plane (needs Docker or Podman
# and the `kind` binary; it cannot run on machines without a container engine).
#   hack/kind-e2e.sh            create cluster "omc-e2e", run test/e2e, delete the cluster
#   KEEP_CLUSTER=1 hack/kind-e2e.sh   keep it afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
name=${KIND_CLUSTER_NAME:-omc-e2e}
command -v kind >/dev/null || { echo "kind is not installed (https://kind.sigs.k8s.io)" >&2; exit 1; }
make venv kube-binaries   # the pinned kubectl the tests use
kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --wait 120s
kubeconfig=$(mktemp); trap 'rm -f "$kubeconfig"; [ -n "${KEEP_CLUSTER:-}" ] || kind delete cluster --name "$name"' EXIT
kind get kubeconfig --name "$name" >"$kubeconfig"
# The suite uses $KUBECONFIG as it is when set, and starts no control plane of its own.
KUBECONFIG="$kubeconfig" .venv/bin/python -m pytest test/e2e "$@"
