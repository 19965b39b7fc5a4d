#!/usr/bin/env bash
# lofp verify-checkpoint end to end: checkpoints lofp convert writes, checkpoints whose tensors
# each producer profile wrote, and deliberately broken ones (tests/checkpoint/verify_ckpt.py).
#   bash tests/checkpoint/script_verify_checkpoint.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_verify_checkpoint.sh <build_dir> <source_dir>}
src=${2:?usage: script_verify_checkpoint.sh <build_dir> <source_dir>}
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_verify_checkpoint: $exe is missing" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/verify_ckpt.py" "$exe"
