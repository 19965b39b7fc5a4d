#!/usr/bin/env bash
# gguf-py, live: `lofp quantize --profile ggml` must write exactly the MXFP4 blocks gguf-py's own
# quantizer writes (scale bytes and codes, repacked from GGUF's split nibble order), on fresh
# random tensors and on the edge cases of docs/CHECKPOINTS.md (ties, power-of-two edges, tiny and
# non-finite blocks). Uses the pinned .venv (scripts/requirements-test.txt pins gguf).
#   bash tests/quant/script_gguf_live.sh <build_dir> <source_dir>
set -euo pipefail
build=${1:?usage: script_gguf_live.sh <build_dir> <source_dir>}
src=${2:?usage: script_gguf_live.sh <build_dir> <source_dir>}
py="$src/.venv/bin/python"
[ -x "$py" ] || "$src/scripts/venv.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lofp_gguf_live.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/tests/quant/gguf_live.py" "$build/lofp" "$tmp"
