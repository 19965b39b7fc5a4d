#!/usr/bin/env bash
# `make test-engines`: builds the engines venv (scripts/engines-venv.sh: llama-cpp-python pinned,
# compiled CPU-only) and runs tests/engines/engines_test.py against BUILD_DIR/lofp. The summary
# goes to stdout and, in full, to BUILD_DIR/test-engines.log.
# usage: tests/engines/run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
"$src/scripts/engines-venv.sh"
venv="${LOFP_ENGINES_VENV:-$src/.venv-engines}"
work="${LOFP_ENGINES_WORK:-$build/engines}"
"$venv/bin/python" "$src/tests/engines/engines_test.py" "$build/lofp" "$work" 2>&1 | tee "$build/test-engines.log"
exit "${PIPESTATUS[0]}"
