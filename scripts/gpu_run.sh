#!/usr/bin/env bash
# gpu_run.sh [all|test|bench] -- the one script run on the GPU machine (docs/CUDA.md):
# builds the CUDA backend (or uses binaries carried in $LOFP_GPU_PREBUILT), runs the GPU
# correctness test and the lofp and torch benchmarks side by side, and prints the table.
# Each section runs in its own process with its own time limit, so that one failure or crash
# cannot hide the others. Logs and JSON go to $OUT (the device tool's output folder) or ./gpu-out.
set -u -o pipefail
MODE=${1:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
cd "$ROOT"
export PYTHONUNBUFFERED=1
T_TEST=${LOFP_TEST_TIMEOUT:-150}
T_BENCH=${LOFP_BENCH_TIMEOUT:-90}
T_TORCH=${LOFP_TORCH_TIMEOUT:-150}
echo "== device"; nvidia-smi -L 2>&1 | head -4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tail -1

BIN=""
if [ -n "${LOFP_GPU_PREBUILT:-}" ] && [ -x "$LOFP_GPU_PREBUILT/test_cuda" ] &&
   "$LOFP_GPU_PREBUILT/bench_cuda" none >/dev/null 2>&1; then
  BIN=$LOFP_GPU_PREBUILT
  echo "== using prebuilt binaries in $BIN"
else
  echo "== building (cmake, Release, CUDA on)"
  B=${LOFP_GPU_BUILD:-/tmp/lofp-build-cuda}
  # Only the CUDA targets and the CPU library they link (the oracle) are built, so other
  # in-progress parts of the tree cannot break this run.
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF \
        -DLOFP_BUILD_BENCH=OFF -DLOFP_BUILD_SHARED=OFF -DLOFP_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target test_cuda bench_cuda >>"$OUT/build.log" 2>&1 ||
    { echo "build failed"; tail -40 "$OUT/build.log"; exit 1; }
  BIN=$B/cuda
fi

rc=0
run_test() { # section [VAR=value ...]: the environment selects an older kernel version
  local sec=$1; shift
  echo "== test_cuda $sec $*"
  echo "== test_cuda $sec $*" >>"$OUT/test_cuda.log"
  env "$@" LOFP_TEST_ONLY=$sec timeout "$T_TEST" "$BIN/test_cuda" >>"$OUT/test_cuda.log" 2>&1
  local r=$?
  [ $r -ne 0 ] && rc=1
  echo "   exit $r"
}
run_bench() { # section
  echo "== bench_cuda $1"
  timeout "$T_BENCH" "$BIN/bench_cuda" "$1" >>"$OUT/bench_lofp.jsonl" 2>&1 || echo "   bench_cuda $1 failed ($?)"
}
if [ "$MODE" = all ] || [ "$MODE" = test ]; then
  : >"$OUT/test_cuda.log"
  run_test div,quant
fi
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  : >"$OUT/bench_lofp.jsonl"
  run_bench copy,quant
  echo "== bench_torch"
  timeout "$T_TORCH" python3 bench/bench_torch.py >"$OUT/bench_torch.jsonl" 2>&1 || echo "   bench_torch failed ($?)"
  grep -v '^{' "$OUT/bench_torch.jsonl" | tail -5
fi
[ "$MODE" = all ] || [ "$MODE" = test ] && { run_test gemm; run_test gemm LOFP_TEST_GEMM_NO_WGMMA=1; run_test w4a8; }
[ "$MODE" = all ] || [ "$MODE" = bench ] && run_bench gemm
[ "$MODE" = all ] || [ "$MODE" = test ] && run_test uq
[ "$MODE" = all ] || [ "$MODE" = bench ] && { run_bench attn; run_bench decode; run_bench prefill; }
if [ "$MODE" = all ] || [ "$MODE" = test ]; then
  echo "== test summary"
  grep -v "CHECK failed" "$OUT/test_cuda.log" | tail -45
  echo "failed checks: $(grep -c 'CHECK failed' "$OUT/test_cuda.log")"
  grep "CHECK failed" "$OUT/test_cuda.log" | head -20
fi
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  echo "== report"
  python3 bench/bench_report.py "$OUT/bench_lofp.jsonl" "$OUT/bench_torch.jsonl" "$OUT/bench.md"
fi
exit $rc
