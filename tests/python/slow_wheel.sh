#!/usr/bin/env bash
# The wheel installs where there is no compiler: `pip wheel .` gives one cp311-abi3 wheel; it is
# installed into a fresh virtual environment with CC=/bin/false and a PATH holding no compiler,
# then an MXFP4 round trip is compared with numpy. Run by `make test-slow` (builds the extension:
# minutes).
# Usage: slow_wheel.sh SOURCE_DIR
set -euo pipefail
root=${1:-$(pwd)}
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip wheel --no-deps -w "$tmp/dist" "$root" >"$tmp/wheel.log" 2>&1 || { tail -30 "$tmp/wheel.log"; exit 1; }
whl=$(ls "$tmp"/dist/lofp-*.whl)
case "$(basename "$whl")" in *-cp311-abi3-*.whl) ;; *) echo "slow_wheel: not a cp311-abi3 wheel: $whl" >&2; exit 1 ;; esac
"$py" -m venv "$tmp/v"
# Only the venv and the basic tools on PATH: no cc, gcc, clang, c++ or nvcc to fall back on.
mkdir -p "$tmp/bin"
for t in sh bash env uname; do ln -s "$(command -v $t)" "$tmp/bin/$t"; done
PATH=$tmp/v/bin:$tmp/bin CC=/bin/false CXX=/bin/false \
  "$tmp/v/bin/python" -m pip install -q ${PIP_FIND_LINKS:+--find-links "$PIP_FIND_LINKS"} "$whl"
for c in cc gcc clang; do
  if PATH=$tmp/v/bin:$tmp/bin command -v $c >/dev/null; then echo "slow_wheel: $c on the test PATH" >&2; exit 1; fi
done
PATH=$tmp/v/bin:$tmp/bin CC=/bin/false "$tmp/v/bin/python" - <<'PY'
import numpy as np, lofp
x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
q = lofp.quantize(x, "mxfp4")
y = lofp.dequantize(q)
# numpy reference: E8M0 scale 2^(floor(log2 amax) - 2), elements rounded (RNE) to the E2M1 grid, saturated.
grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], np.float32)
b = x.reshape(8, 2, 32)
amax = np.abs(b).max(-1, keepdims=True)
e = np.frexp(amax)[1] - 1 - 2
v = b / np.ldexp(np.float32(1), e)
a = np.minimum(np.abs(v), 6)
two = np.argsort(np.abs(a[..., None] - grid), -1, kind="stable")[..., :2]
lo, hi = two.min(-1), two.max(-1)
dlo, dhi = np.abs(a - grid[lo]), np.abs(a - grid[hi])
# nearest; at an exact tie the even code (RNE)
i = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
ref = (np.sign(v) * grid[i] * np.ldexp(np.float32(1), e)).reshape(8, 64)
assert np.array_equal(np.asarray(y, np.float32), ref.astype(np.float32)), "MXFP4 round trip differs from numpy"
print("slow_wheel: cp311-abi3 wheel installed without a compiler; MXFP4 round trip equals numpy;", lofp.__version__)
PY
