#!/usr/bin/env bash
# Compares the element codecs (lofp_encode RNE/IEEE, lofp_decode) with ml_dtypes and numpy, bit
# for bit, through the lofp_codec_dump helper. Usage: script_mldtypes.sh BUILD_DIR SOURCE_DIR.
# Uses SOURCE_DIR/.venv (created by scripts/venv.sh when missing or out of date).
set -euo pipefail
build=${1:?usage: script_mldtypes.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: script_mldtypes.sh BUILD_DIR SOURCE_DIR}
venv="${LOFP_VENV:-$src/.venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy, ml_dtypes' 2>/dev/null; then
  bash "$src/scripts/venv.sh"
fi
tool="$build/tests/lofp_codec_dump"
if [ ! -x "$tool" ]; then
  echo "script_mldtypes: $tool not built" >&2
  exit 1
fi
exec "$venv/bin/python" "$src/tests/core/mldtypes_compare.py" "$tool"
