#!/bin/bash
# Device run of round two (issue 16), kept as it was run: repository root on the device, binaries
# built on the workstation in build-cuda/cuda (carried). See cuda/NOTES.md "Round two".
set -u
B=build-cuda/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tail -1
i=0
for cfg in "" "rk:8,4" "rk:4,8" "1,4,0"; do
  i=$((i+1)); LOFP_CUDA_GEMV_CFG=$cfg LOFP_TEST_ONLY=gemm timeout 120 $B/test_cuda > $OUT/t_gemm_$i.log 2>&1
  echo "gemm cfg=[$cfg] rc=$? fails=$(grep -c 'CHECK failed' $OUT/t_gemm_$i.log)"; grep "CHECK failed" $OUT/t_gemm_$i.log | head -3
done
LOFP_TEST_ONLY=quant timeout 240 $B/test_cuda > $OUT/t_quant.log 2>&1
echo "quant rc=$? fails=$(grep -c 'CHECK failed' $OUT/t_quant.log)"; grep "CHECK failed" $OUT/t_quant.log | head -5; tail -3 $OUT/t_quant.log
LOFP_BENCH_DEQUANT_AB=1 timeout 90 $B/bench_cuda copy,quant > $OUT/b_quant.jsonl 2>&1
LOFP_BENCH_GEMV_SWEEP="1,4,0;1,4,4;1,4,16;1,4,99;1,8,8;1,8,99;1,16,8;2,4,0;2,4,16;2,8,8;4,4,8;rk:8,4;rk:8,2;rk:8,8;rk:4,4;rk:4,8;rk:8,4,16;rk:8,4,0;rk:4,8,16;rk:8,8,16" timeout 150 $B/bench_cuda gemm > $OUT/b_gemm.jsonl 2>&1
python3 - <<'P'
import json,os
for f in ("b_quant.jsonl","b_gemm.jsonl"):
    for l in open(os.environ["OUT"]+"/"+f):
        if l.startswith("{"):
            o=json.loads(l)
            if "us" in o: print(f"{o['name']:<52} {o['us']:9.2f}  {o['bytes']/o['us']/1e6:6.2f} TB/s")
        else: print(l.rstrip())
P
scripts/gpu_profile.sh $B gemm "gemv_kernel" "gemv_rk_kernel" 2>&1 | tail -30
scripts/gpu_profile.sh $B quant "dequant_lut_kernel" 2>&1 | tail -14
