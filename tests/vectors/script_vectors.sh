#!/usr/bin/env bash
# The conformance suite end to end (tests/vectors/vectors_check.py): `lofp vectors` twice, the
# runner `python -m lofp.vectors` against lofp, ml_dtypes and gguf-py in the test venv, a vector
# edited by hand, and expected bits checked against hand-derived values, ml_dtypes and numpy.
#   bash tests/vectors/script_vectors.sh <build_dir> <source_dir>
# Uses $LOFP_PYTHON when set, else the pinned .venv (scripts/venv.sh creates it). Exits 77
# (skipped) when the build has no Python extension.
set -euo pipefail
build=$(cd "${1:?usage: script_vectors.sh <build_dir> <source_dir>}" && pwd)
src=$(cd "${2:?usage: script_vectors.sh <build_dir> <source_dir>}" && pwd)
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -z "$ext" ]; then
  echo "script_vectors: the Python extension was not built -- skipped"
  exit 77
fi
if [ -z "${LOFP_PYTHON:-}" ]; then "$src/scripts/venv.sh"; fi
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_vectors.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg"
cp -r "$src/python/lofp" "$work/pkg/lofp"
cp "$ext" "$work/pkg/lofp/"
cd "$work"
PYTHONPATH="$work/pkg" "$py" "$src/tests/vectors/vectors_check.py" "$build" "$src"
