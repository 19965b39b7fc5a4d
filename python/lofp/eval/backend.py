"""The one place where `lofp eval` calls lofp: weight fake-quantization and UltraQuant KV attention,
through the lofp Python package itself (lofp.quantize / lofp.dequantize / lofp.kv, i.e. the C
extension lofp._lofp). There is no second binding: structure layouts and enum values live in the
C headers and the extension only, so eval cannot drift from the library.
Everything else in ``lofp.eval`` goes through ``Backend.fake_quant`` and ``Backend.attention``.
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


class BackendError(RuntimeError):
    pass


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
