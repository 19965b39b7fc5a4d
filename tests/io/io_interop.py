#!/usr/bin/env python3
"""Interop between lofp's file layer and numpy / safetensors / ml_dtypes (tests/io/script_io_interop.sh).

  io_interop.py check-lofp DIR   check the files test_io wrote (LOFP_IO_INTEROP_WRITE=DIR): they load
                                 in safetensors and numpy with identical bytes, shapes and dtypes, and
                                 are byte-identical to what safetensors.serialize / numpy.save write
                                 for the same tensors.
  io_interop.py write-py DIR     write files with numpy, safetensors and ml_dtypes (BF16, F8_E4M3,
                                 F8_E5M2, F8_E8M0, F4 packed two per byte) plus malformed files both
                                 safetensors and lofp must reject; DIR/manifest.txt tells test_io
                                 (LOFP_IO_INTEROP_READ=DIR) what to expect, values as float64.
"""
import io
import json
import os
import struct
import sys

import ml_dtypes
import numpy as np
import safetensors
from safetensors import deserialize, safe_open, serialize
from safetensors.numpy import load_file, save_file

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "U16": 16, "I16": 16, "U32": 32, "I32": 32, "U64": 64,
        "I64": 64, "F16": 16, "BF16": 16, "F32": 32, "F64": 64, "F8_E4M3": 8, "F8_E5M2": 8,
        "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "C64": 64}
NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
         "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
         "F16": np.float16, "F32": np.float32, "F64": np.float64, "C64": np.complex64}
# the dtype names safetensors.serialize() takes (torch spellings)
SER = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
       "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16",
       "BF16": "bfloat16", "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn",
       "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}

# status codes of lofp.h
UNSUPPORTED, FORMAT = 5, 9

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg, file=sys.stderr)


def pattern(seed, n, dt):
    j = np.arange(n, dtype=np.uint64)
    if dt == "BOOL":
        return ((j + seed) & 1).astype(np.uint8).tobytes()
    return ((j * 29 + seed * 71 + 5) & 0xFF).astype(np.uint8).tobytes()


def nbytes(dt, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dt] // 8


