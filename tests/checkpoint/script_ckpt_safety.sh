#!/usr/bin/env bash
# lofp convert / import against hostile and careless use (tests/checkpoint/safety_test.py): the
# output never replaces the input, strict --shard/--jobs/--threads, special files and links,
# signals, lying indexes and configs; lofp's Python package too when this build has it.
#   bash tests/checkpoint/script_ckpt_safety.sh <build_dir> <source_dir> [test names...]
set -euo pipefail
build=${1:?usage: script_ckpt_safety.sh <build_dir> <source_dir>}
src=${2:?usage: script_ckpt_safety.sh <build_dir> <source_dir>}
shift 2
"$src/scripts/venv.sh"
py="$src/.venv/bin/python"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_ckpt_safety: $exe is missing (build the lofp target)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_safety_pkg.XXXXXX")
trap 'rm -rf "$work"' EXIT
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -n "$ext" ]; then
  mkdir -p "$work/pkg"
  cp -r "$src/python/lofp" "$work/pkg/lofp"
  cp "$ext" "$work/pkg/lofp/"
  export PYTHONPATH="$work/pkg"
fi
"$py" "$src/tests/checkpoint/safety_test.py" "$exe" "$@"
