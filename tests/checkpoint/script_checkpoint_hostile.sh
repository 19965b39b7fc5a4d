#!/usr/bin/env bash
# Hostile and careless inputs to lofp convert / import / inspect, built with numpy + safetensors
# in the pinned .venv: tests/checkpoint/hostile_test.py.
#   bash tests/checkpoint/script_checkpoint_hostile.sh <build_dir> <source_dir> [TEST ...]
set -euo pipefail
build=${1:?usage: script_checkpoint_hostile.sh <build_dir> <source_dir> [TEST ...]}
src=${2:?usage: script_checkpoint_hostile.sh <build_dir> <source_dir> [TEST ...]}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_checkpoint_hostile: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/hostile_test.py" "$exe" "$@"