def check_lofp(d):
    entries = {}
    with open(os.path.join(d, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            file, name, dt, seed, ndim = parts[0], parts[1], parts[2], int(parts[3]), int(parts[4])
            shape = [int(x) for x in parts[5:5 + ndim]]
            entries.setdefault(file, []).append((name, dt, seed, shape))
    n_checked = 0
    for file, items in sorted(entries.items()):
        path = os.path.join(d, file)
        raw = open(path, "rb").read()
        if file.endswith(".npy"):
            (name, dt, seed, shape), = items
            arr = np.load(path, allow_pickle=False)
            if arr.dtype != np.dtype(NUMPY[dt]):
                fail(f"{file}: numpy dtype {arr.dtype}, want {np.dtype(NUMPY[dt])}")
            if list(arr.shape) != shape:
                fail(f"{file}: shape {arr.shape}, want {shape}")
            if arr.tobytes() != pattern(seed, nbytes(dt, shape), dt):
                fail(f"{file}: data differ")
            b = io.BytesIO()
            np.save(b, arr)
            if b.getvalue() != raw:
                fail(f"{file}: not byte-identical to numpy.save")
            n_checked += 1
            continue
        # safetensors' own parser and validation
        got = {name: info for name, info in deserialize(raw)}
        if set(got) != {i[0] for i in items}:
            fail(f"{file}: names {sorted(got)} != {sorted(i[0] for i in items)}")
        for name, dt, seed, shape in items:
            info = got.get(name)
            if info is None:
                continue
            if info["dtype"] != dt:
                fail(f"{file}/{name}: dtype {info['dtype']}, want {dt}")
            if list(info["shape"]) != shape:
                fail(f"{file}/{name}: shape {info['shape']}, want {shape} (F4 shapes are logical)")
            if bytes(info["data"]) != pattern(seed, nbytes(dt, shape), dt):
                fail(f"{file}/{name}: data differ")
            n_checked += 1
        with safe_open(path, framework="np") as sf:
            meta = sf.metadata() or {}
        want_meta = {"lofp_all.safetensors": {"scheme": "nvfp4", "note": 'a "b" \\c\nd \u00e9'},
                     "lofp_ident.safetensors": {"format": "pt"}}.get(file, {})
        if meta != want_meta:
            fail(f"{file}: metadata {meta!r}, want {want_meta!r}")
        if file == "lofp_np.safetensors":
            arrs = load_file(path)
            for name, dt, seed, shape in items:
                a = arrs[name]
                if a.dtype != np.dtype(NUMPY[dt]) or list(a.shape) != shape or \
                        a.tobytes() != pattern(seed, nbytes(dt, shape), dt):
                    fail(f"{file}/{name}: safetensors.numpy.load_file gives {a.dtype} {a.shape}")
        if file == "lofp_ident.safetensors":
            tensors = {}
            for name, dt, seed, shape in items:
                storage = list(shape)
                if dt == "F4":
                    storage[-1] //= 2     # float4_e2m1fn_x2 storage; the header gets the logical shape
                tensors[name] = {"dtype": SER[dt], "shape": storage,
                                 "data": pattern(seed, nbytes(dt, shape), dt)}
            ref = bytes(serialize(tensors, metadata=want_meta))
            if ref != raw:
                n = struct.unpack("<Q", raw[:8])[0]
                fail(f"{file}: not byte-identical to safetensors.serialize\n lofp: {raw[8:8 + n]!r}\n"
                     f" safetensors: {ref[8:8 + struct.unpack('<Q', ref[:8])[0]]!r}")
    print(f"check-lofp: {n_checked} tensors in {len(entries)} files checked "
          f"(safetensors {safetensors.__version__}, numpy {np.__version__})")


class Writer:
    def __init__(self, d):
        self.d = d
        self.lines = []

    def expect(self, file, name, dt, values):
        values = np.asarray(values)
        self.lines.append(f"OK {file} {name} {dt} {values.ndim} " + " ".join(map(str, values.shape)))
        with open(os.path.join(self.d, f"{file}.{name}.f64"), "wb") as f:
            f.write(values.astype(np.float64).tobytes())

    def error(self, file, status):
        self.lines.append(f"ERR {file} {status}")

    def meta(self, file, key, value):
        self.lines.append(f"META {file} {key} {value}")

    def path(self, file):
        return os.path.join(self.d, file)

    def finish(self):
        with open(os.path.join(self.d, "manifest.txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def st_raw(header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write_py(d):
    w = Writer(d)
    rng = np.random.default_rng(1234)

    # ---- .npy written by numpy
    f32 = rng.standard_normal((5, 7)).astype(np.float32)
    f32[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    arrays = {
        "np_f32.npy": f32,
        "np_f16.npy": np.concatenate([rng.standard_normal(20) * 100, [6e-8, -6e-8, 65504, np.inf]]).astype(np.float16),
        "np_f64.npy": rng.standard_normal((3, 2, 2)),
        "np_i8.npy": np.arange(-128, 128, dtype=np.int8).reshape(16, 16),
        "np_u8.npy": np.arange(256, dtype=np.uint8),
        "np_bool.npy": rng.random((4, 5)) < 0.5,
        "np_u4.npy": rng.integers(0, 2**32, (6, 3), dtype=np.uint32),
        "np_scalar.npy": np.float32(2.5),
        "np_empty.npy": np.zeros((0, 3), np.float32),
        "np_3d.npy": rng.integers(-100, 100, (2, 3, 4)).astype(np.int8),
    }
    dts = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int8: "I8", np.uint8: "U8",
           np.bool_: "BOOL", np.uint32: "U32"}
    for file, a in arrays.items():
        np.save(w.path(file), a)
        w.expect(file, "-", dts[a.dtype.type], a)
    for ver in [(2, 0), (3, 0)]:
        file = f"np_v{ver[0]}.npy"
        with open(w.path(file), "wb") as fp:
            np.lib.format.write_array(fp, f32, version=ver)
        w.expect(file, "-", "F32", f32)
    # well-formed .npy files lofp does not read
    np.save(w.path("np_fortran.npy"), np.asfortranarray(rng.standard_normal((3, 4)).astype(np.float32)))
    w.error("np_fortran.npy", UNSUPPORTED)
    np.save(w.path("np_object.npy"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    w.error("np_object.npy", UNSUPPORTED)
    np.save(w.path("np_bigendian.npy"), f32.astype(">f4"))
    w.error("np_bigendian.npy", UNSUPPORTED)
    np.save(w.path("np_structured.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    w.error("np_structured.npy", UNSUPPORTED)
    np.save(w.path("np_c16.npy"), np.zeros(3, dtype=np.complex128))
    w.error("np_c16.npy", UNSUPPORTED)

    # ---- safetensors.numpy
    tensors = {
        "f32": f32, "f16": arrays["np_f16.npy"], "f64": arrays["np_f64.npy"], "i8": arrays["np_i8.npy"],
        "u8": arrays["np_u8.npy"], "bool": arrays["np_bool.npy"], "u32": arrays["np_u4.npy"],
        "i32": rng.integers(-2**31, 2**31, (3, 3), dtype=np.int32),
        "i64": rng.integers(-2**40, 2**40, (4,), dtype=np.int64),
        "u16": rng.integers(0, 2**16, (2, 5), dtype=np.uint16),
        "i16": rng.integers(-2**15, 2**15, (5,), dtype=np.int16),
        "empty": np.zeros((0, 4), np.float32), "scalar": np.array(3.0, np.float32),
    }
    names = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int8: "I8", np.uint8: "U8",
             np.bool_: "BOOL", np.uint32: "U32", np.int32: "I32", np.int64: "I64", np.uint16: "U16",
             np.int16: "I16"}
    save_file(tensors, w.path("st_numpy.safetensors"), metadata={"framework": "numpy", "k": "v"})
    for name, a in tensors.items():
        w.expect("st_numpy.safetensors", name, names[a.dtype.type], a)
    w.meta("st_numpy.safetensors", "framework", "numpy")
    w.meta("st_numpy.safetensors", "k", "v")

    # ---- ml_dtypes through safetensors.serialize: BF16, FP8, E8M0 and packed F4
    bf = np.concatenate([rng.standard_normal(24) * 100,
                         [np.inf, -np.inf, np.nan, -0.0, 1e-40, 3e38]]).astype(ml_dtypes.bfloat16).reshape(5, 6)
    e4 = np.concatenate([rng.standard_normal(28) * 50, [448, -448, np.nan, 2**-9]]).astype(ml_dtypes.float8_e4m3fn).reshape(4, 8)
    e5 = np.concatenate([rng.standard_normal(12) * 1000, [57344, np.inf, -np.inf, 2**-16]]).astype(ml_dtypes.float8_e5m2)
    e8 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).reshape(8, 32)
    codes = np.tile(np.arange(16, dtype=np.uint8), 8).reshape(4, 32)
    rng.shuffle(codes, axis=1)
    fp4 = codes.view(ml_dtypes.float4_e2m1fn)
    packed = (codes[:, 0::2] & 0xF) | (codes[:, 1::2] << 4)
    ser = {
        "w.bf16": {"dtype": "bfloat16", "shape": list(bf.shape), "data": bf.tobytes()},
        "w.e4m3": {"dtype": "float8_e4m3fn", "shape": list(e4.shape), "data": e4.tobytes()},
        "w.e5m2": {"dtype": "float8_e5m2", "shape": list(e5.shape), "data": e5.tobytes()},
        "w.scales": {"dtype": "float8_e8m0fnu", "shape": list(e8.shape), "data": e8.tobytes()},
        # torch's float4_e2m1fn_x2 storage shape [4, 16]; safetensors records the logical [4, 32]
        "w.codes": {"dtype": "float4_e2m1fn_x2", "shape": list(packed.shape), "data": packed.tobytes()},
    }
    blob = bytes(serialize(ser, metadata={"scheme": "mxfp4"}))
    open(w.path("st_ml.safetensors"), "wb").write(blob)
    hdr = json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]])
    if hdr["w.codes"]["dtype"] != "F4" or hdr["w.codes"]["shape"] != [4, 32]:
        fail(f"safetensors wrote F4 as {hdr['w.codes']}, expected the logical shape [4, 32]")
    for name, dt, vals in [("w.bf16", "BF16", bf), ("w.e4m3", "F8_E4M3", e4), ("w.e5m2", "F8_E5M2", e5),
                           ("w.scales", "F8_E8M0", e8), ("w.codes", "F4", fp4)]:
        w.expect("st_ml.safetensors", name, dt, vals.astype(np.float64))
    w.meta("st_ml.safetensors", "scheme", "mxfp4")

    # ---- hand-made but valid: pretty-printed JSON, tensors listed out of offset order
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.int8)
    header = {"b": {"dtype": "I8", "shape": [3], "data_offsets": [24, 27]},
              "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    h = json.dumps(header, indent=2).encode()
    h += b"\n" * (-len(h) % 8)
    raw = struct.pack("<Q", len(h)) + h + a.tobytes() + b.tobytes()
    deserialize(raw)          # safetensors accepts it
    open(w.path("st_handmade.safetensors"), "wb").write(raw)
    w.expect("st_handmade.safetensors", "a", "F32", a)
    w.expect("st_handmade.safetensors", "b", "I8", b)

    # ---- malformed files: safetensors must reject each one, and so must lofp
    good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    bad = {
        "bad_overlap.safetensors": st_raw({**good, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
        "bad_gap.safetensors": st_raw({**good, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}, bytes(20)),
        "bad_trailing.safetensors": st_raw(good, bytes(12)),
        "bad_size.safetensors": st_raw({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)),
        "bad_range.safetensors": st_raw({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
        "bad_dtype.safetensors": st_raw({"a": {"dtype": "F3", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)),
        "bad_overflow.safetensors": st_raw({"a": {"dtype": "U8", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, bytes(8)),
        "bad_negative.safetensors": st_raw({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8)),
        "bad_f4_odd.safetensors": st_raw({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, bytes(1)),
        "bad_json.safetensors": struct.pack("<Q", 8) + b'{"a":1,}',
        "bad_length.safetensors": struct.pack("<Q", 4096) + b"{}      ",
        "bad_meta.safetensors": st_raw({"__metadata__": {"k": 1}}, b""),
    }
    for file, raw in bad.items():
        try:
            deserialize(raw)
            fail(f"{file}: safetensors {safetensors.__version__} accepts it")
        except Exception:
            pass
        open(w.path(file), "wb").write(raw)
        w.error(file, FORMAT)
    w.finish()
    print(f"write-py: {len(w.lines)} manifest lines")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check-lofp", "write-py"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "check-lofp":
        check_lofp(sys.argv[2])
    else:
        write_py(sys.argv[2])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
