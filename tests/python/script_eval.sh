#!/usr/bin/env bash
# lofp eval on real models (tests/python/test_eval*.py, pytest in the pinned .venv): glassllm
# through every preset and the UltraQuant KV cache, MiniLM embeddings. lofp.eval calls lofp through
# the Python package only (its C extension of this build), as an installed lofp does.
#   bash tests/python/script_eval.sh <build_dir> <source_dir> [pytest args...]
# Exits 77 (ctest: skipped) when the build has no Python extension.
# SmolLM2 (tests/python/test_eval_smollm2.py) is slower: `make test-slow`.
set -euo pipefail
build=$(cd "${1:?usage: script_eval.sh <build_dir> <source_dir>}" 2>/dev/null && pwd || echo "$1")
src=$(cd "${2:?usage: script_eval.sh <build_dir> <source_dir>}" && pwd)
shift 2
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -z "$ext" ]; then
  echo "script_eval: the Python extension was not built -- skipped"
  exit 77
fi
"$src/scripts/venv.sh"
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
# The package as it is installed: the sources plus this build's extension.
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_eval.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg"
cp -r "$src/python/lofp" "$work/pkg/lofp"
cp "$ext" "$work/pkg/lofp/"
if [ $# -eq 0 ]; then
  set -- "$src/tests/python/test_eval_glassllm.py" "$src/tests/python/test_eval_minilm.py"
fi
cd "$work"
PYTHONPATH="$work/pkg" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
  "$py" -m pytest -q -rxXs -p no:cacheprovider "$@"
