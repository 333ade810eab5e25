#!/usr/bin/env bash
# Prints the commit whose protos and services the current tree must stay
# wire-compatible with (docs/kubernetes.md, "Upgrades"): BASE_REF if set;
# on a branch, its merge base with main; on main itself (as in CI, a fresh
# clone of main), the first parent. Fails when there is no history to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n ${BASE_REF:-} ]]; then
  git rev-parse --verify "$BASE_REF^{commit}"
  exit
fi
head=$(git rev-parse HEAD)
base=$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null || true)
if [[ -z $base || $base == "$head" ]]; then
  base=$(git rev-parse -q --verify 'HEAD^1') || {
    echo "no previous commit to compare with (a shallow clone?): set BASE_REF" >&2
    exit 1
  }
fi
echo "$base"
