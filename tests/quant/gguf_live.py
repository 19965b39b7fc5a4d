"""gguf-py (gguf.quants MXFP4) against `lofp quantize --scheme mxfp4 --profile ggml`."""
import json
import struct
import subprocess
import sys

import numpy as np
import gguf

lofp, tmp = sys.argv[1], sys.argv[2]
rng = np.random.default_rng()
seed = int(rng.integers(0, 2 ** 31))
rng = np.random.default_rng(seed)


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.uint8)
    return out


def inputs():
    rows, k = 64, 256
    yield "normal", (rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-40, 40, (rows, 1))).astype(np.float32)
    t = rng.integers(-12, 13, (rows, k)).astype(np.float32) / 2 * 2.0 ** rng.integers(-10, 10, (rows, 1)).astype(np.float32)
    yield "ties", t
    p = np.zeros((rows, k), np.float32)
    for e in range(rows):
        base = np.float32(2.0 ** rng.integers(-126, 127))
        p[e] = base * rng.random(k).astype(np.float32)
        p[e, ::32] = np.nextafter(base, np.float32(0)) if e % 2 else np.nextafter(base, np.float32(np.inf))
    yield "pow2", p
    tn = (rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-149, -120, (rows, 1))).astype(np.float32)
    yield "tiny", tn
    bits = rng.integers(0, 2 ** 32, (rows, k), dtype=np.uint64).astype(np.uint32)
    bits = np.where((bits & 0x7F800000) == 0x7F800000, bits & 0xBFFFFFFF, bits)
    yield "randbits", bits.view(np.float32)
    nf = rng.standard_normal((rows, k)).astype(np.float32)
    nf[rng.integers(0, rows, 20), rng.integers(0, k, 20)] = np.inf
    nf[rng.integers(0, rows, 20), rng.integers(0, k, 20)] = -np.inf
    nf[rng.integers(0, rows, 20), rng.integers(0, k, 20)] = np.nan
    yield "nonfinite", nf


total = bad = 0
for name, x in inputs():
    np.save(f"{tmp}/{name}.npy", x)
    subprocess.run([lofp, "quantize", "--scheme", "mxfp4", "--profile", "ggml", "--propagate-nonfinite",
                    f"{tmp}/{name}.npy", f"{tmp}/{name}.safetensors"], check=True, capture_output=True)
    t = read_st(f"{tmp}/{name}.safetensors")
    codes, scales = t[f"{name}.codes"], t[f"{name}.scales"]
    with np.errstate(all="ignore"):
        q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.MXFP4).reshape(-1, 17)
    e, qs = q[:, 0], q[:, 1:]
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
    std = (vals[:, 0::2] | (vals[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    dc = int(np.count_nonzero(std != codes))
    ds = int(np.count_nonzero(e != scales))
    total += 1
    if dc or ds:
        bad += 1
        i = int(np.argmax(e != scales)) if ds else int(np.argmax(std != codes)) // 16
        print(f"FAIL {name} (seed {seed}): {dc} code bytes and {ds} scale bytes differ; block {i}: "
              f"input {x.reshape(-1, 32)[i][:4]}..., gguf e={e[i]}, lofp e={scales[i]}")
    else:
        print(f"ok   {name}: {x.size} values, {e.size} blocks identical to gguf-py {gguf.__name__}")
print(f"{total - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
