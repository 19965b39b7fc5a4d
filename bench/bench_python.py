#!/usr/bin/env python3
"""Binding benchmark of the Python package (BENCHMARKS.md "Python binding").

1. Per-call overhead on a tiny tensor: a no-op extension call, the raw extension quantize call
   (lofp._lofp.quantize, preallocated outputs), and the public lofp.quantize / lofp.dequantize
   (allocation and QTensor included); numpy and, when installed, torch CPU tensors.
2. Large-tensor throughput: lofp.quantize on a [4096, 4096] float32 tensor against the C library
   running the same call (the lofp command's `bench quant`, reported separately) is not
   comparable line by line, so the C side is timed here through the same extension call with
   the Python layer removed: raw call vs public call, same thread count. Dequantize is also
   timed as the C call into a fresh output each time (np.empty inside the timed call), the fair
   comparison for the allocating lofp.dequantize: a fresh output is page-faulted in by whoever
   writes it first, and the C call with a reused buffer never pays that.

    PYTHONPATH=<pkg dir> python bench/bench_python.py [--threads N] [--quick] [--no-hugepage]
                                                        [--only overhead|large]

--no-hugepage turns off numpy's madvise(MADV_HUGEPAGE) of large allocations (on by default where
the kernel has transparent huge pages in "madvise" mode) to show what it is worth. glibc serves
allocations above 32 MiB with a fresh mmap each time (zero-filled pages, faulted in by the first
write); MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=4294967296 in the environment makes it keep and
reuse them instead (BENCHMARKS.md "Python binding").
"""
import argparse
import importlib
import os
import time

import numpy as np

import lofp
from lofp import _lofp


