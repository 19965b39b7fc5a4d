#!/usr/bin/env bash
# lofp convert of already-quantized checkpoints (the exact casts, docs/CHECKPOINTS.md "Exact
# casts"), checked with decoders lofp did not write: tests/checkpoint/casts_test.py.
#   bash tests/checkpoint/script_convert_casts.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_convert_casts.sh <build_dir> <source_dir>}
src=${2:?usage: script_convert_casts.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_convert_casts: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/casts_test.py" "$exe" "$@"
