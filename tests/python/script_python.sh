#!/usr/bin/env bash
# The Python package's tests (tests/python, pytest) against the extension of this build, the lofp
# command of this build, numpy, ml_dtypes and safetensors; the torch tests skip without torch.
set -euo pipefail
build=$1; src=$2
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -z "$ext" ]; then echo "script_python: the extension was not built (no Python headers) -- skipped"; exit 0; fi
"$src/scripts/venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg"
cp -r "$src/python/lofp" "$work/pkg/lofp"
cp "$ext" "$work/pkg/lofp/"
cd "$work"
PYTHONPATH="$work/pkg" LOFP_CLI="$build/lofp" LOFP_SOURCE_DIR="$src" \
  "${LOFP_PYTHON:-$src/.venv/bin/python}" -m pytest -q -p no:cacheprovider "$src/tests/python"
