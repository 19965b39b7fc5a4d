#!/bin/bash
# Device run 5 (round three, run 2, 2026-12-01), kept as it was run from build-gpuwip/ (carried with build-wheels/): main + the gpu branch's changed files (build-gpuwip/tree) copied over it.
set -u
O=/tmp/o; mkdir -p $O
W=build-gpuwip
B=/tmp/lofp-build-cuda
ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
cp -r $W/tree/. .
git status --short | head -20
python3 -m pip install -q --no-index --find-links build-wheels pytest safetensors 2>&1 | tail -1
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF \
      -DLOFP_BUILD_BENCH=OFF -DLOFP_BUILD_SHARED=OFF -DLOFP_BUILD_TESTS=OFF >$O/build.log 2>&1 &&
timeout 240 cmake --build $B -j16 --target test_cuda bench_cuda test_codec_host >>$O/build.log 2>&1 || { echo "build failed"; grep -B2 -A8 "error" $O/build.log | head -60; }
ts "CUDA build done"
( timeout 400 $B/cuda/test_codec_host > $O/codec_host.txt 2>&1; echo "test_codec_host rc=$?" >> $O/codec_host.txt ) &
( cmake -S . -B build-pygpu -DCMAKE_BUILD_TYPE=Release -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_SHARED=OFF \
    -DLOFP_ENABLE_CUDA=ON >$O/pybuild.log 2>&1 && nice -n 5 cmake --build build-pygpu -j12 --target lofp_python lofp >>$O/pybuild.log 2>&1; echo "pybuild rc=$?" >>$O/pybuild.log ) &
PYB=$!
OUT=$O LOFP_TEST_TIMEOUT=120 LOFP_GPU_PREBUILT=$B/cuda timeout 300 scripts/gpu_run.sh test > $O/gpu_test.txt 2>&1
echo "gpu_run test rc=$?"; grep -E "^== test_cuda|exit|failed checks" $O/gpu_test.txt | paste - - | head -12
grep "CHECK failed" $O/gpu_test.txt | head -8
ts "tests done"
export LOFP_BENCH_GEMV_SWEEP="2,4,1;4,4,0"
export LOFP_BENCH_GEMV_SWEEP64="wg;2,4"
OUT=$O LOFP_GPU_PREBUILT=$B/cuda timeout 200 scripts/gpu_run.sh bench > $O/gpu_bench.txt 2>&1
echo "gpu_run bench rc=$?"; grep -v '^{' $O/gpu_bench.txt | grep -E "Dequantize|UltraQuant store|^\| (nvfp4|mxfp4) \| (1|16|64) \||Targets|^\| (W4A16|NVFP4|MXFP4|Ultra)" | head -40
ts "bench done"
wait $PYB; tail -1 $O/pybuild.log
timeout 150 scripts/gpu_python.sh --no-bench > $O/pytest.txt 2>&1; echo "gpu_python rc=$?"; tail -4 $O/pytest.txt
ts "python suite done"
rm -rf /tmp/pkg && mkdir -p /tmp/pkg && cp -r python/lofp /tmp/pkg/ && rm -f /tmp/pkg/lofp/*.so && cp build-pygpu/python/lofp/_lofp*.so /tmp/pkg/lofp/
PYTHONPATH=/tmp/pkg PYTHONUNBUFFERED=1 timeout 150 python3 scripts/gpu_llama.py --json $O/llama.json > $O/llama.txt 2>&1; echo "llama rc=$?"
grep -v Warning $O/llama.txt | grep -v _warn_once | tail -22
ts "llama done"
OUT=$O timeout 50 scripts/gpu_profile.sh $B/cuda attn uq_store16_kernel 2>&1 | tail -12
OUT=$O timeout 50 scripts/gpu_profile.sh $B/cuda quant dequant_lut_kernel 2>&1 | tail -12
OUT=$O timeout 60 scripts/gpu_profile.sh $B/cuda attn uq_attn3_kernel 2>&1 | tail -12
OUT=$O timeout 60 scripts/gpu_profile.sh $B/cuda gemm gemv_kernel 2>&1 | tail -12
tail -3 $O/codec_host.txt
ts "end"
