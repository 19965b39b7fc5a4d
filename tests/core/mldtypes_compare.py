#!/usr/bin/env python3
"""Compare lofp's element codecs with ml_dtypes (and numpy for MXINT8), bit for bit.

Usage: mldtypes_compare.py PATH/TO/lofp_codec_dump

Encode: lofp_encode(type, x, RNE, IEEE) on a dense set of fp32 inputs (every 997th fp32 bit
pattern, every fp32 pattern within 4 ulps of each representable value, each midpoint, and the
"next" value past max of every type, both signs, +-0, +-Inf and several NaNs) against
`x.astype(ml_dtype)`. NaN results are compared as "both NaN". MXINT8 (no ml_dtypes type) is
compared against numpy: clip(rint(x * 64), -127, 127) as int8, NaN -> 0. UE4M3 is compared with
float8_e4m3fn on non-negative inputs.

Decode: lofp_decode of every code of each type against `codes.view(ml_dtype).astype(float32)`.

Documented differences (docs/FORMATS.md, docs/TESTING.md) are excluded, counted and printed; each
must match its predicate exactly (type and input class), anything else is a failure (exit 1):
  fp4/fp6 NaN input:   ml_dtypes gives a signed zero with the NaN's sign flipped; lofp gives +0.
  e8m0 exact ties:     ml_dtypes rounds ties at 1.5 * 2^k up; lofp rounds to the even exponent.
  e8m0 fp32 subnormal: ml_dtypes sends fp32 subnormals in (2^-127, 1.5 * 2^-127) to 2^-126;
                       the nearest E8M0 value is 2^-127 (0x00), which lofp returns.
  ue4m3 overflow:      lofp's UE4M3 saturates to 448 under IEEE; float8_e4m3fn gives NaN.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import ml_dtypes as md

# (lofp name, ml_dtypes / numpy dtype or None, code width, storage dtype of ml codes)
TYPES = [
    ("e2m1", md.float4_e2m1fn, 4),
    ("e2m3", md.float6_e2m3fn, 6),
    ("e3m2", md.float6_e3m2fn, 6),
    ("e4m3", md.float8_e4m3fn, 8),
    ("e5m2", md.float8_e5m2, 8),
    ("e8m0", md.float8_e8m0fnu, 8),
    ("ue4m3", md.float8_e4m3fn, 8),
    ("mxint8", None, 8),
    ("bf16", md.bfloat16, 16),
    ("fp16", np.float16, 16),
]

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg)


def run_tool(tool, verb, tname, data_u32, *extra):
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        data_u32.astype("<u4").tofile(fin)
        r = subprocess.run([tool, verb, tname, fin, fout, *extra], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{tool} {verb} {tname} failed ({r.returncode}): {r.stderr}")
        return np.fromfile(fout, dtype="<u4")


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def code_dtype(width):
    return np.uint16 if width == 16 else np.uint8


def ml_values_of_codes(dt, width):
    codes = np.arange(1 << width, dtype=np.uint32)
    with np.errstate(invalid="ignore"):
        return codes, codes.astype(code_dtype(width)).view(dt).astype(np.float32)


def neighbourhood(values_f64, radius=4):
    """fp32 bit patterns within `radius` ulps of each value (positive side; values must be finite
    fp32 numbers or be rounded to the nearest one)."""
    v = np.asarray(values_f64, dtype=np.float64)
    v = v[np.isfinite(v) & (v >= 0) & (v <= np.finfo(np.float32).max)]
    b = v.astype(np.float32).view(np.uint32).astype(np.int64)
    out = (b[:, None] + np.arange(-radius, radius + 1)[None, :]).ravel()
    out = out[(out >= 0) & (out <= 0x7F800000)]
    return out.astype(np.uint32)


def type_table(name, dt, width):
    """Sorted non-negative finite magnitudes of the type (float64)."""
    if name == "mxint8":
        return np.arange(0, 128, dtype=np.float64) / 64.0
    _, vals = ml_values_of_codes(dt, width)
    vals = vals[np.isfinite(vals)].astype(np.float64)  # (signalling NaNs would warn in the cast)
    vals = vals[vals >= 0]
    return np.unique(vals)


def inputs_for(name, dt, width, generic):
    mag = type_table(name, dt, width)
    mids = (mag[:-1] + mag[1:]) / 2
    step = mag[-1] - mag[-2]
    if name == "e8m0":
        extra = [mag[-1] * 2, mag[-1] * 1.5]
    else:
        extra = [mag[-1] + step, mag[-1] + step / 2, 2 * mag[-1], 4 * mag[-1]]
    pos = np.concatenate([neighbourhood(mag), neighbourhood(mids), neighbourhood(extra)])
    allp = np.concatenate([pos, pos | np.uint32(0x80000000), generic])
    return np.unique(allp.astype(np.uint32))


def ml_encode(name, dt, width, bits):
    x = f32(bits)
    if name == "mxint8":
        with np.errstate(invalid="ignore"):
            xd = x.astype(np.float64)
            k = np.clip(np.rint(xd * 64.0), -127, 127)
            k = np.where(np.isnan(xd), 0, k)
        return k.astype(np.int8).view(np.uint8).astype(np.uint32)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dt).view(code_dtype(width)).astype(np.uint32)


def is_nan_code(name, dt, width, codes):
    if name == "mxint8":
        return np.zeros(codes.shape, dtype=bool)
    mask = (1 << width) - 1
    valid = codes <= mask
    v = (codes & mask).astype(code_dtype(width)).view(dt).astype(np.float32)
    return valid & np.isnan(v)


def classify(name, bits, ours, ml):
    """Label each mismatch with its documented-difference class ('' = unexplained)."""
    x = f32(bits)
    a = bits & np.uint32(0x7FFFFFFF)
    neg = (bits >> np.uint32(31)) == 1
    exp = (a >> np.uint32(23)).astype(np.int64)
    man = a & np.uint32(0x7FFFFF)
    lab = np.full(bits.shape, "", dtype=object)
    if name in ("e2m1", "e2m3", "e3m2"):
        signbit = np.uint32(1 << ({"e2m1": 4, "e2m3": 6, "e3m2": 6}[name] - 1))
        nan_case = np.isnan(x) & (ours == 0) & (ml == np.where(neg, 0, signbit))
        lab[nan_case] = "fp4/fp6 NaN input -> sign-flipped zero"
    if name == "e8m0":
        # exact tie 1.5 * 2^k: a normal fp32 whose mantissa is exactly 0x400000 (or the subnormal
        # 0x00600000 = 1.5 * 2^-127); ml_dtypes rounds up, lofp to the even biased exponent.
        tie = ((exp > 0) & (man == 0x400000)) | (a == 0x00600000)
        tie_case = tie & ~neg & ((ours & 1) == 0) & (ml == ours + 1)
        lab[tie_case] = "e8m0 exact tie (ml_dtypes rounds up)"
        # ml_dtypes sends the fp32 subnormals strictly between 2^-127 and the tie 1.5 * 2^-127
        # (0x00400001 .. 0x005FFFFF) up to 2^-126 (0x01); the nearest value is 2^-127 (0x00).
        sub_case = ~neg & (a > 0x00400000) & (a < 0x00600000) & (ours == 0) & (ml == 1)
        lab[sub_case] = "e8m0 fp32 subnormal in (2^-127, 1.5*2^-127) (ml_dtypes rounds up)"
    if name == "ue4m3":
        sat_case = ~neg & np.isfinite(x) & (x > 464) & (ours == 0x7E) & (ml == 0x7F)
        sat_case |= ~neg & np.isinf(x) & (ours == 0x7E) & (ml == 0x7F)
        lab[sat_case] = "ue4m3 saturates past 464 (e4m3fn gives NaN)"
    return lab


def compare_encode(tool, name, dt, width, generic):
    bits = inputs_for(name, dt, width, generic)
    if name == "ue4m3":
        bits = bits[(bits >> np.uint32(31)) == 0]  # unsigned: compare non-negative inputs only
    ours = run_tool(tool, "encode", name, bits, "rne", "ieee")
    ml = ml_encode(name, dt, width, bits)
    same = ours == ml
    both_nan = is_nan_code(name, dt, width, ours) & is_nan_code(name, dt, width, ml)
    bad = ~(same | both_nan)
    idx = np.nonzero(bad)[0]
    labels = classify(name, bits[idx], ours[idx], ml[idx])
    counts = {}
    for lab in labels:
        counts[lab] = counts.get(lab, 0) + 1
    documented = {k: v for k, v in counts.items() if k}
    unexplained = idx[labels == ""]
    print(f"  {name:6s} encode: {bits.size:9d} inputs, {int(same.sum()):9d} identical, "
          f"{int((both_nan & ~same).sum()):6d} both-NaN, documented differences: "
          + (", ".join(f"{k}: {v}" for k, v in sorted(documented.items())) or "none"))
    for i in unexplained[:12]:
        fail(f"{name} encode x=0x{int(bits[i]):08X} ({float(f32(bits[i:i+1])[0])!r}): "
             f"lofp 0x{int(ours[i]):X}, reference 0x{int(ml[i]):X}")
    if unexplained.size:
        fail(f"{name} encode: {unexplained.size} unexplained mismatches")
    return documented


def compare_decode(tool, name, dt, width):
    ncodes = 128 if name == "ue4m3" else (1 << width)
    codes = np.arange(ncodes, dtype=np.uint32)
    ours = f32(run_tool(tool, "decode", name, codes))
    if name == "mxint8":
        ref = (codes.astype(np.uint8).view(np.int8).astype(np.float64) / 64.0).astype(np.float32)
    else:
        ref = codes.astype(code_dtype(width)).view(dt).astype(np.float32)
    same = ours.view(np.uint32) == ref.view(np.uint32)
    both_nan = np.isnan(ours) & np.isnan(ref)
    bad = np.nonzero(~(same | both_nan))[0]
    print(f"  {name:6s} decode: {ncodes} codes, {bad.size} mismatches")
    for i in bad[:12]:
        fail(f"{name} decode 0x{int(codes[i]):X}: lofp {ours[i]!r} (0x{int(ours.view(np.uint32)[i]):08X}),"
             f" reference {ref[i]!r} (0x{int(ref.view(np.uint32)[i]):08X})")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    tool = sys.argv[1]
    print(f"ml_dtypes {md.__version__}, numpy {np.__version__}, tool {tool}")
    generic = np.arange(0, 1 << 32, 997, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                         0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000, 0x00000001,
                         0x80000001, 0x00400000, 0x00600000, 0x007FFFFF, 0x00800000,
                         0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32)
    sub = np.arange(0, 0x00800000, 97, dtype=np.uint32)  # fp32 subnormals (E8M0's interest)
    generic = np.unique(np.concatenate([generic, specials, sub, sub | np.uint32(0x80000000)]))
    totals = {}
    for name, dt, width in TYPES:
        doc = compare_encode(tool, name, dt, width, generic)
        for k, v in doc.items():
            totals[k] = totals.get(k, 0) + v
        compare_decode(tool, name, dt, width)
    print("documented differences in total: "
          + (", ".join(f"{k}: {v}" for k, v in sorted(totals.items())) or "none"))
    if failures:
        print(f"mldtypes_compare: {failures} failure(s)")
        return 1
    print("mldtypes_compare: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
