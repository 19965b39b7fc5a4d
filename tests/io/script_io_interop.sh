#!/usr/bin/env bash
# Interop of the file layer with numpy, safetensors and ml_dtypes (the pinned .venv).
#   bash tests/io/script_io_interop.sh <build_dir> <source_dir>
# 1. test_io writes .npy / .safetensors files (LOFP_IO_INTEROP_WRITE); tests/io/io_interop.py loads
#    them with numpy.load, safetensors.deserialize / safe_open / safetensors.numpy.load_file and
#    checks bytes, shapes, dtypes, metadata, and byte-identity with numpy.save / safetensors.serialize.
# 2. io_interop.py writes files with numpy, safetensors and ml_dtypes (BF16, F8_E4M3, F8_E5M2,
#    F8_E8M0, packed F4) plus malformed files safetensors rejects; test_io (LOFP_IO_INTEROP_READ)
#    reads them and checks every value, and that each malformed file is a clean error.
set -euo pipefail
build=${1:?usage: script_io_interop.sh <build_dir> <source_dir>}
src=${2:?usage: script_io_interop.sh <build_dir> <source_dir>}
py="$src/.venv/bin/python"
if [ ! -x "$py" ]; then
  "$src/scripts/venv.sh"
fi
exe="$build/tests/test_io"
if [ ! -x "$exe" ]; then
  echo "script_io_interop: $exe is missing (build the test_io target first)" >&2
  exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lofp_io_interop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/lofp" "$tmp/py"

echo "== lofp writes, numpy / safetensors read"
LOFP_IO_INTEROP_WRITE="$tmp/lofp" "$exe"
"$py" "$src/tests/io/io_interop.py" check-lofp "$tmp/lofp"

echo "== numpy / safetensors / ml_dtypes write, lofp reads"
"$py" "$src/tests/io/io_interop.py" write-py "$tmp/py"
LOFP_IO_INTEROP_READ="$tmp/py" "$exe"
echo "script_io_interop: all checks passed"
