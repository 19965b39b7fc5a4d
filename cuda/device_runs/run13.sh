#!/bin/bash
# Device runs of round five (issue 16), on the tree as it is:
#   run13.sh gemm   build test_cuda + bench_cuda into build-dev/, test_cuda's gemm section (every
#                   wgmma / ws configuration forced against the CPU oracle), bench_cuda gemm with
#                   the per-configuration sweep at M = 64 and 256, condensed
#   run13.sh uq     test_cuda's uq section and bench_cuda attn (store, attention) on build-dev
#   run13.sh all    build, test_cuda gemm + uq, bench_cuda gemm + attn (run 14)
#   run13.sh prof BIN-SECTION REGEX   Nsight Compute through scripts/gpu_profile.sh
set -u
O=${OUT:-/tmp/o}; mkdir -p $O
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
B=$PWD/build-dev
build() {
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF -DLOFP_BUILD_BENCH=OFF \
        -DLOFP_BUILD_SHARED=OFF -DLOFP_BUILD_TESTS=OFF > $O/build.log 2>&1 &&
  cmake --build $B -j 16 --target test_cuda bench_cuda test_codec_host >> $O/build.log 2>&1 || { echo "build failed"; grep -E "error" $O/build.log | head; tail -5 $O/build.log; exit 1; }
  ts "built"
}
condense() { python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith('{'): print(l.rstrip()); continue
    d = json.loads(l); n = d['name']
    if 'error' in d: print(n, d['error']); continue
    print(f"{n:48s} {d['us']:9.2f}")
PY
}
case "${1:-gemm}" in
gemm)
  build
  LOFP_TEST_ONLY=gemm timeout 250 $B/cuda/test_cuda > $O/test_gemm.log 2>&1; echo "test_cuda gemm rc=$?"
  grep -E "configuration|GEMV/GEMM|cases|all checks" $O/test_gemm.log | tail -18; echo "failed checks: $(grep -c 'CHECK failed' $O/test_gemm.log)"; grep 'CHECK failed' $O/test_gemm.log | head -8
  ts "test done"
  timeout 200 $B/cuda/bench_cuda gemm > $O/bench_gemm.jsonl 2>&1; echo "bench gemm rc=$?"
  condense $O/bench_gemm.jsonl | grep -E "w4a16|read_floor" | grep -v w4a8
  ts "bench done" ;;
uq)
  build
  LOFP_TEST_ONLY=uq timeout 200 $B/cuda/test_cuda > $O/test_uq.log 2>&1; echo "test_cuda uq rc=$?"
  grep -E "cases|all checks|store|UQ" $O/test_uq.log | tail -8; echo "failed checks: $(grep -c 'CHECK failed' $O/test_uq.log)"
  timeout 200 $B/cuda/bench_cuda attn > $O/bench_attn.jsonl 2>&1; echo "bench attn rc=$?"
  condense $O/bench_attn.jsonl
  ts "uq done" ;;
all)
  # run 14: everything of round five in one call, with time limits that keep a hang cheap
  build
  for sec in gemm uq; do
    LOFP_TEST_ONLY=$sec timeout 150 $B/cuda/test_cuda > $O/test_$sec.log 2>&1; echo "test_cuda $sec rc=$?"
    grep -E "GEMV|configuration 1[0-2]|cases|all checks|UltraQuant|store" $O/test_$sec.log | tail -6
    echo "failed checks: $(grep -c 'CHECK failed' $O/test_$sec.log)"; grep 'CHECK failed' $O/test_$sec.log | head -5
  done
  ts "tests done"
  for sec in gemm attn; do
    timeout 150 $B/cuda/bench_cuda $sec > $O/bench_$sec.jsonl 2>&1; echo "bench $sec rc=$?"
    condense $O/bench_$sec.jsonl | grep -vE "m(512|1024|2048|4096)_|route|prepare|w4a8"
  done
  ts "bench done" ;;
prof)
  shift
  OUT=$O timeout 560 scripts/gpu_profile.sh $B/cuda "$@" 2>&1 | tail -80 ;;
esac
