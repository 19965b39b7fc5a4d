"""lofp against independent oracles: ml_dtypes for the element codecs, and MX / NVFP4
quantize-dequantize rebuilt from ml_dtypes casts and numpy arithmetic (no lofp code involved)."""
import ml_dtypes
import numpy as np
import pytest

import lofp

ML = {
    "e2m1": ml_dtypes.float4_e2m1fn, "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
    "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e8m0": ml_dtypes.float8_e8m0fnu,
    "bf16": ml_dtypes.bfloat16, "fp16": np.float16,
}
WIDTH = {"e2m1": 16, "e2m3": 64, "e3m2": 64, "e4m3": 256, "e5m2": 256, "e8m0": 256, "bf16": 65536, "fp16": 65536}


def _sample(rng, n=200000):
    """Finite fp32 values across the exponent range, both signs, plus near-tie values."""
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    y = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    return np.concatenate([x, y, np.array([0.0, -0.0, 1.0, -1.0, 3.0, 5.0, 448.0, 464.0, 57344.0], np.float32)])


@pytest.mark.parametrize("elem", list(ML))
def test_decode_every_code_matches_ml_dtypes(elem):
    n = WIDTH[elem]
    codes = np.arange(n, dtype=np.uint16 if n > 256 else np.uint8)
    ours = lofp.decode(codes, elem)
    ref = codes.view(ML[elem]).astype(np.float32) if n > 16 or elem == "e2m1" else None
    if elem in ("e2m1", "e2m3", "e3m2"):  # ml_dtypes stores sub-byte types one per byte
        ref = codes.astype(np.uint8).view(ML[elem]).astype(np.float32)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), ref[~nan].view(np.uint32))


@pytest.mark.parametrize("elem", list(ML))
def test_encode_matches_ml_dtypes(elem, rng):
    x = _sample(rng)
    if elem == "e8m0":
        # documented differences (docs/TESTING.md): ties 1.5*2^k with an even lower exponent and
        # fp32 subnormals below 1.5*2^-127; compare positive normal values off the ties
        x = np.abs(x)
        x = x[(x >= np.float32(2.0**-126)) & (x < np.float32(2.0**127))]
        m, _ = np.frexp(x.astype(np.float64))
        x = x[m != 0.75]
    ours = lofp.encode(x, elem, overflow="ieee")
    ref = x.astype(ML[elem])
    ref_codes = ref.view(np.uint16 if WIDTH[elem] > 256 else np.uint8)
    if WIDTH[elem] <= 64:
        ref_codes = ref_codes & np.uint8(WIDTH[elem] - 1)
    nan = np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(lofp.decode(ours, elem)), nan)
    np.testing.assert_array_equal(ours[~nan], ref_codes[~nan])


def test_encode_rounding_modes_and_stochastic():
    x = np.array([2.5, 3.5, -2.5, 0.25, 0.75], np.float32)   # E2M1 ties
    assert list(lofp.decode(lofp.encode(x, "e2m1"), "e2m1")) == [2.0, 4.0, -2.0, 0.0, 1.0]
    assert list(lofp.decode(lofp.encode(x, "e2m1", rounding="ties-away"), "e2m1")) == [3.0, 4.0, -3.0, 0.5, 1.0]
    assert list(lofp.decode(lofp.encode(x, "e2m1", rounding="ties-to-zero"), "e2m1")) == [2.0, 3.0, -2.0, 0.0, 0.5]
    # stochastic: 2.5 lies halfway between 2 and 3: rounds up iff rbits < 2^31
    r = np.array([0, 2**31 - 1, 2**31, 2**32 - 1], np.uint32)
    up = lofp.decode(lofp.encode(np.full(4, 2.5, np.float32), "e2m1", rounding="stochastic", rbits=r), "e2m1")
    assert list(up) == [3.0, 3.0, 2.0, 2.0]


def _unpack_fp4(codes):
    lo = codes & 0x0F
    hi = codes >> 4
    return np.stack([lo, hi], axis=-1).reshape(codes.shape[:-1] + (codes.shape[-1] * 2,))


