#!/usr/bin/env bash
# GPTQ bit for bit against an independent numpy + ml_dtypes implementation of the same algorithm
# and operation order (tests/quant/gptq_oracle.py), through the lofp_gptq_tool helper.
# Usage: script_gptq_oracle.sh BUILD_DIR SOURCE_DIR. Uses SOURCE_DIR/.venv (scripts/venv.sh).
set -euo pipefail
build=${1:?usage: script_gptq_oracle.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: script_gptq_oracle.sh BUILD_DIR SOURCE_DIR}
venv="${LOFP_VENV:-$src/.venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy, ml_dtypes' 2>/dev/null; then
  bash "$src/scripts/venv.sh"
fi
tool="$build/tests/lofp_gptq_tool"
if [ ! -x "$tool" ]; then
  echo "script_gptq_oracle: $tool not built" >&2
  exit 1
fi
exec "$venv/bin/python" "$src/tests/quant/gptq_oracle.py" "$tool"
