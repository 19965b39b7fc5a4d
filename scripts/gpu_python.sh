#!/usr/bin/env bash
# The Python package on a GPU machine: builds the extension with the CUDA backend (build-pygpu),
# runs tests/python (numpy, torch CPU and CUDA, custom ops, torch.compile, the stream contract,
# CUDA arrays of other DLPack producers, the eager fast path, W4A8), then the binding benchmark
# and bench/torch_overhead.py. Needs python3 with numpy, ml_dtypes, torch and pytest (and
# safetensors for one test); no network.
#   scripts/gpu_python.sh [--no-bench] [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bench=1
if [ "${1:-}" = "--no-bench" ]; then bench=0; shift; fi
py=${PYTHON:-python3}
$py -c "import pytest, numpy, ml_dtypes" || { echo "gpu_python: $py needs pytest, numpy and ml_dtypes" >&2; exit 1; }
build=${LOFP_PY_BUILD:-build-pygpu}
# LOFP_PY_PREBUILT=1: $build already holds python/lofp/_lofp*.so and lofp, built elsewhere
# (x86-64, CUDA on) and carried here, so the GPU machine spends no time compiling.
if [ "${LOFP_PY_PREBUILT:-0}" != 1 ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_SHARED=OFF \
    -DLOFP_ENABLE_CUDA=ON >/dev/null
  cmake --build "$build" -j"$(nproc)" --target lofp_python lofp 2>&1 | grep -E "error|Built target (lofp|lofp_python)$" || true
fi
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
cp -r python/lofp "$pkg/lofp"
rm -f "$pkg"/lofp/*.so
cp "$build"/python/lofp/_lofp*.so "$pkg/lofp/"
export PYTHONPATH="$pkg" LOFP_CLI="$PWD/$build/lofp"
$py -c "import lofp; print('lofp', lofp.__version__, 'CUDA backend', lofp.HAVE_CUDA, 'devices', lofp.cuda_device_count())"
$py -m pytest -q -rs -s -p no:cacheprovider tests/python "$@"
if [ $bench = 1 ]; then
  $py bench/bench_python.py --quick
  # the allocating dequantize with glibc keeping large blocks (BENCHMARKS.md "Python binding")
  MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=4294967296 $py bench/bench_python.py --quick --only large
  # host time of an eager lofp.torch layer call against its kernel (docs/PYTHON.md "Eager calls")
  if $py -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    $py bench/torch_overhead.py
  fi
fi
