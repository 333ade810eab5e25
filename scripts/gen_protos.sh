#!/usr/bin/env bash
# The one command that generates the Python stubs (and mypy stubs) from protos/.
# CI regenerates and fails when the committed stubs differ.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
# The mypy plugins (protoc-gen-mypy, protoc-gen-mypy_grpc) live beside python.
PATH="$(dirname "$(command -v "$PY")"):$PATH"
out=recallatron/v1
rm -f "$out"/*_pb2*.py "$out"/*_pb2*.pyi
"$PY" -m grpc_tools.protoc -I protos \
  --python_out=. --grpc_python_out=. \
  --mypy_out=. --mypy_grpc_out=. \
  protos/recallatron/v1/*.proto
touch "$out/__init__.py"
