#!/usr/bin/env bash
# The one command that generates the Python stubs (and mypy stubs) from protos/.
# CI regenerates and fails when the committed stubs differ.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
# The mypy plugins (protoc-gen-mypy, protoc-gen-mypy_grpc) live beside python.
PATH="$(dirname "$(command -v "$PY")"):$PATH"
out=recallatron/v1
# Generate aside first, so a failure leaves the committed stubs in place.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m grpc_tools.protoc -I protos \
  --python_out="$tmp" --grpc_python_out="$tmp" \
  --mypy_out="$tmp" --mypy_grpc_out="$tmp" \
  protos/recallatron/v1/*.proto
rm -f "$out"/*_pb2*.py "$out"/*_pb2*.pyi
cp "$tmp"/recallatron/v1/* "$out"/
touch "$out/__init__.py"
