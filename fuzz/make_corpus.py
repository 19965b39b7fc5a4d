#!/usr/bin/env python3
"""Regenerates the seed corpus fuzz/corpus/{npy,safetensors}/ (deterministic). Needs the .venv
(numpy, ml_dtypes, safetensors):  .venv/bin/python fuzz/make_corpus.py
Files named crash-* / regress-* in the corpus are fuzzer findings kept as regressions; this script
leaves them alone."""
import io
import json
import os
import struct

import ml_dtypes
import numpy as np
from safetensors import serialize
from safetensors.numpy import save

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
# the version the library writes into lofp:NAME metadata: the repository's one version source
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "VERSION")) as _f:
    LOFP_VERSION = _f.read().strip()


def put(kind, name, data):
    os.makedirs(os.path.join(root, kind), exist_ok=True)
    with open(os.path.join(root, kind, name), "wb") as f:
        f.write(data)


def npy(arr, version=None, **kw):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, arr, version=version, **kw)
    else:
        np.save(b, arr, **kw)
    return b.getvalue()


def npy_raw(dict_text, data, major=1):
    pre = 10 if major == 1 else 12
    hl = len(dict_text) + 1
    pad = 64 - (pre + hl) % 64
    field = hl + pad
    head = b"\x93NUMPY" + bytes([major, 0]) + field.to_bytes(pre - 8, "little")
    return head + dict_text.encode() + b" " * pad + b"\n" + data


def st_raw(header, data, pad=b" "):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += pad * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


rng = np.random.default_rng(7)
f32 = rng.standard_normal((2, 3)).astype(np.float32)
put("npy", "f32_v1.npy", npy(f32))
put("npy", "f16_v2.npy", npy(f32.astype(np.float16), version=(2, 0)))
put("npy", "f64_v3.npy", npy(f32.astype(np.float64), version=(3, 0)))
put("npy", "i8.npy", npy(np.arange(-4, 4, dtype=np.int8)))
put("npy", "u8.npy", npy(np.arange(8, dtype=np.uint8).reshape(2, 2, 2)))
put("npy", "bool.npy", npy(np.array([True, False, True])))
put("npy", "u4.npy", npy(np.arange(6, dtype=np.uint32).reshape(3, 2)))
put("npy", "i64.npy", npy(np.arange(4, dtype=np.int64)))
put("npy", "c8.npy", npy(np.arange(2, dtype=np.complex64)))
put("npy", "scalar.npy", npy(np.float32(1.5)))
put("npy", "empty.npy", npy(np.zeros((0, 5), np.float32)))
put("npy", "fortran.npy", npy(np.asfortranarray(f32)))
put("npy", "object.npy", npy(np.array([1, None], dtype=object), allow_pickle=True))
put("npy", "bigendian.npy", npy(f32.astype(">f4")))
put("npy", "structured.npy", npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")])))
put("npy", "py2_long.npy", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 1L), }", bytes(8)))
put("npy", "double_quotes.npy", npy_raw('{"descr": "|u1", "fortran_order": False, "shape": (3,)}', b"abc"))
put("npy", "bad_overflow.npy", npy_raw("{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", bytes(8)))
put("npy", "bad_truncated.npy", npy(f32)[:-3])
put("npy", "bad_hlen.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'")

tensors = {"a": f32, "b": np.arange(5, dtype=np.int8), "c": np.array([True, False]),
           "d": np.arange(3, dtype=np.uint32), "e": np.zeros((0, 2), np.float16), "s": np.array(2.0)}
