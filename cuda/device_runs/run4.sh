#!/bin/bash
# Device run 4 (round three, run 1, 2026-12-01), kept as it was run from build-gpuwip/ (carried, with build-wheels/): main + the v6 store with alignment-correct code stores.
set -u
O=/tmp/o; mkdir -p $O
W=build-gpuwip
B=/tmp/lofp-build-cuda
ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1; nproc
python3 -m pip install -q --no-index --find-links build-wheels pytest safetensors 2>&1 | tail -1
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF \
      -DLOFP_BUILD_BENCH=OFF -DLOFP_BUILD_SHARED=OFF -DLOFP_BUILD_TESTS=OFF >$O/build.log 2>&1 &&
cmake --build $B -j16 --target test_cuda bench_cuda >>$O/build.log 2>&1 || { echo "main build failed"; tail -30 $O/build.log; }
ts "main CUDA build done"
# python extension build in the background while the GPU tests run
( cmake -S . -B build-pygpu -DCMAKE_BUILD_TYPE=Release -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_SHARED=OFF \
    -DLOFP_ENABLE_CUDA=ON >$O/pybuild.log 2>&1 && nice -n 5 cmake --build build-pygpu -j12 --target lofp_python lofp >>$O/pybuild.log 2>&1; echo "pybuild rc=$?" >>$O/pybuild.log ) &
PYB=$!
OUT=$O LOFP_TEST_TIMEOUT=120 LOFP_GPU_PREBUILT=$B/cuda timeout 330 scripts/gpu_run.sh test > $O/gpu_test.txt 2>&1
echo "gpu_run test rc=$?"; grep -E "^== test_cuda|exit|failed checks" $O/gpu_test.txt | paste - - | head -20
grep "CHECK failed" $O/gpu_test.txt | head -8
ts "main tests done"
wait $PYB; tail -2 $O/pybuild.log; ts "pybuild done"
timeout 200 scripts/gpu_python.sh --no-bench > $O/pytest.txt 2>&1; echo "gpu_python rc=$?"
tail -25 $O/pytest.txt
ts "python suite done"
# the v6 store
cp $W/uqcache.cu cuda/uqcache.cu
cmake --build $B -j16 --target test_cuda bench_cuda >$O/build_fix.log 2>&1 || { echo "fix build failed"; grep -m5 error $O/build_fix.log; }
LOFP_TEST_ONLY=uq timeout 120 $B/cuda/test_cuda > $O/t_uq_fix.log 2>&1
echo "test uq (store v6) rc=$? fails=$(grep -c 'CHECK failed' $O/t_uq_fix.log)"; grep "CHECK failed" $O/t_uq_fix.log | head -5; tail -3 $O/t_uq_fix.log
ts "store fix tested"
rm -rf /tmp/pkg && mkdir -p /tmp/pkg && cp -r python/lofp /tmp/pkg/ && rm -f /tmp/pkg/lofp/*.so && cp build-pygpu/python/lofp/_lofp*.so /tmp/pkg/lofp/
PYTHONPATH=/tmp/pkg PYTHONUNBUFFERED=1 timeout 170 python3 $W/gpu_llama.py --json $O/llama.json > $O/llama.txt 2>&1; echo "llama rc=$?"
tail -30 $O/llama.txt
ts "llama done"
export LOFP_BENCH_GEMV_SWEEP="1,4,0;2,4,0;4,4,0;2,4,1;1,8,1;1,8,0"
export LOFP_BENCH_GEMV_SWEEP64="wg;1,4;2,4;4,4"
OUT=$O LOFP_GPU_PREBUILT=$B/cuda timeout 240 scripts/gpu_run.sh bench > $O/gpu_bench.txt 2>&1
echo "gpu_run bench rc=$?"; grep -v '^{' $O/gpu_bench.txt | tail -60
ts "bench done"
OUT=$O timeout 60 scripts/gpu_profile.sh $B/cuda attn uq_store16_kernel 2>&1 | tail -12
OUT=$O timeout 60 scripts/gpu_profile.sh $B/cuda quant dequant_lut_kernel 2>&1 | tail -12
ts "end"
