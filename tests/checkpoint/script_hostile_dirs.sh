#!/usr/bin/env bash
# Hostile model directories (lying configs and indexes, shards that disagree, scale tensors of the
# wrong shape or dtype, huge and empty tensors) against lofp inspect / import / convert /
# verify-checkpoint: tests/checkpoint/hostile_dirs_test.py (its XFAIL list names the open findings).
#   bash tests/checkpoint/script_hostile_dirs.sh <build_dir> <source_dir> [CASE ...] [--table]
set -euo pipefail
build=${1:?usage: script_hostile_dirs.sh <build_dir> <source_dir>}
src=${2:?usage: script_hostile_dirs.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_hostile_dirs: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/hostile_dirs_test.py" "$exe" "$@"
