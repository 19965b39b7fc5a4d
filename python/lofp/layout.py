"""Scale layouts: the byte orders GPU kernels read block scales in, and naming a buffer's layout.

linear          row-major [rows, cols] bytes (what lofp.quantize computes)
swizzle-128x4   cuBLAS / CUTLASS SWIZZLE_32_4_4, zero padded (torch._scaled_mm's blocked scales)
packed-u32      TileLang group-major 32-bit words, rows' = rows, pad byte 127
packed-u32:deepgemm  DeepGEMM group-major words, rows' = round_up(rows, 4), pad byte 0

docs/LAYOUTS.md gives every byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from . import _core, _fw, _lofp
from ._core import QTensor, Scheme
from ._lofp import Error

LAYOUTS = _core.LAYOUTS

__all__ = ["required_bytes", "convert_scales", "convert", "Diagnosis", "diagnose", "repack_fp4", "LAYOUTS"]


def required_bytes(rows: int, k: int, block: int, layout: str) -> int:
    """Bytes a scale buffer of `layout` needs for a [rows, k] tensor with one scale per `block`
    elements (equals PyTorch's numel check for swizzle-128x4)."""
    return _lofp.layout_bytes(int(rows), int(k), int(block), layout)


def _check_layout(name: str) -> None:
    if name not in LAYOUTS:
        raise Error(f"not found: unknown scale layout '{name}' (linear, swizzle-128x4, packed-u32, packed-u32:deepgemm)")


def convert_scales(scales: Any, rows: int, cols: int, src: str, dst: str, *, pad_byte: Optional[int] = None) -> np.ndarray:
    """Re-lays raw scale bytes of a [rows, cols] scale matrix from layout `src` to `dst`
    (numpy in, numpy uint8 out)."""
    _check_layout(src)
    _check_layout(dst)
    a = _fw.raw_in(scales)
    if _fw.is_torch(a):
        a = a.cpu()
    out = np.empty(_lofp.layout_bytes(int(rows), int(cols), 1, dst), np.uint8)
    _lofp.layout_convert(a, int(rows), int(cols), src, dst, -1 if pad_byte is None else int(pad_byte), out)
    return out


def convert(q: QTensor, to: str, *, pad_byte: Optional[int] = None) -> QTensor:
    """A QTensor with q's scales re-laid in layout `to` (codes shared, not copied).

    For packed-u32 layouts `pad_byte` fills the padding (default 127 TileLang, 0 DeepGEMM; 0xFF
    is refused). The scales stay in q's framework and on its device (converted on the CPU)."""
    if not isinstance(q, QTensor):
        raise Error(f"invalid argument: convert takes a lofp.QTensor, got {type(q).__name__}")
    _check_layout(to)
    if pad_byte is not None and not (0 <= int(pad_byte) <= 254):
        raise Error(f"invalid argument: pad_byte must be 0..254 (0xFF is refused), got {pad_byte}")
    rows, cols = q.rows, q.padded_k // q.spec.block
    raw = convert_scales(q.scales, rows, cols, q.layout, to, pad_byte=pad_byte)
    lead = tuple(q.shape[:-1])
    shape, view = _core._scales_shape(lead, rows, cols, q.spec.block, to, raw.nbytes)
    view = view or q.spec.scale_view
    if view == "uint32":
        arr = raw.view(np.uint32).reshape(shape)
    else:
        arr = raw.reshape(shape).view(_fw.NP_VIEW[view])
    if _fw.is_torch(q.codes):
        import torch
        t = torch.from_numpy(raw).to(q.codes.device)
        arr = t.view(torch.uint32).reshape(shape) if view == "uint32" else t.reshape(shape).view(getattr(torch, view))
    pb = -1 if pad_byte is None else int(pad_byte)
    if pb < 0:
        pb = 127 if to == "packed-u32" else 0
    return _core.replace(q, scales=arr, layout=to, pad_byte=pb)


@dataclass(frozen=True)
class Diagnosis:
    """What lofp.layout.diagnose found (lofp_layout_diagnosis)."""

    layout: str
    reversed_bytes: bool
    row_major_words: bool
    block: int
    matches: bool
    mismatched_bytes: int
    evidence: str

    def __str__(self) -> str:
        verdict = ("" if self.matches else "NO MATCH; closest is ") + self.layout
        if self.reversed_bytes:
            verdict += ", bytes reversed (MSB-first)"
        verdict += f", granularity {self.block}"
        if self.row_major_words:
            verdict += ", row-major words"
        return f"{self.evidence}\nverdict: {verdict}"


def diagnose(scales: Any, x: Any, scheme: Union[str, Scheme], *, block: Optional[int] = None,
             alt_block: Optional[int] = None, scale_rule: Optional[str] = None) -> Diagnosis:
    """Names the layout, byte order and granularity a scale buffer was written in.

    scales: the raw scale bytes as some other program wrote them (any dtype; its bytes are read).
    x: the tensor they belong to, [..., K]. x is quantized with `scheme` at granularity `block`
    (and `alt_block`, e.g. block=128, alt_block=32, to recognise "written at 32, read at 128")
    to know what the scales should be, then lofp_layout_diagnose compares. Same as
    `lofp layout diagnose`. Returns a Diagnosis (matches=False when no candidate reproduces the
    buffer: `layout` is then the closest)."""
    sch = _core.scheme(scheme, block=block, scale_rule=scale_rule, pad=True)
    xr, dt, shape = _fw.dense_in(x)
    if _fw.is_torch(xr):
        xr = xr.cpu()
    if len(shape) == 0:
        raise Error("invalid argument: x is a scalar")
    k = int(shape[-1])
    rows = _fw.prod(shape[:-1])
    expected = _quant_scales(sch, dt, xr, rows, k)
    exp_alt = None
    if alt_block:
        sch2 = _core.scheme(sch, block=int(alt_block))
        exp_alt = _quant_scales(sch2, dt, xr, rows, k)
    buf = scales
    if _fw.is_torch(buf):
        buf = buf.detach().cpu().contiguous()
        buf = buf.view(-1).view(__import__("torch").uint8) if buf.dtype.itemsize == 1 else buf.reshape(-1).view(__import__("torch").uint8)
    else:
        buf = np.ascontiguousarray(np.asarray(buf)).reshape(-1).view(np.uint8)
    d = _lofp.diagnose(buf, rows, k, sch.block, expected, int(alt_block or 0), exp_alt)
    return Diagnosis(**d)


def _quant_scales(sch: Scheme, dt: int, xr: Any, rows: int, k: int) -> np.ndarray:
    kp = sch.padded_k(k)
    codes = np.empty(rows * kp // sch.codes_per_byte, np.uint8)
    sc = np.empty(rows * (kp // sch.block), np.uint8)
    _lofp.quantize(sch.blob, dt, xr, rows, k, codes, sc, None, 1)
    return sc


def repack_fp4(codes: Any, k: int, block: int, src: str = "standard", dst: str = "gguf") -> np.ndarray:
    """Re-packs FP4 codes [rows, k/2] between nibble orders: 'standard' (element 2i in the low
    nibble, torch float4_e2m1fn_x2) and 'gguf' (llama.cpp: low = j, high = j + block/2)."""
    orders = {"standard": 0, "gguf": 1}
    if src not in orders or dst not in orders:
        raise Error("not found: nibble orders are 'standard' and 'gguf'")
    a = _fw.raw_in(codes)
    if _fw.is_torch(a):
        a = a.cpu().numpy()
    a = np.ascontiguousarray(a)
    rows = a.size // (int(k) // 2) if k >= 2 else 0
    out = np.empty_like(a, dtype=np.uint8)
    _lofp.fp4_repack(a, out, rows, int(k), int(block), orders[src], orders[dst])
    return out
