#!/usr/bin/env bash
# Creates the throw-away virtual environment the third-party comparison tests use (.venv in the
# build tree's parent), with pinned versions of numpy, ml_dtypes and safetensors from PyPI.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${LOFP_VENV:-$here/.venv}"
stamp="$venv/.lofp-requirements"
req="$here/scripts/requirements-test.txt"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req"; then exit 0; fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
