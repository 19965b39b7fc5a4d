#!/usr/bin/env bash
# Creates the virtual environment of `make test-engines` (.venv-engines, or $LOFP_ENGINES_VENV):
# the test requirements of scripts/requirements-test.txt plus llama-cpp-python at the version
# pinned below, built from its sdist as a CPU-only llama.cpp (cmake; a few minutes of compiling
# on two cores). A stamp records what the venv was built from, so a second call is free.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${LOFP_ENGINES_VENV:-$here/.venv-engines}"
# llama-cpp-python 0.3.36 vendors llama.cpp 0c1e570; the comparisons in tests/engines/ were
# written against that llama.cpp (its MXFP4 quantizer's rounding, its log lines).
LLAMA_CPP_PYTHON_VERSION=0.3.36
req="$here/scripts/requirements-test.txt"
stamp="$venv/.lofp-engines"
want="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION
$(cat "$req")"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
rm -rf "$venv"
python3 -m venv "$venv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v 'no-deps' "$req" | sed 's/#.*//' | grep -v '^ *$' > "$tmp/deps.txt" || true
grep 'no-deps' "$req" | grep -v '^ *#' | sed 's/#.*//' > "$tmp/nodeps.txt" || true
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" -r "$tmp/deps.txt"
if [ -s "$tmp/nodeps.txt" ]; then "${pip[@]}" --no-deps -r "$tmp/nodeps.txt"; fi
# CPU only: no GPU toolkit is needed, and the logits the tests compare come from one backend.
# GGML_NATIVE=OFF keeps the build independent of the host's vector extensions.
export CMAKE_ARGS="${LOFP_ENGINES_CMAKE_ARGS:--DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${LOFP_ENGINES_JOBS:-2}"
"${pip[@]}" --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
printf '%s' "$want" > "$stamp"
