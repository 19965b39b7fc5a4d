#!/bin/bash
# Device run 8 (round four, first run), two calls: `run8.sh test` builds main on the device into
# build-dev/ and runs every test_cuda section (scripts/gpu_run.sh test); `run8.sh bench` runs
# scripts/gpu_run.sh bench on those binaries (bench_cuda + bench_torch + the report).
set -u
O=${OUT:-/tmp/o}; mkdir -p $O
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
if [ "${1:-test}" = test ]; then
  OUT=$O LOFP_GPU_BUILD=$PWD/build-dev LOFP_TEST_TIMEOUT=200 timeout 560 scripts/gpu_run.sh test > $O/run_test.txt 2>&1; echo "gpu_run test rc=$?"
  grep -E '^== test_cuda|exit|build failed|error' $O/run_test.txt | head -30
  grep -E 'cuBLASLt|large-M|W4A8|w4a8.*(err|rel)' $O/test_cuda.log | head -12
  echo "failed checks: $(grep -c 'CHECK failed' $O/test_cuda.log)"; grep 'CHECK failed' $O/test_cuda.log | head -20
else
  OUT=$O LOFP_GPU_PREBUILT=$PWD/build-dev/cuda LOFP_BENCH_TIMEOUT=220 timeout 570 scripts/gpu_run.sh bench > $O/run_bench.txt 2>&1; echo "gpu_run bench rc=$?"
  grep -E 'failed' $O/run_bench.txt | head
  sed -n '/## /,$p' $O/bench.md 2>/dev/null | head -150
fi
ts done
