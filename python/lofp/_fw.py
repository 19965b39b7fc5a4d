"""Framework plumbing: which framework an array belongs to, dense dtypes, and output allocation.

numpy arrays reach the extension through the buffer protocol, torch tensors through DLPack. Every
output is allocated here, by the input's own framework and on its device, and filled in C.
"""
from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import numpy as np

from . import _lofp
from ._lofp import Error

_STATUS_CODES = {"ok": 0, "invalid argument": 1, "shape": 2, "non-finite input": 3, "size overflow": 4,
                 "unsupported": 5, "buffer too small": 6, "out of memory": 7, "i/o error": 8, "malformed data": 9,
                 "not found": 10, "mismatch": 11, "device runtime error": 12}


class _StatusFromMessage:
    """Error.status / Error.code for errors raised in Python ("<status>: <detail>"); the ones
    raised in C set both on the instance, which wins over this (non-data) descriptor."""

    def __init__(self, code: bool):
        self.code = code

    def __get__(self, inst, owner=None):
        if inst is None:
            return self
        msg = str(inst)
        st = msg.split(":", 1)[0] if ":" in msg else None
        return _STATUS_CODES.get(st) if self.code else st


Error.status = _StatusFromMessage(False)
Error.code = _StatusFromMessage(True)
Error.index = None

DT_F32, DT_BF16, DT_F16 = 1, 2, 3
_DT_NAMES = {DT_F32: "float32", DT_BF16: "bfloat16", DT_F16: "float16"}
_DT_CODES = {
    "float32": DT_F32, "f32": DT_F32, "fp32": DT_F32,
    "bfloat16": DT_BF16, "bf16": DT_BF16,
    "float16": DT_F16, "f16": DT_F16, "fp16": DT_F16, "half": DT_F16,
}
_NP_DENSE = {np.dtype(np.float32): DT_F32, np.dtype(ml_dtypes.bfloat16): DT_BF16, np.dtype(np.float16): DT_F16}
_NP_OF = {DT_F32: np.dtype(np.float32), DT_BF16: np.dtype(ml_dtypes.bfloat16), DT_F16: np.dtype(np.float16)}
_NP_RAW = {DT_F32: np.dtype(np.float32), DT_BF16: np.dtype(np.uint16), DT_F16: np.dtype(np.float16)}

# ml_dtypes views of the scale and code bytes.
NP_VIEW = {
    "uint8": np.dtype(np.uint8),
    "uint32": np.dtype(np.uint32),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
}


_registered = [False]


def _torch():
    t = sys.modules.get("torch")
    if t is not None and not _registered[0] and hasattr(t, "Tensor"):
        _lofp.register_tensor_type(t.Tensor)  # the extension's direct path for torch tensors
        _registered[0] = True
    return t


def is_torch(x: Any) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def is_cuda(x: Any) -> bool:
    return is_torch(x) and x.device.type == "cuda"


def dtype_code(dtype: Any) -> int:
    """A dense dtype (name, numpy dtype, torch dtype) as the library's lofp_dtype."""
    if isinstance(dtype, str):
        code = _DT_CODES.get(dtype.lower())
        if code is None:
            raise Error(f"invalid argument: unknown dtype '{dtype}' (float32, bfloat16, float16)")
        return code
    t = _torch()
    if t is not None and isinstance(dtype, t.dtype):
        m = {t.float32: DT_F32, t.bfloat16: DT_BF16, t.float16: DT_F16}
        if dtype in m:
            return m[dtype]
        raise Error(f"invalid argument: unsupported dtype {dtype} (float32, bfloat16, float16)")
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise Error(f"invalid argument: unknown dtype {dtype!r} (float32, bfloat16, float16)") from None
    if d in _NP_DENSE:
        return _NP_DENSE[d]
    raise Error(f"invalid argument: unsupported dtype {d} (float32, bfloat16, float16)")


def dtype_name(code: int) -> str:
    return _DT_NAMES[code]


