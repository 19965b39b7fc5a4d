#!/usr/bin/env bash
# Robustness checks of the lofp command (streaming exactness and memory, many tensors, long
# names and paths, output = input, overflow, strict numbers and metadata, signals, file modes).
set -euo pipefail
build=$1; src=$2
"$src/scripts/venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/.venv/bin/python" "$src/tests/cli/cli_robust.py" "$build/lofp" "$work"
