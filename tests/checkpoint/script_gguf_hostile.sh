#!/usr/bin/env bash
# Hostile and lying GGUF files and model directories -> GGUF: tests/checkpoint/gguf_hostile_test.py
# (files built byte by byte in the test, read back with gguf-py in the pinned .venv).
#   bash tests/checkpoint/script_gguf_hostile.sh <build_dir> <source_dir> [TEST...]
set -euo pipefail
build=${1:?usage: script_gguf_hostile.sh <build_dir> <source_dir>}
src=${2:?usage: script_gguf_hostile.sh <build_dir> <source_dir>}
shift 2
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
exe="$build/lofp"
[ -x "$exe" ] || { echo "script_gguf_hostile: $exe is missing (build the lofp target)" >&2; exit 1; }
exec "$py" "$src/tests/checkpoint/gguf_hostile_test.py" "$exe" "$@"
