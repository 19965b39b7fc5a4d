#!/usr/bin/env bash
# lofp tensor files whose metadata lies about the stored tensors (shape, scale layout, sizes): import, inspect
# and dequantize refuse each with a message naming file and tensor (tests/cli/qfile_hostile.py).
set -euo pipefail
build=$1; src=$2
"$src/scripts/venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/.venv/bin/python" "$src/tests/cli/qfile_hostile.py" "$build/lofp" "$work"
