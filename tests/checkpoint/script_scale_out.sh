#!/usr/bin/env bash
# The scale-out recipes of scripts/scale-out/ without a scheduler (tests/checkpoint/scale_out_test.py):
# the Kubernetes manifests parse and their own commands, run once per completion index, and
# slurm_convert.sh --local give a directory byte-identical to one lofp convert process. The run on
# a real Slurm is tests/checkpoint/slow_slurm.sh (make test-slurm).
#   bash tests/checkpoint/script_scale_out.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_scale_out.sh <build_dir> <source_dir>}
src=${2:?usage: script_scale_out.sh <build_dir> <source_dir>}
[ -n "${LOFP_PYTHON:-}" ] || "$src/scripts/venv.sh"
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_scale_out: $exe is missing (build the lofp target)" >&2; exit 1; }
"$py" "$src/tests/checkpoint/scale_out_test.py" "$exe" "$src"
