#!/usr/bin/env bash
# Whole-directory conversion throughput: GB/s of bf16 input for `lofp convert` (and `lofp import`)
# against the read() rate of the same files (cat to /dev/null), both with the files in the page
# cache (a first read warms it). Builds a synthetic llama-style bf16 model of SIZE_GB in 8 shards.
#   bench/bench_convert.sh [SIZE_GB] [JOBS]        (defaults 2 and nproc)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
size=${1:-2}
jobs=${2:-$(nproc)}
lofp="$root/${BUILD:-build}/lofp"
py="$root/.venv/bin/python"
[ -x "$py" ] || "$root/scripts/venv.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lofp_bench_convert.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp/model" "$size" <<'PY'
import json, os, sys
import numpy as np
from safetensors.numpy import save_file
import ml_dtypes
out, size = sys.argv[1], float(sys.argv[2])
os.makedirs(out)
H, I = 2048, 5632
per_layer = 2 * (4 * H * H + 3 * H * I)
layers = max(8, int(size * 1e9 / per_layer) // 8 * 8)
rng = np.random.default_rng(0)
def w(shape):
    x = rng.standard_normal(shape, dtype=np.float32) * 0.02
    return x.astype(ml_dtypes.bfloat16)
wm, total = {}, 0
for s in range(8):
    t = {}
    for l in range(s * layers // 8, (s + 1) * layers // 8):
        p = f"model.layers.{l}."
        for n, sh in (("self_attn.q_proj", (H, H)), ("self_attn.k_proj", (H, H)), ("self_attn.v_proj", (H, H)),
                      ("self_attn.o_proj", (H, H)), ("mlp.gate_proj", (I, H)), ("mlp.up_proj", (I, H)), ("mlp.down_proj", (H, I))):
            t[p + n + ".weight"] = w(sh)
        t[p + "input_layernorm.weight"] = np.ones(H, ml_dtypes.bfloat16)
    name = f"model-{s + 1:05d}-of-00008.safetensors"
    save_file(t, os.path.join(out, name))
    for k, v in t.items():
        wm[k] = name
        total += v.nbytes
json.dump({"metadata": {"total_size": total}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
json.dump({"model_type": "llama", "num_hidden_layers": layers}, open(os.path.join(out, "config.json"), "w"))
PY
bytes=$(du -cb "$tmp"/model/*.safetensors | tail -1 | cut -f1)
gb=$(awk -v b="$bytes" 'BEGIN{printf "%.3f", b/1e9}')
cat "$tmp"/model/*.safetensors > /dev/null
t0=$(date +%s.%N); cat "$tmp"/model/*.safetensors > /dev/null; t1=$(date +%s.%N)
rd=$(awk -v b="$bytes" -v a="$t0" -v c="$t1" 'BEGIN{printf "%.2f", b/1e9/(c-a)}')
echo "model: $gb GB bf16 in 8 shards; read() (cat, page cache): $rd GB/s"
run() {
  local label=$1; shift
  rm -rf "$tmp/out"
  local a b
  a=$(date +%s.%N); "$@" > /dev/null 2>&1; b=$(date +%s.%N)
  awk -v g="$gb" -v a="$a" -v c="$b" -v l="$label" -v r="$rd" 'BEGIN{t=c-a; printf "%-52s %7.2f s  %6.2f GB/s of bf16 input  (%.0f%% of read())\n", l, t, g/t, 100*g/t/r}'
}
run "convert --to modelopt (nvfp4) --jobs 1" "$lofp" convert --to modelopt --jobs 1 --quiet "$tmp/model" "$tmp/out"
run "convert --to modelopt (nvfp4) --jobs $jobs" "$lofp" convert --to modelopt --jobs "$jobs" --quiet "$tmp/model" "$tmp/out"
run "convert --to compressed-tensors --scheme mxfp4 --jobs $jobs" "$lofp" convert --to compressed-tensors --scheme mxfp4 --jobs "$jobs" --quiet "$tmp/model" "$tmp/out"
run "convert --to modelopt --no-fuse-scales --jobs $jobs" "$lofp" convert --to modelopt --no-fuse-scales --jobs "$jobs" --quiet "$tmp/model" "$tmp/out"
"$lofp" convert --to modelopt --jobs "$jobs" --quiet "$tmp/model" "$tmp/q"
rm -rf "$tmp/out"
a=$(date +%s.%N); "$lofp" import --quiet "$tmp/q" "$tmp/out"; b=$(date +%s.%N)
awk -v g="$gb" -v a="$a" -v c="$b" 'BEGIN{printf "%-52s %7.2f s  %6.2f GB/s of bf16 output\n", "import (modelopt nvfp4 -> bf16)", c-a, g/(c-a)}'
