#!/usr/bin/env bash
# lofp eval on real models (tests/python/test_eval*.py, pytest in the pinned .venv): glassllm
# through every preset and the UltraQuant KV cache, MiniLM embeddings; lofp is reached through
# <build_dir>/liblofp.so. The SmolLM2 test is slower and runs in `make test-slow`.
#   bash tests/script_eval.sh <build_dir> <source_dir> [pytest args...]
# Exits 77 (ctest: skipped) when the build has no liblofp.so (the static-only ASan build).
set -euo pipefail
build=${1:?usage: script_eval.sh <build_dir> <source_dir>}
src=${2:?usage: script_eval.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import pytest, glassllm" 2>/dev/null; then
  "$src/scripts/venv.sh"
fi
lib="$build/liblofp.so"
if [ ! -f "$lib" ]; then
  echo "script_eval: $lib not built (LOFP_BUILD_SHARED=OFF) -- skipped"
  exit 77
fi
cd "$src"
export LOFP_LIBRARY="$lib" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
if [ $# -eq 0 ]; then
  set -- tests/python/test_eval_glassllm.py tests/python/test_eval_minilm.py
fi
exec "$py" -m pytest -q -rxXs -p no:cacheprovider "$@"
