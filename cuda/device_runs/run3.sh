#!/bin/bash
# Prepared for device run 3 of round two (NOT run: the device time was spent). From the repository
# root on the device with build-cuda/ carried (binaries built on a workstation whose tests/golden
# path differs, hence the link): every test variant, both benches, the report, two profiles.
set -u
mkdir -p /tmp/lofp-head/tests && ln -sfn "$PWD/tests/golden" /tmp/lofp-head/tests/golden
export LOFP_BENCH_GEMV_SWEEP="1,4,0;2,4,0;4,4,0;2,4,1;1,8,1;1,8,0"
export LOFP_BENCH_GEMV_SWEEP64="wg;1,4;2,4;4,4"
LOFP_GPU_PREBUILT=build-cuda/cuda scripts/gpu_run.sh all
echo "gpu_run rc=$?"
scripts/gpu_profile.sh build-cuda/cuda gemm gemv_kernel 2>&1 | tail -13
scripts/gpu_profile.sh build-cuda/cuda quant dequant_lut_kernel 2>&1 | tail -13
