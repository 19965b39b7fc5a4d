#!/usr/bin/env bash
# gpu_profile.sh BIN_DIR SECTION KERNEL_REGEX [KERNEL_REGEX...] -- Nsight Compute profile of the
# first launch of each named kernel while bench_cuda runs SECTION (quant, gemm, attn). Run on the
# device machine (ncu needs the hardware counters; clocks left alone as METHOD.md asks). Reports
# go to $OUT/ncu_<regex>.txt.
set -u
BIN=$1; SECTION=$2; shift 2
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
for k in "$@"; do
  f="$OUT/ncu_$(echo "$k" | tr -c 'A-Za-z0-9_\n' '_').txt"
  LOFP_BENCH_ITERS=3 timeout 300 "$NCU" --clock-control none --set full -k "regex:$k" -c 1 \
      "$BIN/bench_cuda" "$SECTION" >"$f" 2>&1
  echo "== $k -> $f ($?)"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Throughput|Executed Ipc A" "$f" | head -20
done
