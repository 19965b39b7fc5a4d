"""The one place where `lofp eval` calls lofp: weight fake-quantization and UltraQuant KV attention.

Two implementations behind one interface:

* ``PackageBackend`` -- the Python package ``lofp`` (``lofp.quantize`` / ``lofp.dequantize`` /
  ``lofp.kv``), used when it is importable and has those functions;
* ``CtypesBackend`` -- ``liblofp.so`` through ctypes on the public C API (``lofp.h``,
  ``kvcache.h``), used otherwise. The library is looked for in ``$LOFP_LIBRARY``, then next to
  the source tree (``build/liblofp.so``), then on the loader's path.

Both compute the same thing bit for bit (they run the same C code); ``get_backend()`` picks one.
Everything else in ``lofp.eval`` goes through ``Backend.fake_quant`` and ``Backend.attention``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import os
from pathlib import Path

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
# ctypes over liblofp.so
# ------------------------------------------------------------------------------------------------

class _Scheme(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("elem", ctypes.c_int), ("scale_elem", ctypes.c_int),
                ("block", ctypes.c_uint32), ("scale_rule", ctypes.c_int),
                ("rounding", ctypes.c_int), ("two_level", ctypes.c_int), ("pad", ctypes.c_int),
                ("propagate_nonfinite", ctypes.c_int), ("amax_floor", ctypes.c_float),
                ("ceil_clamp", ctypes.c_int), ("c", ctypes.c_float), ("rotate", ctypes.c_int),
                ("hadamard", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("threads", ctypes.c_uint), ("profile", ctypes.c_int)]


class _QuantReport(ctypes.Structure):
    _fields_ = [("first_bad_index", ctypes.c_size_t), ("nonfinite_blocks", ctypes.c_size_t),
                ("logical_k", ctypes.c_size_t), ("padded_k", ctypes.c_size_t)]


class _KvDesc(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("head_dim", ctypes.c_uint32),
                ("num_kv_heads", ctypes.c_uint32), ("block_size", ctypes.c_uint32),
                ("num_blocks", ctypes.c_size_t), ("c", ctypes.c_float), ("hadamard", ctypes.c_int),
                ("rotate_k", ctypes.c_int)]


class _KvStoreReport(ctypes.Structure):
    _fields_ = [("tokens_stored", ctypes.c_size_t), ("tokens_skipped", ctypes.c_size_t),
                ("zeroed_groups", ctypes.c_size_t), ("first_bad_index", ctypes.c_size_t),
                ("first_bad_in_v", ctypes.c_int), ("has_nonfinite", ctypes.c_int)]


class _AttnParams(ctypes.Structure):
    _fields_ = [("num_q_heads", ctypes.c_uint32), ("scale", ctypes.c_float),
                ("sinks", ctypes.POINTER(ctypes.c_float)), ("block_table_stride", ctypes.c_size_t),
                ("path", ctypes.c_int), ("threads", ctypes.c_uint),
                ("split_tokens", ctypes.c_uint32), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t)]


class _AttnReport(ctypes.Structure):
    _fields_ = [("path", ctypes.c_int), ("partitions", ctypes.c_size_t),
                ("work_items", ctypes.c_size_t), ("saturated_q", ctypes.c_size_t),
                ("first_bad_index", ctypes.c_size_t)]


KV_DTYPES = {"ultraquant": 1, "fp32": 2, "bf16": 3}
_DTYPE_F32 = 1


def _library_candidates() -> list[str]:
    out = []
    env = os.environ.get("LOFP_LIBRARY")
    if env:
        out.append(env)
    root = Path(__file__).resolve().parents[3]  # python/lofp/eval/backend.py -> repo root
    for build in ("build", "build-release"):
        out.append(str(root / build / "liblofp.so"))
    found = ctypes.util.find_library("lofp")
    if found:
        out.append(found)
    return out


class CtypesBackend:
    """lofp through liblofp.so (the public C API)."""

    def __init__(self, path: str | None = None, threads: int | None = None):
        tried = [path] if path else _library_candidates()
        lib = None
        for cand in tried:
            if cand and (os.path.sep not in cand or os.path.exists(cand)):
                try:
                    lib = ctypes.CDLL(cand)
                    self.path = cand
                    break
                except OSError:
                    continue
        if lib is None:
            raise BackendError("liblofp.so not found (tried: " + ", ".join(map(str, tried)) +
                               "); build it with `make` or set LOFP_LIBRARY")
        self.lib = lib
        self.threads = threads if threads is not None else min(os.cpu_count() or 1, 8)
        lib.lofp_version.restype = ctypes.c_char_p
        lib.lofp_status_name.restype = ctypes.c_char_p
        lib.lofp_scheme_preset.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Scheme)]
        lib.lofp_padded_k.restype = ctypes.c_size_t
        lib.lofp_padded_k.argtypes = [ctypes.POINTER(_Scheme), ctypes.c_size_t]
        for fn in (lib.lofp_codes_bytes, lib.lofp_scales_bytes):
            fn.restype = ctypes.c_size_t
            fn.argtypes = [ctypes.POINTER(_Scheme), ctypes.c_size_t, ctypes.c_size_t]
        lib.lofp_quantize.argtypes = [ctypes.POINTER(_Scheme), ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.POINTER(ctypes.c_float),
                                      ctypes.POINTER(_QuantReport)]
        lib.lofp_dequantize.argtypes = [ctypes.POINTER(_Scheme), ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_float, ctypes.c_size_t, ctypes.c_size_t,
                                        ctypes.c_int, ctypes.c_void_p]
        lib.lofp_kv_desc_init.argtypes = [ctypes.POINTER(_KvDesc), ctypes.c_int, ctypes.c_uint32,
                                          ctypes.c_uint32, ctypes.c_uint32, ctypes.c_size_t]
        lib.lofp_kv_cache_bytes.restype = ctypes.c_size_t
        lib.lofp_kv_cache_bytes.argtypes = [ctypes.POINTER(_KvDesc)]
        lib.lofp_kv_store.argtypes = [ctypes.POINTER(_KvDesc), ctypes.c_void_p, ctypes.c_int,
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_void_p, ctypes.c_uint,
                                      ctypes.POINTER(_KvStoreReport)]
        lib.lofp_attn_params_init.argtypes = [ctypes.POINTER(_AttnParams), ctypes.c_uint32,
                                              ctypes.c_float, ctypes.c_size_t]
        lib.lofp_attention_decode.argtypes = [
            ctypes.POINTER(_KvDesc), ctypes.POINTER(_AttnParams), ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.POINTER(_AttnReport)]
        lib.lofp_attention_prefill.argtypes = [
            ctypes.POINTER(_KvDesc), ctypes.POINTER(_AttnParams), ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.POINTER(_AttnReport)]
        self.name = f"liblofp {lib.lofp_version().decode()} (ctypes, {self.path})"

    def _check(self, st: int, what: str) -> None:
        if st != 0:
            raise BackendError(f"{what}: {self.lib.lofp_status_name(st).decode()} (status {st})")

    def _scheme(self, scheme: str, rounding: str | None, scale_rule: str | None) -> _Scheme:
        s = _Scheme()
        self._check(self.lib.lofp_scheme_preset(scheme.encode(), ctypes.byref(s)),
                    f"scheme {scheme!r}")
        if rounding is not None:
            if rounding not in ROUNDINGS:
                raise BackendError(f"unknown rounding {rounding!r}")
            s.rounding = ROUNDINGS[rounding]
        if scale_rule is not None:
            if scale_rule not in SCALE_RULES:
                raise BackendError(f"unknown scale rule {scale_rule!r}")
            s.scale_rule = SCALE_RULES[scale_rule]
        s.pad = 1
        s.threads = self.threads
        return s

    def fake_quant(self, w: np.ndarray, scheme: str, rounding: str | None = None,
                   scale_rule: str | None = None, profile: str | None = None) -> np.ndarray:
        """Quantizes a [rows, K] fp32 matrix along K (zero-padded to the block), under a producer
        profile when given, and returns its dequantization, fp32 [rows, K]."""
        w = np.ascontiguousarray(w, dtype=np.float32)
        rows, k = w.shape
        s = self._scheme(scheme, rounding, scale_rule)
        if profile is not None:
            if profile not in PROFILES:
                raise BackendError(f"unknown profile {profile!r}")
            s.profile = PROFILES[profile]
        cb = self.lib.lofp_codes_bytes(ctypes.byref(s), rows, k)
        sb = self.lib.lofp_scales_bytes(ctypes.byref(s), rows, k)
        if cb == 0 or sb == 0:
            raise BackendError(f"{scheme}: shape [{rows}, {k}] not supported")
        codes = np.empty(cb, np.uint8)
        scales = np.empty(sb, np.uint8)
        g = ctypes.c_float(1.0)
        rep = _QuantReport()
        self._check(self.lib.lofp_quantize(ctypes.byref(s), _DTYPE_F32, w.ctypes.data, rows, k,
                                           codes.ctypes.data, scales.ctypes.data, ctypes.byref(g),
                                           ctypes.byref(rep)),
                    f"quantize {scheme}" + (f" under profile {profile}" if profile else ""))
        out = np.empty((rows, k), np.float32)
        self._check(self.lib.lofp_dequantize(ctypes.byref(s), codes.ctypes.data,
                                             scales.ctypes.data, g, rows, k, _DTYPE_F32,
                                             out.ctypes.data), f"dequantize {scheme}")
        return out

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                  causal: bool, kv: str = "ultraquant") -> np.ndarray:
        """Attention of one sequence through a lofp paged KV cache.

        q [T, Hq, D], k and v [N, Hk, D] fp32 (K after RoPE). K/V are stored in a cache of type
        `kv` ("ultraquant", "fp32", "bf16") and read back by lofp's attention. causal: query row
        i attends to positions [0, N - T + i] (prefill); otherwise every row sees all N
        positions (encoder). Returns fp32 [T, Hq, D]."""
        q = np.ascontiguousarray(q, np.float32)
        k = np.ascontiguousarray(k, np.float32)
        v = np.ascontiguousarray(v, np.float32)
        t, hq, d = q.shape
        n, hk, _ = k.shape
        bs = 64
        nblocks = (n + bs - 1) // bs
        desc = _KvDesc()
        self._check(self.lib.lofp_kv_desc_init(ctypes.byref(desc), KV_DTYPES[kv], d, hk, bs,
                                               nblocks), f"kv cache D={d} Hk={hk}")
        cache = np.zeros(self.lib.lofp_kv_cache_bytes(ctypes.byref(desc)), np.uint8)
        slots = np.arange(n, dtype=np.int64)
        rep = _KvStoreReport()
        self._check(self.lib.lofp_kv_store(ctypes.byref(desc), cache.ctypes.data, _DTYPE_F32,
                                           k.ctypes.data, v.ctypes.data, n, slots.ctypes.data, 0,
                                           ctypes.byref(rep)), "kv store")
        p = _AttnParams()
        self.lib.lofp_attn_params_init(ctypes.byref(p), hq, ctypes.c_float(scale), nblocks)
        p.threads = self.threads
        out = np.empty((t, hq, d), np.float32)
        arep = _AttnReport()
        if causal:
            table = np.arange(nblocks, dtype=np.int32)
            qsl = np.array([0, t], np.int32)
            lens = np.array([n], np.int32)
            self._check(self.lib.lofp_attention_prefill(
                ctypes.byref(desc), ctypes.byref(p), cache.ctypes.data, 1, qsl.ctypes.data,
                _DTYPE_F32, q.ctypes.data, table.ctypes.data, lens.ctypes.data, out.ctypes.data,
                ctypes.byref(arep)), "attention prefill")
        else:
            # Every query row is its own decode "sequence" over the same blocks: full attention.
            table = np.tile(np.arange(nblocks, dtype=np.int32), (t, 1))
            lens = np.full(t, n, np.int32)
            self._check(self.lib.lofp_attention_decode(
                ctypes.byref(desc), ctypes.byref(p), cache.ctypes.data, t, _DTYPE_F32,
                q.ctypes.data, table.ctypes.data, lens.ctypes.data, out.ctypes.data,
                ctypes.byref(arep)), "attention decode")
        return out


# ------------------------------------------------------------------------------------------------
# The Python package
# ------------------------------------------------------------------------------------------------

class PackageBackend:
    """lofp through its Python package (lofp.quantize / lofp.dequantize / lofp.kv)."""

    def __init__(self, mod, threads: int | None = None):
        self.mod = mod
        self.threads = threads
        self.name = f"lofp package {getattr(mod, '__version__', '?')} ({Path(mod.__file__).parent})"

    def fake_quant(self, w, scheme, rounding=None, scale_rule=None, profile=None):
        kw = {"pad": True}
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
        """As CtypesBackend.attention, through lofp.kv.Cache."""
        q = np.ascontiguousarray(q, np.float32)
        k = np.ascontiguousarray(k, np.float32)
        v = np.ascontiguousarray(v, np.float32)
        t, hq, d = q.shape
        n, hk, _ = k.shape
        bs = 64
        nblocks = (n + bs - 1) // bs
        cache = self.mod.kv.Cache(nblocks, bs, hk, d, dtype=kv)
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
    """Returns the backend: prefer = "package", "ctypes" or None (package when importable, else
    ctypes; $LOFP_EVAL_BACKEND overrides)."""
    global _BACKEND
    prefer = prefer or os.environ.get("LOFP_EVAL_BACKEND") or None
    if _BACKEND is not None and prefer is None:
        return _BACKEND
    be = None
    if prefer in (None, "package"):
        try:
            mod = importlib.import_module("lofp")
            if callable(getattr(mod, "quantize", None)) and callable(getattr(mod, "dequantize", None)):
                be = PackageBackend(mod)
        except ImportError:
            be = None
        if be is None and prefer == "package":
            raise BackendError("the lofp Python package (lofp.quantize) is not importable")
    if be is None:
        be = CtypesBackend()
    if prefer is None:
        _BACKEND = be
    return be
