#!/usr/bin/env bash
# lofp calibrate and the calibration-file reader (tests/python/test_calibrate.py, pytest in the
# pinned .venv) on the package as installed: the sources plus this build's extension, and the lofp
# command of this build. script_python runs the same file with the rest of tests/python; this ctest
# runs it alone (ctest -R calib).
#   bash tests/python/script_calibrate.sh <build_dir> <source_dir> [pytest args...]
# Exits 77 (ctest: skipped) when the build has no Python extension.
set -euo pipefail
build=$(cd "${1:?usage: script_calibrate.sh <build_dir> <source_dir>}" && pwd)
src=$(cd "${2:?usage: script_calibrate.sh <build_dir> <source_dir>}" && pwd)
shift 2
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -z "$ext" ]; then
  echo "script_calibrate: the Python extension was not built -- skipped"
  exit 77
fi
py="${LOFP_PYTHON:-$src/.venv/bin/python}"
[ -x "$py" ] || { "$src/scripts/venv.sh"; py="$src/.venv/bin/python"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_calib.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg"
cp -r "$src/python/lofp" "$work/pkg/lofp"
rm -f "$work/pkg/lofp/"_lofp*.so
cp "$ext" "$work/pkg/lofp/"
cd "$work"
PYTHONPATH="$work/pkg" LOFP_CLI="$build/lofp" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
  "$py" -m pytest -q -rxXs -p no:cacheprovider "$src/tests/python/test_calibrate.py" "$@"
