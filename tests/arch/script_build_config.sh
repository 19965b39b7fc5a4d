#!/usr/bin/env bash
# The configure step announces the CUDA backend in exactly one line, "lofp: CUDA backend: ON|OFF
# (reason)", and with no GPU on the machine the default (AUTO) leaves it off even where nvcc is
# installed. Configures a scratch tree (no build).
# Usage: script_build_config.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(cmake -S "$root" -B "$tmp/b" -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_PYTHON=OFF 2>&1)
n=$(grep -c "lofp: CUDA backend: " <<< "$out" || true)
[ "$n" = 1 ] || { echo "script_build_config: $n CUDA lines:"; echo "$out"; exit 1; } >&2
line=$(grep "lofp: CUDA backend: " <<< "$out")
grep -Eq "lofp: CUDA backend: (ON|OFF) \(.+\)$" <<< "$line" || { echo "script_build_config: malformed: $line" >&2; exit 1; }
grep -q "werror" <<< "$out" || { echo "script_build_config: no configure summary" >&2; exit 1; }
if ! nvidia-smi -L >/dev/null 2>&1 && [ ! -e /dev/nvidia0 ]; then
  grep -q "lofp: CUDA backend: OFF" <<< "$line" || { echo "script_build_config: no GPU but $line" >&2; exit 1; }
fi
# Asked for OFF, it says so.
out=$(cmake -S "$root" -B "$tmp/c" -DLOFP_BUILD_TESTS=OFF -DLOFP_BUILD_PYTHON=OFF -DLOFP_ENABLE_CUDA=OFF 2>&1)
grep -q "lofp: CUDA backend: OFF (LOFP_ENABLE_CUDA=OFF)" <<< "$out" || { echo "script_build_config: OFF not announced" >&2; exit 1; }
echo "script_build_config: $line"
