#!/usr/bin/env bash
# Builds the libFuzzer harnesses of the file layer (fuzz/fuzz_*.c + src/io/*.c) with
# clang -fsanitize=fuzzer,address,undefined and runs each for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      HARNESS: npy, safetensors, gguf, gguf_ckpt, qtmeta,
#                                               ckpt_dir, calib (default: all)
#
# gguf fuzzes the GGUF parser alone; it links the library's components (the parser's writer side
# registers its temporaries with the checkpoint layer's signal cleanup).
# gguf_ckpt fuzzes a GGUF opened as a checkpoint (lofp_ckpt_open + get + find + dequantize of every
# tensor, fuzz/fuzz_gguf_ckpt.c); it links the library's components, checkpoint included.
# qtmeta fuzzes the library's `lofp:` metadata interpreter (src/checkpoint/qfile.c) on valid files;
# it links the components it uses (core, runtime, quant with its AVX2/AVX-512 kernels, layout, io).
# calib fuzzes the calibration-file reader (lofp/calib.h: lofp's safetensors statistics and llama.cpp
# imatrix GGUFs, fuzz/fuzz_calib.c); it links the library's components, checkpoint included.
# ckpt_dir fuzzes whole model directories through the public checkpoint API (fuzz/fuzz_ckpt_dir.c:
# the input is split into config.json, hf_quant_config.json, the index and shards); it links the
# library without gemm and kv and writes its scratch directories to $TMPDIR (default here: /dev/shm when it
# exists, since every input is written, converted and imported on disk).
#
# Work files go to build-fuzz/ (override with LOFP_FUZZ_DIR): the binaries, a growing working
# corpus per harness (seeded from fuzz/corpus/<harness>/, which is never written), and crash
# artifacts. Extra libFuzzer flags can be passed in LOFP_FUZZ_FLAGS (e.g. "-jobs=2 -workers=2").
# Exits non-zero when a harness finds a crash; the reproducer is in build-fuzz/artifacts_<h>/.
# Re-run one input:  build-fuzz/fuzz_<h> build-fuzz/artifacts_<h>/crash-...
# Keep it as a regression: copy it to fuzz/corpus/<h>/regress-<what>, which tests/io/test_io_corpus.c
# (gguf: tests/checkpoint/test_gguf_corpus.c; gguf_ckpt: tests/checkpoint/test_gguf_ckpt_corpus.c;
# calib: tests/checkpoint/test_calib.c)
# replays on every ctest run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(npy safetensors gguf gguf_ckpt qtmeta ckpt_dir calib)
out=${LOFP_FUZZ_DIR:-$root/build-fuzz}
cc=${CC:-clang}
mkdir -p "$out"
# lofp/version.h is generated from VERSION (cmake/version.h.in), here as CMake would write it.
ver=$(tr -d '[:space:]' < "$root/VERSION")
mkdir -p "$out/gen/lofp"
IFS=. read -r vmaj vmin vpat <<< "$ver"
sed -e "s/@LOFP_VERSION_MAJOR@/$vmaj/" -e "s/@LOFP_VERSION_MINOR@/$vmin/" -e "s/@LOFP_VERSION_PATCH@/$vpat/" \
    -e "s/@LOFP_VERSION@/$ver/" "$root/cmake/version.h.in" > "$out/gen/lofp/version.h"
# The library sources a harness needs: the file layer for npy/safetensors; the tensor-file owner
# and its error helpers over the components below checkpoint for qtmeta; the whole library but
# gemm and kv (its ISA kernels compiled with their flags) for the GGUF and checkpoint harnesses.
sources() {
  case "$1" in
    gguf|qtmeta|gguf_ckpt|ckpt_dir|calib)
      mkdir -p "$out/lib"
      for k in "$root"/src/quant/x86/*_avx2.c "$root"/src/quant/x86/*_avx512.c; do
        [ -f "$k" ] || continue
        isa=(-mavx2 -mfma -mf16c)
        case "$k" in *_avx512.c) isa+=(-mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 -mavx512vbmi) ;; esac
        "$cc" -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -fsanitize=address,undefined "${isa[@]}" \
          -I"$out/gen" -I"$root/include" -I"$root/src" -c "$k" -o "$out/lib/$(basename "$k" .c).o" >&2
        echo "$out/lib/$(basename "$k" .c).o"
      done
      if [ "$1" = qtmeta ]; then
        echo "$root/src/checkpoint/qfile.c" "$root/src/checkpoint/ck_util.c" "$root"/src/{core,runtime,quant,layout,io}/*.c -I"$root/fuzz" -lm -lpthread
      else
        echo "$root"/src/{core,runtime,quant,layout,io,checkpoint}/*.c -lm -lpthread
      fi ;;
    *) echo "$root"/src/io/*.c ;;
  esac
}
for h in "${harnesses[@]}"; do
  src="$root/fuzz/fuzz_$h.c"
  [ -f "$src" ] || { echo "fuzz.sh: no harness $src" >&2; exit 2; }
  echo "== building fuzz_$h"
  "$cc" -std=c11 -g -O1 -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Wshadow -Wno-unused-parameter \
    -I"$out/gen" -I"$root/include" -I"$root/src" "$src" $(sources "$h") -o "$out/fuzz_$h"
  mkdir -p "$out/corpus_$h" "$out/artifacts_$h"
  echo "== running fuzz_$h for ${secs}s"
  max_len=8192
  tmp=${TMPDIR:-}
  if [ "$h" = ckpt_dir ]; then
    # seeds are whole small models (10-30 KB)
    max_len=49152
    [ -z "$tmp" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && tmp=/dev/shm
  fi
  # shellcheck disable=SC2086
  TMPDIR=${tmp:-/tmp} "$out/fuzz_$h" -max_total_time="$secs" -print_final_stats=1 -max_len=$max_len \
    -dict="$root/fuzz/$h.dict" -artifact_prefix="$out/artifacts_$h/" ${LOFP_FUZZ_FLAGS:-} \
    "$out/corpus_$h" "$root/fuzz/corpus/$h"
done
echo "fuzz.sh: no crashes"
