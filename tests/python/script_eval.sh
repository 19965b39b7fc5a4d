#!/usr/bin/env bash
# lofp eval on real models (tests/python/test_eval*.py, pytest in the pinned .venv): glassllm
# through every preset and the UltraQuant KV cache, MiniLM embeddings. lofp is reached through
# <build_dir>/liblofp.so by ctypes (LOFP_EVAL_BACKEND=ctypes), so this runs with or without the
# Python extension; the package path runs the same tests in the package's own suite.
#   bash tests/python/script_eval.sh <build_dir> <source_dir> [pytest args...]
# Exits 77 (ctest: skipped) when the build has no liblofp.so (the static-only ASan build).
# SmolLM2 (tests/python/test_eval_smollm2.py) is slower: `make test-slow`.
set -euo pipefail
build=$(cd "${1:?usage: script_eval.sh <build_dir> <source_dir>}" 2>/dev/null && pwd || echo "$1")
src=$(cd "${2:?usage: script_eval.sh <build_dir> <source_dir>}" && pwd)
shift 2
lib="$build/liblofp.so"
if [ ! -f "$lib" ]; then
  echo "script_eval: $lib not built (LOFP_BUILD_SHARED=OFF) -- skipped"
  exit 77
fi
"$src/scripts/venv.sh"
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
# lofp.eval alone in a package folder: the package's __init__ needs the compiled extension,
# which the ctypes backend does not.
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_eval.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg/lofp"
cp -r "$src/python/lofp/eval" "$work/pkg/lofp/eval"
if [ $# -eq 0 ]; then
  set -- "$src/tests/python/test_eval_glassllm.py" "$src/tests/python/test_eval_minilm.py"
fi
cd "$work"
PYTHONPATH="$work/pkg" LOFP_LIBRARY="$lib" \
  LOFP_EVAL_BACKEND=ctypes OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
  "$py" -m pytest -q -rxXs -p no:cacheprovider "$@"
