#!/usr/bin/env python3
"""Regenerates the seed corpus of the checkpoint-level GGUF fuzzer, fuzz/corpus/gguf_ckpt/
(deterministic; written with gguf-py's GGUFWriter, the hostile ones byte by byte). Needs the .venv:
    .venv/bin/python fuzz/make_corpus_gguf.py
Files named crash-* / regress-* are fuzzer findings kept as regressions, cov-* the fuzzer's
coverage corpus after `-merge=1` (57 minutes of scripts/fuzz.sh gguf_ckpt); this script leaves them
alone."""
import os
import struct
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf_ckpt")
BLOCK = {T.MXFP4: (32, 17), T.NVFP4: (64, 36), T.Q8_0: (32, 34), T.Q4_0: (32, 18), T.Q4_1: (32, 20),
         T.Q5_0: (32, 22), T.Q5_1: (32, 24)}


def write(name, tensors, kvs=(), alignment=None):
    """tensors: (name, ggml shape ne, type, bytes or float array)."""
    rng = np.random.default_rng(len(name))
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.gguf")
        w = gguf.GGUFWriter(p, "llama")
        if alignment:
            w.add_custom_alignment(alignment)
        for k, v in kvs:
            w.add_uint32(k, v)
        for tn, ne, ty, data in tensors:
            if ty in BLOCK:
                blk, bb = BLOCK[ty]
                rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
                raw = rng.integers(0, 256, size=(rows, ne[0] // blk * bb), dtype=np.uint8) if data is None else data
                if ty == T.MXFP4:
                    raw[:, ::bb] = rng.integers(118, 130, size=raw[:, ::bb].shape)  # plausible E8M0 scales
                w.add_tensor(tn, raw.reshape(*reversed(ne[1:]), -1) if len(ne) > 1 else raw.reshape(-1), raw_shape=None, raw_dtype=ty)
            else:
                arr = (rng.standard_normal(tuple(reversed(ne))) * 0.1).astype(
                    {T.F32: np.float32, T.F16: np.float16, T.F64: np.float64}.get(ty, np.float32)) if data is None else data
                if ty == T.BF16:
                    arr = (arr.view(np.uint32) >> 16).astype(np.uint16)
                    w.add_tensor(tn, arr, raw_shape=arr.shape, raw_dtype=T.BF16)
                else:
                    w.add_tensor(tn, arr)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = open(p, "rb").read()
    os.makedirs(root, exist_ok=True)
    open(os.path.join(root, name), "wb").write(data)


def main():
    write("seed-mxfp4", [("blk.0.ffn_up.weight", [64, 2], T.MXFP4, None), ("blk.0.attn_norm.weight", [64], T.F32, None)])
    write("seed-mxfp4-3d", [("blk.0.ffn_up_exps.weight", [32, 2, 2], T.MXFP4, None)])
    write("seed-nvfp4-scale", [("blk.0.attn_q.weight", [64, 2], T.NVFP4, None),
                               ("blk.0.attn_q.scale", [1], T.F32, np.array([0.01], np.float32))])
    write("seed-nvfp4-noscale", [("blk.0.attn_k.weight", [128, 1], T.NVFP4, None)])
    write("seed-nvfp4-badscale", [("blk.0.attn_v.weight", [64, 1], T.NVFP4, None),
                                  ("blk.0.attn_v.scale", [2], T.F32, np.array([1.0, 2.0], np.float32))])
    write("seed-dense-types", [("a.weight", [32, 2], T.Q8_0, None), ("b.weight", [32, 1], T.Q4_1, None),
                               ("c.weight", [32, 1], T.Q4_0, None), ("d.weight", [32, 1], T.Q5_0, None),
                               ("e.weight", [32, 1], T.Q5_1, None), ("f.weight", [8, 2], T.F16, None),
                               ("g.weight", [8], T.BF16, None), ("h.weight", [4], T.F64, None)])
    write("seed-align64", [("w.weight", [32, 1], T.MXFP4, None), ("n.weight", [3], T.F32, None)],
          kvs=[("llama.block_count", 1)], alignment=64)
    # ne[0] = 0 of a block type (was a SIGFPE in lofp_ckpt_get): built byte by byte
    h = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 19) + b"blk.0.ffn_up.weight"
    h += struct.pack("<IQQIQ", 2, 0, 4, 39, 0)
    h += b"\0" * ((-len(h)) % 32)
    open(os.path.join(root, "regress-ne0-mxfp4"), "wb").write(h)
    open(os.path.join(root, "regress-ne0-nvfp4"), "wb").write(h.replace(struct.pack("<IQ", 39, 0), struct.pack("<IQ", 40, 0)))


if __name__ == "__main__":
    main()
