#!/usr/bin/env bash
# End-to-end tests of the lofp command, checked with numpy, ml_dtypes and safetensors.
set -euo pipefail
build=$1; src=$2
"$src/scripts/venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/.venv/bin/python" "$src/tests/cli/cli_e2e.py" "$build/lofp" "$work"
