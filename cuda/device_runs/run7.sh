#!/bin/bash
# Device run 7 (round three, final, 2026-12-01 14:45), kept as it was run from build-gpuwip/ (carried with build-wheels/): /work/main as it was (0cc6170), then the IMPL=mma routing fix (build-gpuwip/tree) tested on top.
# make gpu-test (test_codec_host + test_cuda), make gpu-bench (scripts/gpu_run.sh bench: the table),
# scripts/gpu_python.sh (the Python GPU suite + its bench), the test_cuda variants of gpu_run.sh.
set -u
O=/tmp/o; mkdir -p $O
ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
git log --oneline -1 2>/dev/null; git status --short | head -5
python3 -m pip install -q --no-index --find-links build-wheels pytest safetensors 2>&1 | tail -1
timeout 240 make gpu-build JOBS=16 > $O/build.log 2>&1; echo "make gpu-build rc=$?"; grep -E "error" $O/build.log | head -10
ts "gpu-build done"
( cmake -S . -B build-pygpu -DCMAKE_BUILD_TYPE=Release -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_SHARED=OFF \
    -DLOFP_ENABLE_CUDA=ON >$O/pybuild.log 2>&1 && nice -n 5 cmake --build build-pygpu -j12 --target lofp_python lofp >>$O/pybuild.log 2>&1; echo "pybuild rc=$?" >>$O/pybuild.log ) &
PYB=$!
timeout 300 make gpu-test JOBS=16 > $O/gpu_test.log 2>&1; echo "make gpu-test rc=$?"
grep -E "test_codec_host|test_cuda:|uq_code|all checks|FAIL" $O/gpu_test.log | head -8; echo "failed checks: $(grep -c 'CHECK failed' $O/gpu_test.log)"; grep 'CHECK failed' $O/gpu_test.log | head -5
ts "gpu-test done"
OUT=$O timeout 200 make gpu-bench > $O/gpu_bench.txt 2>&1; echo "make gpu-bench rc=$?"
sed -n '/### Targets/,$p' $O/bench.md
ts "gpu-bench done"
wait $PYB; tail -1 $O/pybuild.log
timeout 200 scripts/gpu_python.sh > $O/pytest.txt 2>&1; echo "gpu_python rc=$?"
grep -E "passed|failed|FAILED|ERROR" $O/pytest.txt | head -12
ts "python done"
B=build-cuda/cuda
for v in "gemm LOFP_CUDA_GEMV_CFG=1,4,1" "gemm LOFP_CUDA_GEMV_CFG=wg" "gemm LOFP_CUDA_GEMM_IMPL=mma" "uq LOFP_CUDA_ATTN_IMPL=v3-noflat" "uq LOFP_CUDA_ATTN_IMPL=v2"; do
  set -- $v; sec=$1; shift
  env "$@" LOFP_TEST_ONLY=$sec timeout 100 $B/test_cuda > $O/var.log 2>&1; r=$?
  echo "variant $sec $* rc=$r fails=$(grep -c 'CHECK failed' $O/var.log)"
done
ts "end"
# after the checks of main: the routing fix for LOFP_CUDA_GEMM_IMPL=mma (m = 33..64 to the GEMV, as on
# devices without wgmma), tested here before it lands
cp -r build-gpuwip/tree/. .
cmake --build build-cuda -j16 --target test_cuda > $O/build_fix.log 2>&1 || { echo "fix build failed"; grep -m5 error $O/build_fix.log; }
for v in "gemm" "gemm LOFP_CUDA_GEMM_IMPL=mma"; do
  set -- $v; sec=$1; shift
  env "$@" LOFP_TEST_ONLY=$sec timeout 100 $B/test_cuda > $O/fix.log 2>&1; r=$?
  echo "fix: $sec $* rc=$r fails=$(grep -c 'CHECK failed' $O/fix.log)"
done
ts "fix tested"
