#!/usr/bin/env bash
# lofp convert --profile P (docs/CHECKPOINTS.md "Profiles on convert"): the producers' own bytes,
# checked against the producers' fixtures and lofp quantize --profile: tests/checkpoint/profile_test.py.
#   bash tests/checkpoint/script_convert_profile.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_convert_profile.sh <build_dir> <source_dir>}
src=${2:?usage: script_convert_profile.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_convert_profile: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/profile_test.py" "$exe" "$@"