put("safetensors", "numpy.safetensors", save(tensors, metadata={"scheme": "nvfp4", "k": "v"}))
codes = np.arange(16, dtype=np.uint8).reshape(2, 8)
ser = {
    "w.bf16": {"dtype": "bfloat16", "shape": [2, 3], "data": f32.astype(ml_dtypes.bfloat16).tobytes()},
    "w.e4m3": {"dtype": "float8_e4m3fn", "shape": [2, 3], "data": f32.astype(ml_dtypes.float8_e4m3fn).tobytes()},
    "w.e5m2": {"dtype": "float8_e5m2", "shape": [6], "data": f32.astype(ml_dtypes.float8_e5m2).tobytes()},
    "w.scales": {"dtype": "float8_e8m0fnu", "shape": [2, 1], "data": bytes([127, 130])},
    "w.codes": {"dtype": "float4_e2m1fn_x2", "shape": [2, 4], "data": ((codes[:, 0::2]) | (codes[:, 1::2] << 4)).astype(np.uint8).tobytes()},
}
put("safetensors", "ml_dtypes.safetensors", bytes(serialize(ser, metadata={"scheme": "mxfp4"})))
put("safetensors", "empty.safetensors", st_raw({}, b""))
put("safetensors", "meta_only.safetensors", st_raw({"__metadata__": {"a": "b\n\"c\" \u00e9"}}, b""))
h = json.dumps({"b": {"dtype": "I8", "shape": [3], "data_offsets": [8, 11]},
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, indent=1).encode()
h += b"\n" * (-len(h) % 8)
put("safetensors", "pretty_unordered.safetensors", struct.pack("<Q", len(h)) + h + bytes(11))
put("safetensors", "escapes.safetensors", struct.pack("<Q", 80) + (
    b'{"\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}').ljust(80) + b"x")
put("safetensors", "f6.safetensors", st_raw({"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]},
                                             "b": {"dtype": "F8_E4M3FNUZ", "shape": [1], "data_offsets": [3, 4]},
                                             "c": {"dtype": "C64", "shape": [1], "data_offsets": [8, 16]},
                                             "d": {"dtype": "U32", "shape": [1], "data_offsets": [4, 8]}}, bytes(16)))
good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
put("safetensors", "bad_overlap.safetensors", st_raw({**good, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
put("safetensors", "bad_gap.safetensors", st_raw({**good, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}, bytes(20)))
put("safetensors", "bad_overflow.safetensors", st_raw({"a": {"dtype": "U8", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, bytes(8)))
put("safetensors", "bad_f4_odd.safetensors", st_raw({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, bytes(1)))
put("safetensors", "bad_length.safetensors", struct.pack("<Q", 1 << 62) + b"{}      ")
put("safetensors", "bad_nul_pad.safetensors", st_raw({}, b"", pad=b"\0"))
put("safetensors", "bad_dup.safetensors", struct.pack("<Q", 8 * 14) + (
    b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}').ljust(8 * 14) + b"x")

# ---- lofp: metadata interpreter (fuzz/fuzz_qtmeta.c): byte 0 = mode, then the metadata value ----
def meta(scheme="mxfp4", rounding="rne", scale_rule="floor", block=32, layout="linear", pad_byte=0,
         shape="[4,64]", padded_k=64, two_level=0, c="0.156000003", rotate=0, hadamard="butterfly",
         seed=0, source_dtype="F32", **extra):
    f = dict(scheme=scheme, rounding=rounding, scale_rule=scale_rule, block=block, layout=layout,
             pad_byte=pad_byte, shape=shape, padded_k=padded_k, two_level=two_level, c=c, rotate=rotate,
             hadamard=hadamard, seed=seed, source_dtype=source_dtype, lofp_version=LOFP_VERSION)
    f.update(extra)
    return ";".join(f"{k}={v}" for k, v in f.items()).encode()


qm = {
    "mxfp4": meta(),
    "nvfp4": meta("nvfp4", scale_rule="ue4m3", block=16, two_level=1),
    "mxfp8": meta("mxfp8-e4m3"),
    "ultraquant": meta("ultraquant", scale_rule="uq-round", rotate=1),
    "swizzle": meta("nvfp4", scale_rule="ue4m3", block=16, layout="swizzle-128x4", shape="[3,5,48]", padded_k=48),
    "packed": meta("mxfp6-e2m3", layout="packed-u32", pad_byte=127, shape="[7,96]", padded_k=96),
    "deepgemm": meta("mxfp8-e5m2", layout="packed-u32:deepgemm", scale_rule="rceil", shape="[5,160]", padded_k=160, block=32),
    "padded": meta("mxint8", shape="[2,40]", padded_k=64),
    "stochastic": meta("mxfp4", rounding="stochastic", seed=18446744073709551615),
    "bf16": meta("tilelang-mxfp8", scale_rule="rceil", source_dtype="BF16", shape="[1,1,1,1,1,1,1,1,2,32]", padded_k=32),
}
for i, (name, v) in enumerate(qm.items()):
    put("qtmeta", f"{name}", bytes([4 + i % 4]) + v)
    put("qtmeta", f"{name}_fixed", bytes([i % 4]) + v)
# malformed metadata (an out-of-range rotate, an unknown hadamard, a non-integer two_level, shapes that
# are unclosed, empty or overflow, a huge block, a wrapping padded_k, a duplicate key, nothing), kept as
# regressions: each must be refused cleanly
put("qtmeta", "regress-rotate7", b"\x04" + meta("ultraquant", scale_rule="uq-round", rotate=7))
put("qtmeta", "regress-hadamard-fft", b"\x04" + meta("ultraquant", scale_rule="uq-round", rotate=1, hadamard="fft"))
put("qtmeta", "regress-two-level-yes", b"\x04" + meta("nvfp4", scale_rule="ue4m3", block=16, two_level="yes"))
put("qtmeta", "regress-shape-unclosed", b"\x04" + meta(shape="[4,64"))
put("qtmeta", "regress-shape-overflow", b"\x04" + meta(shape="[4294967296,4294967296,0,64]"))
put("qtmeta", "regress-shape-overflow-wrap", b"\x04" + meta(shape="[4611686018427387904,4,64]"))
put("qtmeta", "regress-shape-zero", b"\x04" + meta(shape="[0,64]"))
put("qtmeta", "regress-block-huge", b"\x04" + meta(block=4294967328, padded_k=4294967328))
put("qtmeta", "regress-padded-k-wrap", b"\x04" + meta(shape="[2,18446744073709551615]", padded_k=18446744073709551615))
put("qtmeta", "regress-dup-key", b"\x00" + meta() + b";block=64")
put("qtmeta", "regress-empty", b"\x04")
print("corpus written to", root)
