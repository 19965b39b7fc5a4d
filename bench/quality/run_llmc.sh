#!/usr/bin/env bash
# lofp vs llm-compressor's GPTQ on SmolLM2-135M (bench/quality/llmc_side_by_side.py), scored by
# lofp eval's forward. Manual benchmark, not part of `make test`: it needs torch (several GB).
#   bash bench/quality/run_llmc.sh [BUILD_DIR] -- [llmc_side_by_side.py arguments]
# BUILD_DIR (default build) must hold this tree's Python extension (make, or cmake --build BUILD_DIR
# --target lofp_python). The virtual environment is made from bench/quality/requirements-llmc.txt
# at $LLMC_VENV (default /tmp/lofp-llmc-venv; kept between runs while the file is unchanged);
# set TORCH_INDEX=https://download.pytorch.org/whl/cpu to take torch's CPU-only wheel from there.
# The lofp package is this tree's python/lofp plus BUILD_DIR's extension, as script_eval.sh runs it.
# docs/EVAL.md ("Side by side with llm-compressor") has an example.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build="build"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
build=$(cd "$src" && cd "$build" && pwd)
ext=$(ls "$build"/python/lofp/_lofp*.so 2>/dev/null | head -1 || true)
if [ -z "$ext" ]; then
  echo "run_llmc: no Python extension in $build (cmake --build $build --target lofp_python)" >&2
  exit 1
fi
venv="${LLMC_VENV:-/tmp/lofp-llmc-venv}"
req="$src/bench/quality/requirements-llmc.txt"
stamp="$venv/.lofp-requirements"
if ! { [ -f "$stamp" ] && cmp -s "$stamp" "$req"; }; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  tmp=$(mktemp -d)
  grep -v 'no-deps' "$req" | sed 's/#.*//' | grep -v '^ *$' > "$tmp/deps.txt" || true
  grep 'no-deps' "$req" | grep -v '^ *#' | sed 's/#.*//' > "$tmp/nodeps.txt" || true
  if [ -n "${TORCH_INDEX:-}" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
      --index-url "$TORCH_INDEX" "$(grep '^torch==' "$tmp/deps.txt")"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$tmp/deps.txt"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$tmp/nodeps.txt"
  rm -rf "$tmp"
  cp "$req" "$stamp"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/lofp_llmc.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg"
cp -r "$src/python/lofp" "$work/pkg/lofp"
cp "$ext" "$work/pkg/lofp/"
PYTHONPATH="$work/pkg" TOKENIZERS_PARALLELISM=false \
  "$venv/bin/python" "$src/bench/quality/llmc_side_by_side.py" "$@"
