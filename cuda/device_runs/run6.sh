#!/bin/bash
# Device run 6 (round three, run 3, 2026-12-01), kept as it was run from build-gpuwip/ (carried): main + a double-buffered flat dequantize (not kept: no gain; see cuda/NOTES.md).
set -u
O=/tmp/o; mkdir -p $O
B=/tmp/lofp-build-cuda
ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
cp -r build-gpuwip/tree/. .
git status --short | grep cuda
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF \
      -DLOFP_BUILD_BENCH=OFF -DLOFP_BUILD_SHARED=OFF -DLOFP_BUILD_TESTS=OFF >$O/build.log 2>&1 &&
timeout 200 cmake --build $B -j16 --target test_cuda bench_cuda >>$O/build.log 2>&1 || { echo "build failed"; grep -B2 -A8 "error" $O/build.log | head -40; }
ts "build done"
LOFP_TEST_ONLY=div,quant timeout 120 $B/cuda/test_cuda > $O/t_quant.log 2>&1
echo "test quant rc=$? fails=$(grep -c 'CHECK failed' $O/t_quant.log)"; grep "CHECK failed" $O/t_quant.log | head -5; tail -2 $O/t_quant.log
ts "test done"
for i in 1 2; do timeout 60 $B/cuda/bench_cuda copy,quant > $O/b_quant$i.jsonl 2>&1; grep -h -E '"(dequant_|copy)' $O/b_quant$i.jsonl | cut -c1-160; done
ts "bench done"
OUT=$O timeout 50 scripts/gpu_profile.sh $B/cuda quant dequant_lut_kernel 2>&1 | tail -12
ts "end"
