#!/usr/bin/env python3
"""Regenerates the seed corpus of the calibration-file fuzzer, fuzz/corpus/calib/ (deterministic):
lofp calibration files written with the safetensors package, llama.cpp importance matrices written
with gguf-py's GGUFWriter in llama-imatrix's layout, and hostile variants of both (NaN, negative
and zero counts, a k x k of another width, MoE experts). Needs the .venv:
    .venv/bin/python fuzz/make_corpus_calib.py
Files named crash-* / regress-* are fuzzer findings kept as regressions; this script leaves them
alone."""
import os
import tempfile

import numpy as np
import gguf
from safetensors.numpy import save as st_save

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "calib")


def lofp_file(name, stat, tensors, **meta):
    m = {"format": "lofp-calibration", "version": "1", "statistic": stat, "model": "seed", "samples": "1",
         "tokens": "8"}
    m.update(meta)
    with open(os.path.join(root, name), "wb") as f:
        f.write(st_save(tensors, metadata=m))


def imatrix(name, entries, gtype="imatrix"):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.gguf")
        w = gguf.GGUFWriter(p, "llama")
        w.add_type(gtype)
        w.add_array("imatrix.datasets", ["seed.txt"])
        w.add_uint32("imatrix.chunk_count", 1)
        w.add_uint32("imatrix.chunk_size", 8)
        for n, (s2, c) in entries.items():
            w.add_tensor(n + ".in_sum2", np.asarray(s2, np.float32))
            w.add_tensor(n + ".counts", np.asarray(c, np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(p, "rb") as f:
            data = f.read()
    with open(os.path.join(root, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 4))
    h = (x.T @ x).astype(np.float32)
    t8 = np.array([8], np.int64)
    lofp_file("seed-hessian", "hessian", {"a.weight.xtx": h, "a.weight.tokens": t8,
                                          "b.weight.xtx": np.eye(2, dtype=np.float32), "b.weight.tokens": t8})
    lofp_file("seed-diag", "diag", {"a.weight.x2": np.diag(h).copy(), "a.weight.tokens": t8})
    bad = h.copy()
    bad[1, 2] = np.nan
    lofp_file("seed-hessian-nan", "hessian", {"a.weight.xtx": bad, "a.weight.tokens": t8})
    lofp_file("seed-tokens-zero", "diag", {"a.weight.x2": np.ones(4, np.float32), "a.weight.tokens": np.zeros(1, np.int64)})
    lofp_file("seed-negative", "diag", {"a.weight.x2": -np.ones(4, np.float32), "a.weight.tokens": t8})
    lofp_file("seed-version-2", "diag", {"a.weight.x2": np.ones(4, np.float32), "a.weight.tokens": t8}, version="2")
    lofp_file("seed-orphan", "hessian", {"a.weight.xtx": h})
    s = (rng.random((1, 8)) * 10).astype(np.float32)
    imatrix("seed-imatrix", {"blk.0.attn_q.weight": (s, [[16.0]]), "blk.0.ffn_down.weight": (s[0, :4], [4.0])})
    imatrix("seed-imatrix-moe", {"blk.0.ffn_up_exps.weight": (np.ones((2, 4), np.float32), [[3.0], [5.0]])})
    imatrix("seed-imatrix-count0", {"a.weight": (s, [[0.0]])})
    imatrix("seed-imatrix-model", {"a.weight": (s, [[1.0]])}, gtype="model")


if __name__ == "__main__":
    main()