def _mx_oracle(x, elem_dtype, emax, maxval, block=32):
    """OCP MX with the FLOOR rule: scale 2^(floor(log2 amax) - emax), elements RNE, saturating."""
    rows, k = x.shape
    xb = x.reshape(rows, k // block, block).astype(np.float64)
    amax = np.abs(xb).max(axis=-1)
    e = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - emax
    e = np.where(amax > 0, e, -127)
    e = np.clip(e, -127, 127)
    scale = np.exp2(e)
    q = np.clip(xb / scale[..., None], -maxval, maxval).astype(np.float32).astype(elem_dtype)
    return q.reshape(rows, k), (e + 127).astype(np.uint8)


@pytest.mark.parametrize("scheme,elem_dtype,emax,maxval", [
    ("mxfp8-e4m3", ml_dtypes.float8_e4m3fn, 8, 448.0),
    ("mxfp8-e5m2", ml_dtypes.float8_e5m2, 15, 57344.0),
    ("mxfp6-e2m3", ml_dtypes.float6_e2m3fn, 2, 7.5),
    ("mxfp6-e3m2", ml_dtypes.float6_e3m2fn, 4, 28.0),
    ("mxfp4", ml_dtypes.float4_e2m1fn, 2, 6.0),
])
def test_mx_quantize_matches_ml_dtypes_oracle(rng, scheme, elem_dtype, emax, maxval):
    x = (rng.standard_normal((16, 256)) * np.exp2(rng.integers(-8, 8, (16, 1)))).astype(np.float32)
    x[0, :32] = 0.0
    q = lofp.quantize(x, scheme)
    ref_codes, ref_scales = _mx_oracle(x, elem_dtype, emax, maxval)
    np.testing.assert_array_equal(q.scales.view(np.uint8), ref_scales)
    codes = _unpack_fp4(q.codes) if scheme == "mxfp4" else q.codes
    np.testing.assert_array_equal(codes, ref_codes.view(np.uint8))
    # dequantize: code * 2^(e-127), from ml_dtypes decoding only
    scales = q.scales.astype(np.float32)
    ref = (ref_codes.astype(np.float32).reshape(16, 8, 32) * scales[..., None]).reshape(16, 256)
    np.testing.assert_array_equal(lofp.dequantize(q).view(np.uint32), ref.astype(np.float32).view(np.uint32))


def test_nvfp4_dequantize_matches_ml_dtypes_oracle(rng):
    x = rng.standard_normal((8, 128)).astype(np.float32)
    q = lofp.quantize(x, "nvfp4")
    vals = _unpack_fp4(q.codes).astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    s = q.scales.astype(np.float32)                        # float8_e4m3fn -> fp32 (ml_dtypes)
    prod = (vals.reshape(8, 8, 16) * s[..., None]).astype(np.float32)
    ref = (prod / np.float32(q.global_scale)).astype(np.float32).reshape(8, 128)
    np.testing.assert_array_equal(lofp.dequantize(q).view(np.uint32), ref.view(np.uint32))
    # the global is fl(fl(1/amax) * 2688), the decode scale its reciprocal
    amax = np.float32(np.abs(x).max())
    g = np.float32(np.float32(1.0) / amax) * np.float32(2688.0)
    assert np.float32(q.global_scale) == g
    assert np.float32(q.decode_scale) == np.float32(1.0) / g
    enc, dec = lofp.nvfp4_global_scale(x)
    assert np.float32(enc) == g and np.float32(dec) == np.float32(amax / np.float32(2688.0))


def test_hadamard_is_orthonormal(rng):
    x = rng.standard_normal((4, 128)).astype(np.float32)
    h = lofp.hadamard(x)
    d = lofp.hadamard(x, dense=True)
    H = np.array([[1.0]])
    while H.shape[0] < 128:
        H = np.block([[H, H], [H, -H]])
    ref = x.astype(np.float64) @ (H / np.sqrt(128)).T
    np.testing.assert_allclose(h, ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(d, ref, rtol=0, atol=1e-5)
    np.testing.assert_allclose(lofp.hadamard(h), x, rtol=0, atol=1e-5)


def test_ultraquant_dequantize_oracle(rng):
    x = rng.standard_normal((6, 128)).astype(np.float32)
    q = lofp.quantize(x, "ultraquant", rotate=False)
    s = q.scales.view(np.uint8).astype(np.int32)
    vals = _unpack_fp4(q.codes).astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    mult = np.where(s == 0, 0.0, np.exp2(s - 127.0)).astype(np.float32)
    ref = (vals.reshape(6, 4, 32) * mult[..., None]).reshape(6, 128).astype(np.float32)
    np.testing.assert_array_equal(lofp.dequantize(q), ref)