def dense_in(x: Any, what: str = "x"):
    """Returns (array ready for C, dtype code, shape). Non-contiguous inputs are copied once;
    float64 is rounded to float32 (a copy); other dtypes are refused."""
    if type(x) is _ndarray and x.dtype is _F32 and x.flags.c_contiguous:  # the common case, fast
        return x, DT_F32, x.shape
    if is_torch(x):
        t = _torch()
        if x.requires_grad:
            x = x.detach()
        if x.dtype == t.float64:
            x = x.float()
        m = {t.float32: DT_F32, t.bfloat16: DT_BF16, t.float16: DT_F16}
        code = m.get(x.dtype)
        if code is None:
            raise Error(f"invalid argument: {what} has dtype {x.dtype}; lofp takes float32, bfloat16 and float16 (float64 is rounded to float32)")
        if not x.is_contiguous():
            x = x.contiguous()
        return x, code, tuple(x.shape)
    if not isinstance(x, np.ndarray):
        if type(x) is DLTensor or (hasattr(x, "__dlpack__")
                                   and not isinstance(x, (bytes, bytearray, memoryview, list, tuple))):
            held = _dense_dlpack(x, what)
            if held is not None:
                return held
            try:
                x = np.from_dlpack(x)  # a CPU array lofp cannot read as it is: numpy converts / copies it
            except (TypeError, ValueError, BufferError, RuntimeError) as e:
                raise Error(f"invalid argument: {what} ({type(x).__name__}) is a CPU DLPack array lofp cannot read in "
                            f"place (not C-contiguous, or not float32 / bfloat16 / float16) and numpy cannot convert "
                            f"it: {e}") from None
        else:
            x = np.asarray(x)
    if x.dtype == np.float64:
        x = x.astype(np.float32)
    code = _NP_DENSE.get(x.dtype)
    if code is None:
        raise Error(f"invalid argument: {what} has dtype {x.dtype}; lofp takes float32, bfloat16 and float16 (float64 is rounded to float32)")
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if code == DT_BF16:
        return x.view(np.uint16), code, x.shape
    return x, code, x.shape


# DLPack device types (the specification's DLDeviceType) and the dense dtypes as (code, bits, lanes).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_CUDA_TYPES = (DL_CUDA, DL_CUDA_MANAGED)
_DL_CPU_TYPES = (DL_CPU, DL_CUDA_HOST)
_DL_DENSE = {(2, 32, 1): DT_F32, (4, 16, 1): DT_BF16, (2, 16, 1): DT_F16}
DLTensor = _lofp.DLTensor


def dl_device(x: Any):
    """(DLPack device type, device id) of an array that is neither numpy nor torch but speaks
    DLPack (JAX, CuPy, ...), or None. Producers without __dlpack_device__ count as CPU."""
    if type(x) is DLTensor:
        return x.device
    if isinstance(x, (np.ndarray, bytes, bytearray, memoryview)) or not hasattr(x, "__dlpack__") or is_torch(x):
        return None
    if not hasattr(x, "__dlpack_device__"):
        return (DL_CPU, 0)
    d = x.__dlpack_device__()
    return (int(d[0]), int(d[1]))


def is_foreign_cuda(x: Any) -> bool:
    """A CUDA array of another DLPack producer (not torch)."""
    d = dl_device(x)
    return d is not None and d[0] in _DL_CUDA_TYPES


def torch_for_cuda(what: str):
    """torch, which allocates the outputs of CUDA arrays from other producers (imported here when
    the caller has not)."""
    t = _torch()
    if t is None:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise Error(f"unsupported: {what} is a CUDA array of a DLPack producer other than torch; lofp allocates "
                        "CUDA outputs with torch, which is not installed") from None
        t = _torch()
    return t


def dlpack_stream(device) -> int:
    """The consumer stream to give __dlpack__ for work on `device`: torch's current stream there,
    with the legacy default stream (handle 0) spelled 1 as the DLPack specification asks."""
    h = cuda_stream(device)
    return 1 if h == 0 else h


def _dense_dlpack(x: Any, what: str):
    """A DLPack producer's array (not numpy, not torch) consumed once: (DLTensor, dtype code, shape)
    when lofp reads it as it is, None for a CPU array numpy has to convert first."""
    if type(x) is DLTensor:
        held, dev = x, x.device
    else:
        dev = dl_device(x)
        if dev[0] in _DL_CUDA_TYPES:
            t = torch_for_cuda(what)
            held = _lofp.from_dlpack(x, what, dlpack_stream(t.device("cuda", dev[1])))
        elif dev[0] in _DL_CPU_TYPES:
            held = _lofp.from_dlpack(x, what)
        else:
            raise Error(f"unsupported: {what} is on DLPack device type {dev[0]}; lofp reads CPU and CUDA arrays")
    code = _DL_DENSE.get(held.dtype)
    if code is not None and held.info["contiguous"]:
        return held, code, held.shape
    if held.device[0] in _DL_CPU_TYPES and type(x) is not DLTensor:
        held.release()
        return None
    c, b, lanes = held.dtype
    kind = "CPU" if held.device[0] in _DL_CPU_TYPES else "CUDA"
    if code is None:
        raise Error(f"invalid argument: {what} (a {kind} array from {type(x).__name__}) has DLPack dtype code {c} with "
                    f"{b} bits x {lanes}; lofp takes float32, bfloat16 and float16")
    raise Error(f"invalid argument: {what} (a {kind} array from {type(x).__name__}) is not C-contiguous; lofp reads other "
                "producers' CUDA arrays in place (make it contiguous, or pass a torch tensor)")


def foreign_cuda_as_torch(x: Any):
    """A CUDA array of another DLPack producer as a torch tensor (torch.from_dlpack: zero-copy, on
    torch's current stream); anything else unchanged. For the paths whose Python code reads
    torch attributes (GEMM, KV cache)."""
    if is_foreign_cuda(x):
        return torch_for_cuda("the array").from_dlpack(x)
    return x


