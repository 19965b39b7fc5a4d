#!/usr/bin/env bash
# The component rules of docs/ARCHITECTURE.md, checked on src/ and on liblofp's objects.
set -euo pipefail
build=$1 src=$2
python3 "$src/tests/arch/layering.py" --self-test
exec python3 "$src/tests/arch/layering.py" "$src/src" "$build/CMakeFiles/lofp_static.dir"
