#!/bin/bash
# Device runs 9, 10 and 11 (round four, second to fourth runs, each on the head of main then),
# three calls on one warm machine:
#   run9.sh test   build main on the device into build-dev/, every test_cuda section (gpu_run.sh test)
#   run9.sh bench  scripts/gpu_run.sh bench on those binaries (bench_cuda + bench_torch + report)
#   run9.sh prof   Nsight Compute (scripts/gpu_profile.sh) on the kernels named below
set -u
O=${OUT:-/tmp/o}; mkdir -p $O
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
git log --oneline -1 2>/dev/null
case "${1:-test}" in
test)
  OUT=$O LOFP_GPU_BUILD=$PWD/build-dev LOFP_TEST_TIMEOUT=200 timeout 560 scripts/gpu_run.sh test > $O/run_test.txt 2>&1; echo "gpu_run test rc=$?"
  grep -E '^== test_cuda|exit|build failed|error' $O/run_test.txt | head -30
  grep -E 'cuBLASLt|large-M|w4a8.*(err|rel)|cases|all checks' $O/test_cuda.log | head -24
  echo "failed checks: $(grep -c 'CHECK failed' $O/test_cuda.log)"; grep 'CHECK failed' $O/test_cuda.log | head -20 ;;
bench)
  OUT=$O LOFP_GPU_PREBUILT=$PWD/build-dev/cuda LOFP_BENCH_TIMEOUT=220 timeout 570 scripts/gpu_run.sh bench > $O/run_bench.txt 2>&1; echo "gpu_run bench rc=$?"
  grep -E 'failed' $O/run_bench.txt | head
  sed -n '/## /,$p' $O/bench.md 2>/dev/null | grep -v '^| [a-z]* | [0-9]* | 14336' | head -120 ;;
prof)
  shift
  OUT=$O timeout 560 scripts/gpu_profile.sh build-dev/cuda "$@" 2>&1 | tail -80 ;;
esac
ts done