def per_call(fn, n):
    for _ in range(min(n // 10, 2000)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best / 1000.0  # us


def throughput(fn, nbytes, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9, best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-hugepage", action="store_true")
    ap.add_argument("--only", choices=("overhead", "large"))
    a = ap.parse_args()
    try:
        from numpy._core import multiarray as _ma
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray as _ma
    if a.no_hugepage:
        _ma._set_madvise_hugepage(False)
    try:
        thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    except OSError:
        thp = "unknown"
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    malloc = " ".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("MALLOC_")) or "glibc defaults"
    print(f"transparent huge pages: {thp}; numpy madvise(MADV_HUGEPAGE): {_ma._get_madvise_hugepage()}; "
          f"malloc: {malloc}; load average {load}")
    n = 20000 if a.quick else 100000
    x = np.ones((1, 32), np.float32)
    sch = lofp.scheme("mxfp4")
    codes = np.empty((1, 16), np.uint8)
    scales = np.empty((1, 1), np.uint8)
    q = lofp.quantize(x, "mxfp4")
    out = np.empty((1, 32), np.float32)
    if a.only != "large":
        overhead(n, x, sch, codes, scales, q, out)
    if a.only != "overhead":
        large(a)


def overhead(n, x, sch, codes, scales, q, out):
    print(f"lofp {lofp.__version__}, numpy {np.__version__}; tiny tensor [1, 32] mxfp4; best of 5 x {n} calls")
    rows = [
        ("no-op extension call  _lofp.noop()", lambda: _lofp.noop()),
        ("raw quantize call     _lofp.quantize(...)", lambda: _lofp.quantize(sch.blob, 1, x, 1, 32, codes, scales, None, 1)),
        ("public lofp.quantize(x, 'mxfp4')", lambda: lofp.quantize(x, "mxfp4")),
        ("public lofp.quantize(x, 'mxfp4', out=(codes, scales))", lambda: lofp.quantize(x, "mxfp4", out=(codes, scales))),
        ("public lofp.dequantize(q, 'float32')", lambda: lofp.dequantize(q, "float32")),
        ("public lofp.dequantize(q, out=out)", lambda: lofp.dequantize(q, out=out)),
    ]
    base = None
    for name, fn in rows:
        us = per_call(fn, n)
        base = us if base is None else base
        print(f"  {name:<58s} {us:7.2f} us   (+{us - base:5.2f} over no-op)")
    try:
        import torch
        t = torch.ones((1, 32))
        tc = torch.empty((1, 16), dtype=torch.uint8)
        ts = torch.empty((1, 1), dtype=torch.uint8)
        print(f"torch {torch.__version__} CPU tensors:")
        for name, fn in [
            ("raw quantize call (DLPack)", lambda: _lofp.quantize(sch.blob, 1, t, 1, 32, tc, ts, None, 1)),
            ("public lofp.quantize(t, 'mxfp4')", lambda: lofp.quantize(t, "mxfp4")),
            ("torch.ops.lofp.quantize(t, 'mxfp4')", None),
        ]:
            if fn is None:
                importlib.import_module("lofp.torch")
                fn = lambda: torch.ops.lofp.quantize(t, "mxfp4", "linear")  # noqa: E731
            us = per_call(fn, n // 5)
            print(f"  {name:<58s} {us:7.2f} us   (+{us - base:5.2f} over no-op)")
    except ImportError:
        print("torch not installed: torch rows skipped")


def large(a):
    reps = 5 if a.quick else 15
    for rows_, k_ in ((512, 4096), (4096, 4096)):
        big = np.random.default_rng(0).standard_normal((rows_, k_)).astype(np.float32)
        print(f"large tensor [{rows_}, {k_}] float32 ({big.nbytes >> 20} MiB), threads={a.threads}, best of {reps}; "
              f"GB/s of fp32 data; ratio = public / C call")
        for s in ("nvfp4", "mxfp4", "mxfp8-e4m3", "ultraquant"):
            sc = lofp.scheme(s)
            cb = np.empty((rows_, k_ // sc.codes_per_byte), np.uint8)
            sb = np.empty((rows_, k_ // sc.block), np.uint8)
            raw = throughput(lambda: _lofp.quantize(sc.blob, 1, big, rows_, k_, cb, sb, None, a.threads), big.nbytes, reps)
            pout = throughput(lambda: lofp.quantize(big, s, threads=a.threads, out=(cb, sb)), big.nbytes, reps)
            pub = throughput(lambda: lofp.quantize(big, s, threads=a.threads), big.nbytes, reps)
            print(f"  quantize   {s:<11s} C call {raw[0]:6.2f}   lofp.quantize(out=) {pout[0]:6.2f} ({pout[0] / raw[0]:.3f})"
                  f"   lofp.quantize {pub[0]:6.2f} ({pub[0] / raw[0]:.3f})")
            qq = lofp.quantize(big, s)
            o = np.empty_like(big)
            lin = qq.scales.view(np.uint8)
            rawd = throughput(lambda: _lofp.dequantize(sc.blob, qq.codes, lin, qq.global_scale, rows_, k_, 1, o, a.threads),
                              big.nbytes, reps)
            fresh = throughput(lambda: _lofp.dequantize(sc.blob, qq.codes, lin, qq.global_scale, rows_, k_, 1,
                                                        np.empty_like(big), a.threads), big.nbytes, reps)
            poutd = throughput(lambda: lofp.dequantize(qq, "float32", threads=a.threads, out=o), big.nbytes, reps)
            pubd = throughput(lambda: lofp.dequantize(qq, "float32", threads=a.threads), big.nbytes, reps)
            print(f"  dequantize {s:<11s} C call {rawd[0]:6.2f}   lofp.dequantize(out=) {poutd[0]:6.2f} ({poutd[0] / rawd[0]:.3f})"
                  f"   C call, fresh output {fresh[0]:6.2f}   lofp.dequantize {pubd[0]:6.2f} ({pubd[0] / rawd[0]:.3f} "
                  f"of the C call, {pubd[0] / fresh[0]:.3f} of the C call into a fresh output)")
        touch = throughput(lambda: np.empty_like(big).fill(0), big.nbytes, reps)
        print(f"  first touch of a fresh output (np.empty_like + fill(0)): {touch[0]:6.2f} GB/s ({touch[1]:.2f} ms)")


if __name__ == "__main__":
    main()
