#!/usr/bin/env bash
# lofp convert --method mse|gptq with --calibration / --imatrix (docs/QUALITY.md): outputs decoded
# by safetensors + ml_dtypes and gguf-py, GPTQ bytes against the numpy oracle of
# tests/quant/gptq_oracle.py, bad statistics files: tests/checkpoint/methods_test.py.
#   bash tests/checkpoint/script_convert_methods.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_convert_methods.sh <build_dir> <source_dir>}
src=${2:?usage: script_convert_methods.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_convert_methods: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/methods_test.py" "$exe" "$@"
