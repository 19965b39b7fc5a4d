"""Schemes, QTensor, quantize / dequantize and the element codecs."""
from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _args, _fw, _lofp
from ._lofp import Error

SCHEMES = ("nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2", "mxint8", "tilelang-mxfp8",
           "ultraquant")
LAYOUTS = ("linear", "swizzle-128x4", "packed-u32", "packed-u32:deepgemm")
ROUNDINGS = ("rne", "ties-to-zero", "ties-away", "stochastic")
_ROUNDING_CODE = {"rne": 0, "ties-to-zero": 1, "ties-away": 2, "stochastic": 3}
_OVERFLOW_CODE = {"saturate": 0, "ieee": 1}

# Quantize calls over at least this many elements use several threads by default.
_AUTO_THREADS_MIN = 1 << 20


def _threads(threads: Optional[int], n: int) -> int:
    if threads is not None:
        return _args.threads(threads)
    if n < _AUTO_THREADS_MIN:
        return 1
    return max(1, min(os.cpu_count() or 1, 16))


@dataclass(frozen=True)
class Scheme:
    """A block scheme with every option resolved (lofp_scheme). Make one with lofp.scheme()."""

    name: str
    rounding: str
    scale_rule: str
    block: int
    two_level: bool
    pad: bool
    propagate_nonfinite: bool
    c: float
    rotate: bool
    hadamard: str
    seed: int
    elem: str
    elem_bits: int
    scale_elem: str
    blob: bytes = field(repr=False, compare=False)
    profile: str = "lofp"
    decode_direction: bool = False

    def padded_k(self, k: int) -> int:
        """K as stored: k itself, or rounded up to the block when the scheme pads."""
        if k % self.block == 0:
            return k
        if not self.pad:
            raise Error(f"shape: last dimension {k} is not a multiple of the block {self.block} (pass pad=True)")
        return (k + self.block - 1) // self.block * self.block

    @property
    def codes_per_byte(self) -> int:
        """2 for the 4-bit element types (two codes per byte), else 1."""
        return 2 if self.elem_bits == 4 else 1

    @property
    def scale_view(self) -> str:
        """dtype the linear scales are shown as: float8_e4m3fn (NVFP4), float8_e8m0fnu (MX), or
        uint8 (UltraQuant, where byte 0 means a zero group)."""
        if self.name == "ultraquant":
            return "uint8"
        return "float8_e4m3fn" if self.scale_elem == "ue4m3" else "float8_e8m0fnu"


@functools.lru_cache(maxsize=512)
def _make_scheme(name, rounding, scale_rule, block, two_level, pad, propagate, c, rotate, hadamard, seed,
                 profile=None) -> Scheme:
    if not isinstance(name, str):
        raise Error(f"invalid argument: scheme must be a name or a lofp.Scheme, got {type(name).__name__}")
    blob = _lofp.scheme(name, rounding, scale_rule, block, two_level, pad, propagate, c, rotate, hadamard, seed, profile)
    return _scheme_of_blob(blob)


def _scheme_of_blob(blob: bytes) -> Scheme:
    i = _lofp.scheme_info(blob)
    return Scheme(name=i["name"], rounding=i["rounding"], scale_rule=i["scale_rule"], block=i["block"],
                  two_level=bool(i["two_level"]), pad=bool(i["pad"]), propagate_nonfinite=bool(i["propagate_nonfinite"]),
                  c=i["c"], rotate=bool(i["rotate"]), hadamard=i["hadamard"], seed=i["seed"], elem=i["elem"],
                  elem_bits=i["elem_bits"], scale_elem=i["scale_elem"], blob=blob, profile=i["profile"],
                  decode_direction=bool(i["decode_direction"]))


