#!/bin/bash
# Device run of round two (issue 16), kept as it was run: repository root on the device, binaries
# built on the workstation in build-cuda/cuda (carried). See cuda/NOTES.md "Round two".
set -u
B=build-cuda/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tail -1
t() { # name env...
  local n=$1; shift
  env "$@" timeout 200 $B/test_cuda > $OUT/t_$n.log 2>&1
  echo "test $n [$*] rc=$? fails=$(grep -c 'CHECK failed' $OUT/t_$n.log)"; grep "CHECK failed" $OUT/t_$n.log | head -4
}
t gemm LOFP_TEST_ONLY=gemm
t gemm18 LOFP_TEST_ONLY=gemm LOFP_CUDA_GEMV_CFG=1,8
t gemm24 LOFP_TEST_ONLY=gemm LOFP_CUDA_GEMV_CFG=2,4
t quant LOFP_TEST_ONLY=quant
t uq LOFP_TEST_ONLY=uq
grep -h "decode-direction\|checkpoint\|UltraQuant store\|GEMV" $OUT/t_*.log | sort | uniq -c
timeout 90 $B/bench_cuda copy,quant > $OUT/b_quant.jsonl 2>&1
LOFP_BENCH_GEMV_SWEEP="v3:1,4;v3:2,4;1,4;1,8;2,4;2,8;4,4;1,16" timeout 150 $B/bench_cuda gemm > $OUT/b_gemm.jsonl 2>&1
timeout 120 $B/bench_cuda attn > $OUT/b_attn.jsonl 2>&1
python3 - <<'P'
import json,os
for f in ("b_quant.jsonl","b_gemm.jsonl","b_attn.jsonl"):
    for l in open(os.environ["OUT"]+"/"+f):
        if l.startswith("{"):
            o=json.loads(l)
            if "us" in o and not ("quant_" in o["name"] and "dequant" not in o["name"]): print(f"{o['name']:<52} {o['us']:9.2f}  {o['bytes']/o['us']/1e6:6.2f} TB/s")
        else: print(l.rstrip())
P
scripts/gpu_profile.sh $B gemm "gemv_kernel" 2>&1 | tail -13
scripts/gpu_profile.sh $B quant "dequant_lut_kernel" 2>&1 | tail -13
scripts/gpu_profile.sh $B attn "uq_store16_kernel" 2>&1 | tail -13
