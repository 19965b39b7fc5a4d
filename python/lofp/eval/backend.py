"""The one place where `lofp eval` calls lofp: weight fake-quantization, activation
fake-quantization (its element encoder) and UltraQuant KV attention, through the lofp Python
package itself (lofp.quantize / lofp.dequantize / lofp.encode / lofp.kv, i.e. the C extension
lofp._lofp). There is no second binding: structure layouts and enum values live in the C headers
and the extension only, so eval cannot drift from the library.
Everything else in ``lofp.eval`` goes through ``Backend.fake_quant``, ``Backend.fake_quant_act``
and ``Backend.attention``.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np

SCHEMES = ("nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2", "mxint8",
           "tilelang-mxfp8", "ultraquant")
ROUNDINGS = {"rne": 0, "ties-to-zero": 1, "ties-away": 2, "stochastic": 3}
PROFILES = {"lofp": 0, "modelopt": 1, "compressed-tensors": 2, "ct": 2, "torchao": 3, "ggml": 4}
SCALE_RULES = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3, "ue4m3": 4, "uq-round": 5}
MX_SCHEMES = ("mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2", "mxint8",
              "tilelang-mxfp8")
# Activation recipes of `lofp eval --activations` (docs/QUALITY.md "W4A8").
ACT_RECIPES = ("e4m3-token",)


class BackendError(RuntimeError):
    pass


def e4m3_token(x, mod):
    """The W4A8 activation recipe of lofp_cuda_w4a8_gemm (include/lofp/lofp_cuda.h, docs/CUDA.md
    2b), per token (every index of all but the last axis; the last axis is K):
    scale_t = amax_t / 448 in fp32 (RN; 1 for an all-zero row; NaN for a row holding Inf or NaN),
    code = E4M3(x / scale_t) with fp32 division RN and E4M3 round-to-nearest-even, saturating
    (lofp.encode of the lofp package `mod`, the encoder test_cuda checks the GPU's codes against),
    and the fake-quantized activation code * scale_t in fp32.

    x is rounded to fp32 first (RN): these forwards compute in fp32 or fp64, the GPU path reads
    bf16. A finite row whose amax is below 448 * 2^-150 gets scale 0 in fp32 (as the recipe gives
    it; a bf16 input cannot be that small). Returns (dequantized fp32 of x's shape, codes uint8
    of x's shape, scales fp32 of x's shape with K = 1). Pure: x is not modified."""
    x32 = np.asarray(x, dtype=np.float32)
    amax = np.abs(x32).max(axis=-1, keepdims=True)        # NaN propagates
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.where(amax == 0, np.float32(1), amax / np.float32(448)).astype(np.float32)
        scale[~np.isfinite(amax)] = np.float32("nan")
        codes = mod.encode(x32 / scale, "e4m3", rounding="rne", overflow="saturate")
        deq = mod.decode(codes, "e4m3") * scale
    return np.asarray(deq, np.float32), codes, scale


# ------------------------------------------------------------------------------------------------
# The Python package
# ------------------------------------------------------------------------------------------------

class PackageBackend:
    """lofp through its Python package (lofp.quantize / lofp.dequantize / lofp.kv)."""

    def __init__(self, mod, threads: int | None = None):
        self.mod = mod
        self.threads = threads
        self.name = f"lofp package {getattr(mod, '__version__', '?')} ({Path(mod.__file__).parent})"

    def fake_quant(self, w, scheme, rounding=None, scale_rule=None, profile=None, **method):
        """w quantized and decoded back to float32; `method` holds lofp.quantize's method keywords
        (method, importance, hessian, damp, act_order)."""
        kw = {"pad": True, **method}
        if rounding is not None:
            kw["rounding"] = rounding
        if scale_rule is not None:
            kw["scale_rule"] = scale_rule
        if profile is not None:
            kw["profile"] = profile
        if self.threads is not None:
            kw["threads"] = self.threads
        q = self.mod.quantize(np.ascontiguousarray(w, np.float32), scheme, **kw)
        return np.asarray(self.mod.dequantize(q, dtype="float32"), np.float32)

    def fake_quant_act(self, x, recipe):
        """Activations x (any float array, K the last axis) fake-quantized by `recipe` (one of
        ACT_RECIPES; "e4m3-token": e4m3_token), in x's precision when that is fp64 (exact: the
        values are fp32), else fp32."""
        if recipe != "e4m3-token":
            raise BackendError(f"unknown activation recipe {recipe!r} (choose from "
                               f"{', '.join(ACT_RECIPES)})")
        deq = e4m3_token(x, self.mod)[0]
        return deq.astype(np.float64) if np.asarray(x).dtype == np.float64 else deq

    def attention(self, q, k, v, scale, causal, kv="ultraquant"):
        """Attention of q [T, Hq, D] over k, v [N, Hk, D] stored in an UltraQuant (or `kv`) paged
        cache; causal: prefill from position 0, else every query sees all N tokens."""
        q = np.ascontiguousarray(q, np.float32)
        k = np.ascontiguousarray(k, np.float32)
        v = np.ascontiguousarray(v, np.float32)
        t, hq, d = q.shape
        n, hk, _ = k.shape
        bs = 64
        nblocks = (n + bs - 1) // bs
        cache = self.mod.kv.Cache(nblocks, bs, hk, d, format=kv)
        cache.store(k, v, np.arange(n, dtype=np.int64))
        threads = self.threads or min(os.cpu_count() or 1, 8)
        if causal:
            return np.asarray(cache.prefill(q, np.array([0, t], np.int32),
                                            np.arange(nblocks, dtype=np.int32)[None, :],
                                            np.array([n], np.int32), scale=scale,
                                            threads=threads), np.float32)
        table = np.tile(np.arange(nblocks, dtype=np.int32), (t, 1))
        return np.asarray(cache.decode(q, table, np.full(t, n, np.int32), scale=scale,
                                       threads=threads), np.float32)


_BACKEND = None


def get_backend(prefer: str | None = None) -> Any:
    """Returns the backend: the lofp package this module belongs to (prefer: None or "package",
    also from $LOFP_EVAL_BACKEND; anything else raises BackendError)."""
    global _BACKEND
    prefer = prefer or os.environ.get("LOFP_EVAL_BACKEND") or None
    if prefer not in (None, "package"):
        raise BackendError(f"unknown backend '{prefer}': lofp eval runs on the lofp package only")
    if _BACKEND is None:
        _BACKEND = PackageBackend(importlib.import_module("lofp"))
    return _BACKEND