def scheme(name: Union[str, Scheme] = "nvfp4", *, rounding: Optional[str] = None, scale_rule: Optional[str] = None,
           block: Optional[int] = None, two_level: Optional[bool] = None, pad: Optional[bool] = None,
           propagate_nonfinite: Optional[bool] = None, c: Optional[float] = None, rotate: Optional[bool] = None,
           hadamard: Optional[str] = None, seed: Optional[int] = None, profile: Optional[str] = None) -> Scheme:
    """Resolves a preset name plus options into a Scheme (validated by the C library).

    name: nvfp4, mxfp4, mxfp6-e2m3, mxfp6-e3m2, mxfp8-e4m3, mxfp8-e5m2, mxint8, tilelang-mxfp8,
    ultraquant; or a Scheme, whose fields the other arguments override. Options left at None keep
    the preset's value (RNE rounding, FLOOR scale rule for MX, two-level NVFP4, UltraQuant c=0.156
    with the butterfly rotation). rounding: rne, ties-to-zero, ties-away, stochastic (with seed);
    scale_rule: floor, ceil, even, rceil; block: any multiple of 32 for MX. profile: whose
    numerics, bit for bit: 'lofp' (default), 'modelopt', 'compressed-tensors', 'torchao', 'ggml'
    (docs/CHECKPOINTS.md "Profiles"; the per-tensor scale is then in that producer's direction).
    """
    # Checked before the overrides are merged so the message names what the caller passed.
    _args.choice("rounding", rounding, _args.ROUNDINGS)
    _args.choice("scale_rule", scale_rule, _args.SCALE_RULES)
    two_level, pad = _args.flag("two_level", two_level), _args.flag("pad", pad)
    rotate, propagate_nonfinite = _args.flag("rotate", rotate), _args.flag("propagate_nonfinite", propagate_nonfinite)
    seed = _args.seed(seed)
    if block is not None:
        block = _args.int_range("block", block, 1, 1 << 20)
    if isinstance(name, Scheme):
        base = name
        rounding = base.rounding if rounding is None else rounding
        scale_rule = base.scale_rule if scale_rule is None else scale_rule
        block = base.block if block is None else block
        two_level = base.two_level if two_level is None else two_level
        pad = base.pad if pad is None else pad
        propagate_nonfinite = base.propagate_nonfinite if propagate_nonfinite is None else propagate_nonfinite
        c = base.c if c is None else c
        rotate = base.rotate if rotate is None else rotate
        hadamard = base.hadamard if hadamard is None else hadamard
        seed = base.seed if seed is None else seed
        profile = base.profile if profile is None else profile
        name = base.name
    return _make_scheme(name, rounding, scale_rule, None if block is None else int(block),
                        None if two_level is None else bool(two_level), None if pad is None else bool(pad),
                        None if propagate_nonfinite is None else bool(propagate_nonfinite),
                        None if c is None else float(c), None if rotate is None else bool(rotate), hadamard,
                        None if seed is None else int(seed), profile)


@dataclass(frozen=True, eq=False, repr=False)
class QTensor:
    """A block-quantized tensor: what lofp.quantize returns and lofp.dequantize reads.

    codes        uint8 [..., padded_k/2] (FP4, element 2i in the low nibble) or [..., padded_k]
    scales       linear: [..., padded_k/block] as float8_e4m3fn (NVFP4), float8_e8m0fnu (MX) or
                 uint8 (UltraQuant: byte 0 = zero group); swizzle-128x4: flat [bytes];
                 packed-u32 layouts: uint32 [groups, rows']
    global_scale the NVFP4 per-tensor *encode* multiplier (1.0 otherwise): a float for numpy, a
                 0-d float32 tensor for torch (on the input's device); under a profile, in that
                 producer's direction (the decode scale for modelopt and torchao)
    scheme       the preset name; `spec` holds every option (a lofp.Scheme)
    shape        the logical shape of the original tensor
    layout       the scale layout
    profile      the producer profile whose numerics made it (None: lofp's own)
    dtype        the dtype the tensor was quantized from (dequantize's default)
    pad_byte     pad byte of the packed-u32 layouts (127 TileLang, else 0 unless given)
    """

    codes: Any
    scales: Any
    global_scale: Any
    scheme: str
    shape: Tuple[int, ...]
    layout: str = "linear"
    profile: Optional[str] = None
    spec: Optional[Scheme] = None
    dtype: str = "float32"
    pad_byte: int = -1

    @property
    def k(self) -> int:
        """The logical last dimension."""
        return int(self.shape[-1])

    @property
    def rows(self) -> int:
        """The product of the leading dimensions."""
        return _fw.prod(self.shape[:-1])

    @property
    def padded_k(self) -> int:
        """K as stored: k rounded up to the block when the tensor was quantized with pad=True."""
        return self.spec.padded_k(self.k)

    @property
    def decode_scale(self) -> float:
        """The per-tensor *decode* scale: fl(1/global_scale), ModelOpt's weight_scale_2 (under a
        decode-direction profile, modelopt or torchao, global_scale already is that scale)."""
        if self.spec is not None and self.spec.decode_direction:
            return self.global_value
        return _lofp.decode_from_encode(self.global_value)

    @property
    def global_value(self) -> float:
        """global_scale as a Python float (synchronises when it lives on a GPU)."""
        g = self.global_scale
        return float(g.item()) if hasattr(g, "item") and not isinstance(g, float) else float(g)

    @property
    def device(self) -> str:
        """'cpu', or the torch device string ('cuda:0')."""
        if _fw.is_torch(self.codes):
            return str(self.codes.device)
        d = _fw.dl_device(self.codes)  # codes filled in place in another producer's CUDA array (out=)
        return f"cuda:{d[1]}" if d is not None and d[0] in _fw._DL_CUDA_TYPES else "cpu"

    @property
    def bits_per_value(self) -> float:
        """Storage cost: codes + scales (+ 32 bits of global) over the logical element count."""
        n = _fw.prod(self.shape)
        extra = 32 if (self.scheme == "nvfp4" and self.spec.two_level) else 0
        cb = _nbytes(self.codes)
        sb = _nbytes(self.scales)
        return (8 * (cb + sb) + extra) / n

    def dequantize(self, dtype: Any = None, **kw: Any) -> Any:
        """Same as lofp.dequantize(self, dtype, **kw)."""
        return dequantize(self, dtype, **kw)

    def __repr__(self) -> str:
        def desc(a):
            if _fw.is_torch(a):
                return f"{str(a.dtype).replace('torch.', '')}{list(a.shape)} torch {a.device}"
            if isinstance(a, np.ndarray):
                return f"{a.dtype}{list(a.shape)} numpy"
            return f"{type(a).__name__} (DLPack)"  # a caller's out= array of another framework
        g = self.global_scale
        gs = f"{float(g):.9g}" if isinstance(g, (float, int, np.floating)) else f"tensor on {getattr(g, 'device', '?')}"
        extra = f", profile={self.profile!r}" if self.profile else ""
        return (f"QTensor(scheme={self.scheme!r}, shape={tuple(self.shape)}, layout={self.layout!r}, "
                f"codes={desc(self.codes)}, scales={desc(self.scales)}, global_scale={gs}, dtype={self.dtype!r}{extra})")


