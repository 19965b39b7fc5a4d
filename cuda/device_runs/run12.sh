#!/bin/bash
# Device run 12 (round four, final): main as landed, built on the device from the tree.
#   run12.sh gpu     make gpu-build, make gpu-test (test_codec_host + every test_cuda section),
#                    make gpu-bench (scripts/gpu_run.sh bench: BENCHMARKS.md's table)
#   run12.sh python  scripts/gpu_python.sh --no-bench (the Python GPU suite), then
#                    bench/gpu_llama.py (transformers Llama, 8B-sized, bf16 against lofp W4A16)
# T_BUILD, T_TEST, T_BENCH, T_BENCH_EACH override the time limits (run15.sh).
set -u
O=${OUT:-/tmp/o}; mkdir -p $O
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tail -1
case "${1:-gpu}" in
gpu)
  timeout ${T_BUILD:-240} make gpu-build JOBS=16 > $O/build.log 2>&1; echo "make gpu-build rc=$?"; grep -E "error" $O/build.log | head -10
  ts "gpu-build done"
  timeout ${T_TEST:-300} make gpu-test JOBS=16 > $O/gpu_test.log 2>&1; echo "make gpu-test rc=$?"
  grep -E "test_codec_host|test_cuda:|all checks|FAIL|exit" $O/gpu_test.log | head -20; echo "failed checks: $(grep -c 'CHECK failed' $O/gpu_test.log)"; grep 'CHECK failed' $O/gpu_test.log | head -5
  ts "gpu-test done"
  OUT=$O LOFP_BENCH_TIMEOUT=${T_BENCH_EACH:-200} timeout ${T_BENCH:-280} make gpu-bench > $O/gpu_bench.txt 2>&1; echo "make gpu-bench rc=$?"
  sed -n '/### Targets/,$p' $O/bench.md
  ts "gpu-bench done" ;;
python)
  python3 -m pip install -q --no-index --find-links build-wheels pytest safetensors 2>&1 | tail -1
  timeout 330 scripts/gpu_python.sh --no-bench > $O/pytest.txt 2>&1; echo "gpu_python rc=$?"
  grep -E "passed|failed|FAILED|ERROR" $O/pytest.txt | head -12
  ts "python done"
  pkg=$(mktemp -d); cp -r python/lofp $pkg/lofp; rm -f $pkg/lofp/*.so; cp build-pygpu/python/lofp/_lofp*.so $pkg/lofp/
  PYTHONPATH=$pkg timeout 240 python3 bench/gpu_llama.py --json $O/llama.json > $O/llama.txt 2>&1; echo "gpu_llama rc=$?"
  tail -25 $O/llama.txt
  ts "llama done" ;;
esac