def raw_out(a: Any, what: str):
    """A caller-given output as raw bytes for C, refusing copies (an out= must be filled in place)."""
    if is_torch(a):
        if not a.is_contiguous():
            raise Error(f"invalid argument: {what} must be contiguous")
        t = _torch()
        return a.view(t.uint8) if a.dtype.itemsize == 1 and a.dtype != t.uint8 else a
    if not isinstance(a, np.ndarray):
        return a
    if not a.flags.c_contiguous:
        raise Error(f"invalid argument: {what} must be C-contiguous")
    if a.dtype.kind == "V" or a.dtype in (NP_VIEW["float8_e4m3fn"], NP_VIEW["float8_e5m2"], NP_VIEW["float8_e8m0fnu"]) or a.dtype == _NP_OF[DT_BF16]:
        return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)
    return a


_U8 = np.dtype(np.uint8)
_F32 = np.dtype(np.float32)
_ndarray = np.ndarray


def raw_in(a: Any):
    """A byte-typed input (codes, scales) as something C can read without a copy if possible."""
    if type(a) is _ndarray and a.flags.c_contiguous:  # the common case, fast
        if a.dtype is _U8 or a.dtype.itemsize != 1:
            return a if a.dtype != _NP_OF[DT_BF16] else a.view(np.uint16)
        return a.view(_U8)
    if is_torch(a):
        t = _torch()
        if not a.is_contiguous():
            a = a.contiguous()
        if a.dtype.itemsize == 1 and a.dtype != t.uint8:
            return a.view(t.uint8)
        if a.dtype not in (t.uint8, t.int32, t.int64, t.float32):
            return a.view(t.uint8) if a.dim() else a.reshape(1).view(t.uint8)
        return a
    if not isinstance(a, np.ndarray):
        if type(a) is DLTensor or (hasattr(a, "__dlpack__") and not isinstance(a, (list, tuple))):
            return a  # the extension reads DLPack producers' bytes itself
        a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.dtype.itemsize == 1 and a.dtype != np.uint8:
        return a.view(np.uint8)
    if a.dtype == _NP_OF[DT_BF16]:
        return a.view(np.uint16)
    return a


class Alloc:
    """Allocates outputs like a given array: numpy on the host, or torch on the array's device."""

    __slots__ = ("torch", "device")

    def __init__(self, like: Any):
        if type(like) is _ndarray or like is None:
            self.torch = None
            self.device = None
        elif is_torch(like):
            self.torch = _torch()
            self.device = like.device
        else:
            d = dl_device(like)
            if d is not None and d[0] in _DL_CUDA_TYPES:
                # a CUDA array of another producer: its outputs are torch tensors on the same GPU
                self.torch = torch_for_cuda("the input")
                self.device = self.torch.device("cuda", d[1])
            else:
                self.torch = None
                self.device = None

    @property
    def cuda(self) -> bool:
        return self.torch is not None and self.device.type == "cuda"

    def bytes(self, shape, view: str = "uint8"):
        """(array with the user-facing dtype, raw uint8/uint32 array for C) sharing memory."""
        if self.torch is None:
            if view == "uint32":
                a = np.empty(shape, np.uint32)
                return a, a
            raw = np.empty(shape, np.uint8)
            return (raw if view == "uint8" else raw.view(NP_VIEW[view])), raw
        t = self.torch
        if view == "uint32":
            raw = t.empty(tuple(shape[:-1]) + (shape[-1] * 4,), dtype=t.uint8, device=self.device)
            return raw.view(t.uint32), raw
        raw = t.empty(shape, dtype=t.uint8, device=self.device)
        if view == "uint8":
            return raw, raw
        return raw.view(getattr(t, view)), raw

    def dense(self, shape, code: int):
        """(array of dense dtype `code`, raw for C)."""
        if self.torch is None:
            a = np.empty(shape, _NP_OF[code])
            return a, (a.view(np.uint16) if code == DT_BF16 else a)
        t = self.torch
        a = t.empty(shape, dtype={DT_F32: t.float32, DT_BF16: t.bfloat16, DT_F16: t.float16}[code], device=self.device)
        return a, a

    def empty(self, shape, np_dtype):
        if self.torch is None:
            return np.empty(shape, np_dtype)
        t = self.torch
        m = {np.dtype(np.float32): t.float32, np.dtype(np.float64): t.float64, np.dtype(np.int32): t.int32,
             np.dtype(np.int64): t.int64, np.dtype(np.uint8): t.uint8}
        return t.empty(shape, dtype=m[np.dtype(np_dtype)], device=self.device)


def cuda_stream(device) -> int:
    """The raw handle of torch's current stream on `device` (0 = the legacy default stream)."""
    t = _torch()
    return int(t.cuda.current_stream(device).cuda_stream)


def prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