_QT_NEW = object.__new__


def _qtensor(codes, scales, g, scheme_name, shape, layout, profile, spec, dtype, pad_byte) -> QTensor:
    """QTensor(...) without the frozen dataclass's per-field __setattr__ (same object)."""
    q = _QT_NEW(QTensor)
    q.__dict__.update(codes=codes, scales=scales, global_scale=g, scheme=scheme_name, shape=shape, layout=layout,
                      profile=profile, spec=spec, dtype=dtype, pad_byte=pad_byte)
    return q


def _nbytes(a) -> int:
    if _fw.is_torch(a):
        return a.numel() * a.element_size()
    return int(a.nbytes)


def _scales_shape(lead: Tuple[int, ...], rows: int, cols: int, block: int, layout: str, nbytes: int):
    if layout == "linear":
        return lead + (cols,), None
    if layout == "swizzle-128x4":
        return (nbytes,), None
    groups = (cols + 3) // 4
    return (groups, nbytes // 4 // groups), "uint32"



_LAYOUT_DEFAULT_PAD = {"packed-u32": 127, "packed-u32:deepgemm": 0}


def _resolve_scheme(sch, rounding, scale_rule, block, two_level, pad, propagate_nonfinite, c, rotate, hadamard, seed,
                    profile=None):
    if (isinstance(sch, Scheme) and rounding is None and scale_rule is None and block is None and two_level is None
            and pad is None and propagate_nonfinite is None and c is None and rotate is None and hadamard is None
            and seed is None and profile is None):
        return sch
    return scheme(sch, rounding=rounding, scale_rule=scale_rule, block=block, two_level=two_level, pad=pad,
                  propagate_nonfinite=propagate_nonfinite, c=c, rotate=rotate, hadamard=hadamard, seed=seed,
                  profile=profile)


_ndarray, _empty, _U8 = np.ndarray, np.empty, np.dtype(np.uint8)
_F32, _BF16, _F16 = _fw._NP_OF[_fw.DT_F32], _fw._NP_OF[_fw.DT_BF16], _fw._NP_OF[_fw.DT_F16]
_quantize_c, _dequantize_c = _lofp.quantize, _lofp.dequantize

# (scheme name, shape, dtype code, threads) -> what the common quantize call needs, or False when
# that call takes the general path (an unknown name, K not a multiple of the block, ...).
_QUICK: dict = {}


def _quick_entry(scheme: str, shape: Tuple[int, ...], dt: int, threads: Optional[int]):
    try:
        sch = _make_scheme(scheme, None, None, None, None, None, None, None, None, None, None)
        k = shape[-1] if shape else 0
        rows = math.prod(shape[:-1])
        e = False
        if k and rows and k % sch.block == 0:
            lead = shape[:-1]
            fields = {"codes": None, "scales": None, "global_scale": None, "scheme": sch.name, "shape": shape,
                      "layout": "linear", "profile": None, "spec": sch, "dtype": _fw.dtype_name(dt), "pad_byte": 0}
            e = (sch.blob, lead + (k // sch.codes_per_byte,), lead + (k // sch.block,), _fw.NP_VIEW[sch.scale_view],
                 rows, k, _threads(threads, rows * k), fields)
    except (TypeError, ValueError):
        e = False
    if len(_QUICK) >= 512:
        _QUICK.clear()
    _QUICK[(scheme, shape, dt, threads)] = e
    return e


def quantize(x: Any, scheme: Union[str, Scheme] = "nvfp4", *, rounding: Optional[str] = None,
             scale_rule: Optional[str] = None, block: Optional[int] = None, two_level: Optional[bool] = None,
             rotate: Optional[bool] = None, c: Optional[float] = None, hadamard: Optional[str] = None,
             scale_layout: str = "linear", pad: Optional[bool] = None, pad_byte: Optional[int] = None,
             propagate_nonfinite: Optional[bool] = None, global_scale: Optional[float] = None,
             profile: Optional[str] = None, seed: Optional[int] = None, threads: Optional[int] = None,
             out: Optional[Tuple[Any, Any]] = None, method: str = "rtn", importance: Any = None,
             hessian: Any = None, damp: float = 0.01, act_order: bool = False,
             mse_scales: bool = False) -> QTensor:
    """Block-quantizes x (numpy array or torch tensor, CPU or CUDA) along its last dimension.

    x: float32, bfloat16 or float16, any shape [..., K] (leading dims are rows); float64 is rounded
       to float32 first and non-contiguous inputs are copied once (everything else is zero-copy).
    scheme: a preset name (lofp.SCHEMES) or a lofp.Scheme; the keyword options override it:
       rounding ('rne', 'ties-to-zero', 'ties-away', 'stochastic' with seed), scale_rule (MX:
       'floor', 'ceil', 'even', 'rceil'), block (MX granularity, a multiple of 32), two_level
       (NVFP4 per-tensor scale, default True), rotate / c / hadamard (UltraQuant), pad (zero-pad K
       to a whole block instead of failing), propagate_nonfinite (MX: scale 0xFF for a block with
       NaN/Inf; UltraQuant: zero group; otherwise NaN/Inf raise lofp.Error with the flat index).
    scale_layout: 'linear' (default), 'swizzle-128x4' (cuBLAS / torch._scaled_mm), 'packed-u32'
       (TileLang, pad_byte default 127), 'packed-u32:deepgemm' (pad 0).
    global_scale: NVFP4 only: use this per-tensor encode multiplier instead of computing it.
    profile: whose numerics to reproduce bit for bit: None / 'lofp' (lofp's own rules),
       'modelopt', 'compressed-tensors', 'torchao', 'ggml' (docs/CHECKPOINTS.md "Profiles"; CPU
       only; the QTensor's global_scale is then in that producer's direction).
    threads: CPU worker threads (None: 1 below 2^20 elements, else up to 16); never changes bits.
    out: (codes, scales) arrays to fill in place (zero-copy), exactly the sizes quantize would
       allocate (uint8 codes; 1-byte scales, or uint32 for packed layouts), C-contiguous.

    method: how codes and scales are chosen (docs/QUALITY.md); the result decodes the same way:
       'rtn' (default) the scale rule and round to nearest; 'mse' per block the scale code of least
       squared error among a window around the rule's (weighted by importance, K non-negative
       floats such as an imatrix diagonal); 'gptq' GPTQ over hessian, the [K, K] input Hessian
       X^T X of this layer (damp: relative diagonal damping, default 0.01; act_order: visit
       columns by descending diag; mse_scales: each block's scale by the MSE search, weighted by
       diag H, when the sweep fixes it). 'mse' and 'gptq' run on the CPU with a lofp profile and
       non-stochastic rounding; x's rows are output features for 'gptq'.

    Returns a QTensor in x's framework and on x's device. CUDA tensors are quantized on the GPU on
    torch's current stream, bit-identical to the CPU.

    >>> q = lofp.quantize(np.ones((4, 32), np.float32), "mxfp4")
    >>> q.codes.shape, q.scales.dtype
    ((4, 16), dtype(float8_e8m0fnu))
    """
    if threads is not None:
        _args.threads(threads)
    if (method == "rtn" and importance is None and hessian is None and damp == 0.01 and act_order is False
            and mse_scales is False
            and type(x) is _ndarray and type(scheme) is str and scale_layout == "linear" and rounding is None
            and scale_rule is None and block is None and two_level is None and rotate is None and c is None
            and hadamard is None and pad is None and pad_byte is None and propagate_nonfinite is None
            and global_scale is None and profile is None and seed is None):
        # The common call (a numpy array, a preset, linear scales): everything that depends only on
        # (scheme, shape, dtype, threads) comes from a cache and the extension checks the arrays.
        # Any failure falls through to the general path, which repeats the call and raises the
        # error with its usual message (outputs are fresh, or the caller's to be overwritten).
        xd = x.dtype
        dt = 1 if xd is _F32 else 2 if xd is _BF16 else 3 if xd is _F16 else 0
        if dt:
            e = _QUICK.get((scheme, x.shape, dt, threads))
            if e is None:
                e = _quick_entry(scheme, x.shape, dt, threads)
            if e:
                blob, cshape, sshape, sdt, rows, k, nt, fields = e
                try:
                    if out is None:
                        codes = _empty(cshape, _U8)
                        scales = _empty(sshape, sdt)
                    else:
                        codes, scales = out
                    g = _quantize_c(blob, dt, x, rows, k, codes, scales, None, nt)[0]
                except Exception:  # noqa: BLE001 -- whatever it was, the general path says it properly
                    pass
                else:
                    # the QTensor without the frozen dataclass's __init__ (one object.__setattr__
                    # per field): the same instance dict, filled from the cached fields
                    q = _QT_NEW(QTensor)
                    d = q.__dict__
                    d.update(fields)
                    d["codes"] = codes
                    d["scales"] = scales
                    d["global_scale"] = g
                    return q
    if isinstance(scheme, str) and rounding is None and scale_rule is None and block is None and two_level is None \
            and pad is None and propagate_nonfinite is None and c is None and rotate is None and hadamard is None \
            and seed is None and profile is None:
        sch = _make_scheme(scheme, None, None, None, None, None, None, None, None, None, None)
    else:
        sch = _resolve_scheme(scheme, rounding, scale_rule, block, two_level, pad, propagate_nonfinite, c, rotate,
                              hadamard, seed, profile)
    if scale_layout not in LAYOUTS:
        raise Error(f"not found: unknown scale layout '{scale_layout}' (linear, swizzle-128x4, packed-u32, packed-u32:deepgemm)")
    if pad_byte is not None and not (0 <= int(pad_byte) <= 254):
        raise Error(f"invalid argument: pad_byte must be 0..254 (0xFF is refused), got {pad_byte}")
    xr, dt, shape = _fw.dense_in(x)
    if len(shape) == 0:
        raise Error("invalid argument: x is a scalar; quantize needs at least one dimension (the blocked one)")
    k = int(shape[-1])
    lead = tuple(shape[:-1]) if type(shape) is tuple else tuple(int(d) for d in shape[:-1])
    rows = _fw.prod(lead)
    if rows == 0 or k == 0:
        raise Error(f"invalid argument: x is empty (shape {tuple(shape)})")
    kp = sch.padded_k(k)
    cols = kp // sch.block
    codes_shape = lead + (kp // sch.codes_per_byte,)
    alloc = _fw.Alloc(xr)
    if scale_layout == "linear":
        sbytes = rows * cols
    else:
        sbytes = _lofp.layout_bytes(rows, kp, sch.block, scale_layout)
    sshape, sview = _scales_shape(lead, rows, cols, sch.block, scale_layout, sbytes)
    sview = sview or sch.scale_view
    if out is not None:
        try:
            codes, scales = out
        except (TypeError, ValueError):
            raise Error("invalid argument: out must be a (codes, scales) pair") from None
        codes_raw = _fw.raw_out(codes, "out codes")
        scales_raw = _fw.raw_out(scales, "out scales")
    else:
        codes, codes_raw = alloc.bytes(codes_shape)
        scales, scales_raw = alloc.bytes(sshape, sview)
    pb = -1 if pad_byte is None else int(pad_byte)
    mid, imp, hes, dmp, ao, ms = _args.method_args(method, importance, hessian, damp, act_order, k, mse_scales)
    if mid and alloc.cuda:
        raise Error(f"unsupported: method={method!r} runs on the CPU; quantize a CPU tensor")
    if mid:
        nthreads = _threads(threads, rows * k)
        lin = scales_raw if scale_layout == "linear" else np.empty(rows * cols, np.uint8)
        g, _ = _lofp.quantize_method(sch.blob, dt, xr, rows, k, codes_raw, lin, global_scale, nthreads, mid, imp,
                                     hes, dmp, ao, ms)
        if scale_layout != "linear":
            _lofp.layout_convert(lin, rows, cols, "linear", scale_layout, pb, scales_raw)
        if alloc.torch is not None:
            g = alloc.torch.tensor(g, dtype=alloc.torch.float32)
    elif alloc.cuda:
        g = _quantize_cuda(sch, dt, xr, rows, k, scale_layout, codes_raw, scales_raw, global_scale, alloc)
    else:
        nthreads = _threads(threads, rows * k)
        if scale_layout == "linear":
            g, _, _ = _lofp.quantize(sch.blob, dt, xr, rows, k, codes_raw, scales_raw, global_scale, nthreads)
        else:
            lin = np.empty(rows * cols, np.uint8)
            g, _, _ = _lofp.quantize(sch.blob, dt, xr, rows, k, codes_raw, lin, global_scale, nthreads)
            _lofp.layout_convert(lin, rows, cols, "linear", scale_layout, pb, scales_raw)
        if alloc.torch is not None:
            g = alloc.torch.tensor(g, dtype=alloc.torch.float32)
    if pb < 0:
        pb = 127 if scale_layout == "packed-u32" else 0
    prof = None if sch.profile == "lofp" else sch.profile
    return _qtensor(codes, scales, g, sch.name, lead + (k,), scale_layout, prof, sch, _fw.dtype_name(dt), pb)


def _quantize_cuda(sch, dt, xr, rows, k, layout, codes_raw, scales_raw, global_scale, alloc):
    if sch.profile != "lofp":
        raise Error(f"unsupported: producer profiles ({sch.profile}) run on the CPU; quantize a CPU tensor")
    if not _lofp.HAVE_CUDA:
        raise Error("unsupported: this lofp build has no CUDA backend (build it where nvcc is found)")
    t = alloc.torch
    if layout not in ("linear", "swizzle-128x4", "packed-u32", "packed-u32:deepgemm"):
        raise Error(f"not found: unknown scale layout '{layout}'")
    ws = t.empty(_lofp.cuda_workspace_bytes(), dtype=t.uint8, device=alloc.device)
    gout = t.empty((), dtype=t.float32, device=alloc.device)
    stream = _fw.cuda_stream(alloc.device)
    gin = None if global_scale is None else float(global_scale)
    _lofp.cuda_quantize(sch.blob, dt, xr, rows, k, layout, codes_raw, scales_raw, gout if gin is None else None, ws,
                        stream, gin, True)
    if gin is not None:
        gout.fill_(gin if sch.name == "nvfp4" else 1.0)
    return gout


def _linear_scales(q: QTensor):
    """q's scales as a linear uint8 array (a view when they already are)."""
    s = _fw.raw_in(q.scales)
    if q.layout == "linear":
        return s
    rows, cols = q.rows, q.padded_k // q.spec.block
    lin = np.empty(rows * cols, np.uint8)
    if _fw.is_torch(s):
        s = s.cpu().view(_fw._torch().uint8) if s.dtype != _fw._torch().uint8 else s.cpu()
    _lofp.layout_convert(s, rows, cols, q.layout, "linear", -1, lin)
    return lin


_DT_QUICK = _fw._DT_CODES
_NP_OF = _fw._NP_OF
# (shape, threads) -> (rows, k, threads for C), or False for the general path.
_DQUICK: dict = {}


def _dquick_entry(shape, threads):
    try:
        k = int(shape[-1]) if len(shape) else 0
        rows = math.prod(shape[:-1])
        e = (rows, k, _threads(threads, rows * k)) if rows and k else False
    except (TypeError, ValueError):
        e = False
    if len(_DQUICK) >= 512:
        _DQUICK.clear()
    _DQUICK[(shape, threads)] = e
    return e


def dequantize(q: QTensor, dtype: Any = None, *, threads: Optional[int] = None, out: Any = None) -> Any:
    """Dequantizes a QTensor back to its logical shape (padding dropped).

    dtype: 'float32', 'bfloat16', 'float16' (or a numpy / torch dtype); None gives the dtype q was
    quantized from. Returns an array in q's framework and on its device; `out` (the right shape
    and dtype, contiguous) is filled in place instead. NVFP4: code * float(scale) / global;
    MX: code * 2^(e-127), scale 0xFF gives NaN; UltraQuant: byte 0 gives zeros, and the result
    stays in the rotated basis (apply lofp.hadamard to undo it). Bit-identical to the C library,
    on CPU and CUDA.
    """
    if threads is not None:
        _args.threads(threads)
    if out is not None and isinstance(q, QTensor):
        # The fast path would write a wrong-dtype array's bytes without complaint.
        _args.dense_out("out", out, tuple(q.shape), _NP_OF[_fw.dtype_code(q.dtype if dtype is None else dtype)])
    if type(q) is QTensor and type(q.codes) is _ndarray and q.layout == "linear":
        # The common call (numpy codes, linear scales, the dtype as a name): the extension checks
        # the arrays; any failure falls through to the general path and its error message.
        try:
            code = _DT_QUICK.get(q.dtype if dtype is None else dtype) if dtype is None or type(dtype) is str else None
            e = _DQUICK.get((q.shape, threads)) if code else False
            if e is None:
                e = _dquick_entry(q.shape, threads)
            if e:
                res = _empty(q.shape, _NP_OF[code]) if out is None else out
                _dequantize_c(q.spec.blob, q.codes, q.scales, q.global_scale if q.scheme == "nvfp4" else 1.0, e[0], e[1],
                              code, res, e[2])
                return res
        except Exception:  # noqa: BLE001 -- whatever it was, the general path says it properly
            pass
    if not isinstance(q, QTensor):
        raise Error(f"invalid argument: dequantize takes a lofp.QTensor, got {type(q).__name__}")
    code = _fw.dtype_code(q.dtype if dtype is None else dtype)
    rows, k = q.rows, q.k
    if rows == 0 or k == 0:
        raise Error(f"invalid argument: q is empty (shape {q.shape})")
    alloc = _fw.Alloc(q.codes)
    if out is not None:
        res, raw = out, _fw.raw_out(out, "out")
    else:
        res, raw = alloc.dense(tuple(q.shape), code)
    if alloc.cuda:
        if not _lofp.HAVE_CUDA:
            raise Error("unsupported: this lofp build has no CUDA backend")
        t = alloc.torch
        g = None
        if q.scheme == "nvfp4":
            g = q.global_scale
            if not (_fw.is_torch(g) and g.device == alloc.device):
                g = t.tensor(float(g), dtype=t.float32, device=alloc.device)
        _lofp.cuda_dequantize(q.spec.blob, _fw.raw_in(q.codes), _fw.raw_in(q.scales), q.layout, g, rows, k, code, raw,
                              _fw.cuda_stream(alloc.device))
        return res
    g = q.global_value if q.scheme == "nvfp4" else 1.0
    _lofp.dequantize(q.spec.blob, _fw.raw_in(q.codes), _linear_scales(q), g, rows, k, code, raw,
                     _threads(threads, rows * k))
    return res


# ---------------------------------------------------------------------------------------------
# Element codecs


def _elem_info(elem: str) -> dict:
    return _elem_info_cached(elem.lower())


@functools.lru_cache(maxsize=64)
def _elem_info_cached(elem: str) -> dict:
    return _lofp.elem_info(elem)


def encode(x: Any, elem: str, *, rounding: str = "rne", overflow: str = "saturate", rbits: Any = None) -> Any:
    """Encodes float32 values one by one as codes of element type `elem`.

    elem: e2m1 (fp4), e2m3, e3m2, e4m3, e5m2, e8m0, ue4m3, mxint8, bf16, fp16.
    rounding: rne (default), ties-to-zero, ties-away, stochastic (needs rbits: uint32 per value;
    a value rounds up iff rbits < frac * 2^32). overflow: 'saturate' (clamp to +-max) or 'ieee'
    (what ml_dtypes does: E4M3 -> NaN, E5M2/bf16/fp16 -> Inf). Returns codes of x's shape: uint8
    for types up to 8 bits (FP4/FP6 one code per byte, unpacked), uint16 for bf16/fp16.
    """
    info = _elem_info(elem)
    if rounding not in _ROUNDING_CODE:
        raise Error(f"not found: unknown rounding '{rounding}' (rne, ties-to-zero, ties-away, stochastic)")
    if overflow not in _OVERFLOW_CODE:
        raise Error(f"not found: unknown overflow '{overflow}' (saturate, ieee)")
    torch_in = _fw.is_torch(x)
    if torch_in:
        if x.device.type != "cpu":
            raise Error("unsupported: encode runs on the CPU; move the tensor with .cpu()")
        x = x.detach().float().contiguous().numpy()
    xa = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    cb = info["code_bytes"]
    out = np.empty(xa.shape, {1: np.uint8, 2: np.uint16, 4: np.uint32}[cb])
    rb = None
    if rbits is not None:
        rb = np.ascontiguousarray(np.asarray(rbits, dtype=np.uint32))
        if rb.shape != xa.shape:
            raise Error(f"invalid argument: rbits has shape {rb.shape}, x has {xa.shape}")
    _lofp.encode(elem.lower(), xa, out, _ROUNDING_CODE[rounding], _OVERFLOW_CODE[overflow], rb)
    if torch_in:
        import torch
        return torch.from_numpy(out.view(np.int16) if cb == 2 else out)
    return out


def decode(codes: Any, elem: str) -> Any:
    """Decodes codes of element type `elem` to float32 (exact). FP4/FP6 codes are one per byte
    (unpacked); bits above the type's width are ignored; E8M0 0x00 decodes to 2^-127."""
    info = _elem_info(elem)
    torch_in = _fw.is_torch(codes)
    if torch_in:
        codes = codes.detach().cpu().contiguous().numpy()
    ca = np.ascontiguousarray(np.asarray(codes))
    want = {1: np.uint8, 2: np.uint16, 4: np.uint32}[info["code_bytes"]]
    if ca.dtype.kind in "ui" and ca.dtype != want:
        ca = ca.astype(want)
    elif ca.dtype.itemsize == np.dtype(want).itemsize:
        ca = ca.view(want)
    else:
        raise Error(f"invalid argument: codes of {elem} are {np.dtype(want).name}, got {ca.dtype}")
    out = np.empty(ca.shape, np.float32)
    _lofp.decode(elem.lower(), ca, out)
    if torch_in:
        import torch
        return torch.from_numpy(out)
    return out


def elem_info(elem: str) -> dict:
    """Traits of an element type: bits, ebits, mbits, bias, max, min_subnormal, max_code, ..."""
    return dict(_elem_info(elem))


def nvfp4_global_scale(x: Any) -> Tuple[float, float]:
    """(encode multiplier fl(fl(1/amax)*2688), decode scale fl(amax/2688)) of a whole tensor
    (amax floored at 1e-12; NaN for non-finite input). The decode scale is ModelOpt's
    weight_scale_2."""
    xr, dt, _ = _fw.dense_in(x)
    if _fw.is_torch(xr) and xr.device.type != "cpu":
        xr = xr.cpu()
    return _lofp.nvfp4_scales(dt, xr)


def hadamard(x: Any, *, dense: bool = False) -> Any:
    """The normalised Walsh-Hadamard transform of each row (last dimension a power of two) as
    UltraQuant applies it (butterfly; dense=True: the reference's x @ H.T). Returns a new float32
    array (its own inverse: hadamard(hadamard(x)) undoes the rotation up to rounding)."""
    torch_in = _fw.is_torch(x)
    if torch_in:
        x = x.detach().float().cpu().numpy()
    a = np.array(x, dtype=np.float32, copy=True, order="C")
    if a.ndim == 0:
        raise Error("invalid argument: hadamard needs at least one dimension")
    _lofp.hadamard(a, a.shape[-1], bool(dense))
    if torch_in:
        import torch
        return torch.from_numpy(a)
    return a


def kernel_name(scheme_: Union[str, Scheme], op: str = "quantize") -> str:
    """The CPU kernel variant ('avx512', 'avx2' or 'generic') this process runs for scheme and op
    ('quantize' or 'dequantize'); LOFP_DISABLE_CPU_FEATURES, read once per process, masks the wider ones."""
    sch = scheme_ if isinstance(scheme_, Scheme) else scheme(scheme_)
    ops = {"quantize": 0, "dequantize": 1}
    if op not in ops:
        raise Error(f"not found: unknown op '{op}' (quantize, dequantize)")
    return _lofp.kernel_name(sch.blob, ops[op])


def replace(q: QTensor, **changes: Any) -> QTensor:
    """A copy of q with some fields replaced (dataclasses.replace)."""
    return dataclasses.replace(q, **changes)
