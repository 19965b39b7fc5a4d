#!/usr/bin/env bash
# liblofp's link-level namespace: every global it defines starts with lofp_/LOFP_ (so it never
# collides with an application's or another library's names), and liblofp.so exports exactly the
# functions declared LOFP_API in include/lofp/*.h (nothing internal leaks, nothing declared is
# missing). Usage: script_symbols.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 77; }
fail=0
defined() { nm "$@" --defined-only 2>/dev/null | awk 'NF==3 && $2 ~ /[A-Z]/ && $2 != "U" {print $3}' | sort -u; }

for lib in "$build/liblofp.a" "$build/liblofp.so"; do
  [ -f "$lib" ] || { echo "note: $lib not built"; continue; }
  if [ "${lib##*.}" = so ]; then bad=$(defined -D "$lib" | grep -Ev '^(lofp_|LOFP_)' | grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' || true)
  else bad=$(defined -g "$lib" | grep -Ev '^(lofp_|LOFP_)' || true); fi
  if [ -n "$bad" ]; then echo "FAIL: $lib defines globals outside the lofp_ namespace:"; echo "$bad"; fail=1; fi
done

if [ -f "$build/liblofp.so" ]; then
  # Names declared LOFP_API: the identifier just before the first '(' of each declaration.
  # lofp_cuda.h declares the CUDA library's entry points (liblofp_cuda), not liblofp's.
  headers=$(ls "$src"/include/lofp/*.h | grep -v '/lofp_cuda\.h$')
  declared=$(cat $headers | grep -v '^[[:space:]]*#' | tr '\n' ' ' |
             grep -oE 'LOFP_API[^;(]*\(' | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u)
  exported=$(nm -D --defined-only "$build/liblofp.so" | awk '$2 == "T" || $2 == "W" {print $3}' |
             grep -Ev '^(_init|_fini)$' | sort -u)
  extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
  missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
  if [ -n "$extra" ]; then echo "FAIL: liblofp.so exports functions no header declares LOFP_API:"; echo "$extra"; fail=1; fi
  if [ -n "$missing" ]; then echo "FAIL: declared LOFP_API but not exported by liblofp.so:"; echo "$missing"; fail=1; fi
  echo "liblofp.so: $(echo "$exported" | wc -l) exported functions, $(echo "$declared" | wc -l) declared"
fi
[ $fail = 0 ] && echo "OK: liblofp symbols are all lofp_-prefixed"
exit $fail
