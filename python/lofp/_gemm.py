"""Block-scaled GEMM: C[m, n] = A[m, k] . B[n, k]^T with quantized weights B (docs/GEMM.md),
the fp64 reference, and verify_gemm (the CLI's `lofp verify`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from . import _core, _fw, _lofp
from ._core import QTensor, Scheme
from ._lofp import Error


@dataclass(frozen=True, eq=False)
class PackedWeight:
    """Weights pre-arranged for the CPU GEMM kernels (layout "x8": 8 rows interleaved per
    32-element superblock; E2M1 schemes only). Make one with lofp.pack_weight(q)."""

    data: np.ndarray
    spec: Scheme
    n: int
    k: int
    global_scale: float
    scheme: str = "nvfp4"


def pack_weight(q: QTensor) -> PackedWeight:
    """Packs a 2-D QTensor [n, k] (NVFP4 or MXFP4, any scale layout) into the x8 layout the fast
    CPU GEMV/GEMM kernels read; lofp.gemm(a, packed) then skips the re-arrangement."""
    _need_2d(q, "b")
    if q.device != "cpu":
        raise Error("unsupported: pack_weight runs on the CPU")
    n, k = q.shape
    nbytes = _lofp.weight_packed_bytes(q.spec.blob, n, k, "x8")
    out = np.empty(nbytes, np.uint8)
    _lofp.weight_pack(q.spec.blob, _np(q.codes), _core._linear_scales(q), n, k, "x8", out, False)
    return PackedWeight(out, q.spec, n, k, q.global_value if q.scheme == "nvfp4" else 1.0, q.scheme)


def _np(a):
    a = _fw.raw_in(a)
    if _fw.is_torch(a):
        a = a.cpu()
    return a


def _need_2d(q: Any, what: str) -> None:
    if not isinstance(q, QTensor):
        raise Error(f"invalid argument: {what} must be a lofp.QTensor, got {type(q).__name__}")
    if len(q.shape) != 2:
        raise Error(f"invalid argument: {what} must be 2-D [rows, K], got shape {q.shape}")


def _b_tuple(b):
    if isinstance(b, PackedWeight):
        return (b.spec.blob, "x8", b.data, None, b.global_scale), b.n, b.k
    _need_2d(b, "b")
    if b.device != "cpu":
        raise Error("invalid argument: b is on a GPU; pass a CUDA activation to run the W4A16 GPU GEMM")
    n, k = b.shape
    g = b.global_value if b.scheme == "nvfp4" else 1.0
    return (b.spec.blob, "rows", _np(b.codes), _core._linear_scales(b), g), n, k


def gemm(a: Any, b: Union[QTensor, PackedWeight], *, a_quant: Union[None, str, Scheme] = None,
         threads: Optional[int] = None, out: Any = None, out_dtype: Any = None) -> Any:
    """C = A . B^T in float32, B quantized weights [n, k] (a QTensor or a PackedWeight).

    a: dense [..., k] float32 / bfloat16 / float16 (W4A16: fp32 accumulation), or a QTensor
    [m, k]. a_quant: quantize dense A on the fly first ('mxint8' -> integer W4A8 kernels,
    'nvfp4' -> W4A4, 'mxfp8-e4m3' -> fp32 kernels on the dequantized values); the codes are the
    ones lofp.quantize would give. NVFP4 per-tensor globals are applied once, at the end. The
    result is bit-identical for every thread count; docs/GEMM.md says when it is exact.

    CUDA: when a is a CUDA torch tensor and b an NVFP4 / MXFP4 QTensor on the same GPU (linear
    scales, k % 128 == 0, n % 16 == 0), the W4A16 GEMV/GEMM kernels run on torch's current stream
    (a is cast to bfloat16; out_dtype float32 (default) or bfloat16). Returns [..., n].
    """
    a = _fw.foreign_cuda_as_torch(a)
    if _fw.is_cuda(a) or (isinstance(b, QTensor) and b.device != "cpu"):
        return _gemm_cuda(a, b, out=out, out_dtype=out_dtype)
    bt, n, k = _b_tuple(b)
    alloc = _fw.Alloc(a)
    if isinstance(a, QTensor):
        _need_2d(a, "a")
        m, ka = a.shape
        if ka != k:
            raise Error(f"shape: a has K={ka} but b has K={k}")
        aq = (a.spec.blob, "rows", _np(a.codes), _core._linear_scales(a), a.global_value if a.scheme == "nvfp4" else 1.0)
        args = (m, n, k, None, 1, None, aq)
        lead = (m,)
        alloc = _fw.Alloc(a.codes)
    else:
        ar, dt, shape = _fw.dense_in(a, "a")
        if len(shape) == 0 or int(shape[-1]) != k:
            raise Error(f"shape: a has shape {tuple(shape)}, b has K={k}")
        lead = tuple(int(d) for d in shape[:-1])
        m = _fw.prod(lead)
        aqs = None
        if a_quant is not None:
            aqs = (a_quant if isinstance(a_quant, Scheme) else _core.scheme(a_quant)).blob
        args = (m, n, k, ar, dt, aqs, None)
    if out is not None:
        res, raw = out, _fw.raw_out(out, "out")
    else:
        res = alloc.empty(lead + (n,), np.float32)
        raw = res
    _lofp.gemm(*args, bt, raw, _core._threads(threads, m * n * k // 64), False)
    return res


def gemm_reference(a: Any, b: QTensor, *, a_quant: Union[None, str, Scheme] = None) -> np.ndarray:
    """The fp64 reference of gemm (lofp_gemm_ref): sum_k deq(A) deq(B) in double, divided by the
    NVFP4 globals once. Slow and obvious on purpose. Returns float64 numpy [m, n]."""
    bt, n, k = _b_tuple(b)
    if isinstance(a, QTensor):
        _need_2d(a, "a")
        m = a.shape[0]
        aq = (a.spec.blob, "rows", _np(a.codes), _core._linear_scales(a), a.global_value if a.scheme == "nvfp4" else 1.0)
        args = (m, n, k, None, 1, None, aq)
    else:
        ar, dt, shape = _fw.dense_in(a, "a")
        if _fw.is_torch(ar):
            ar = ar.cpu()
        m = _fw.prod(shape[:-1])
        aqs = None if a_quant is None else (a_quant if isinstance(a_quant, Scheme) else _core.scheme(a_quant)).blob
        args = (m, n, k, ar, dt, aqs, None)
    out = np.empty((m, n), np.float64)
    _lofp.gemm(*args, bt, out, 1, True)
    return out


# --------------------------------------------------------------------------------------------
# CUDA W4A16


class CudaWeight:
    """NVFP4 / MXFP4 weights pre-arranged on the GPU for the W4A16 kernels (lofp_cuda_w4).
    Build once with lofp.cuda_weight(q) and reuse: lofp.gemm(a, w) then only launches."""

    def __init__(self, q: QTensor) -> None:
        _need_2d(q, "weight")
        if not _lofp.HAVE_CUDA:
            raise Error("unsupported: this lofp build has no CUDA backend")
        if q.scheme not in ("nvfp4", "mxfp4") or q.layout != "linear":
            raise Error(f"unsupported: W4A16 takes NVFP4 / MXFP4 weights with linear scales, got {q.scheme} / {q.layout}")
        if q.device == "cpu":
            raise Error("invalid argument: move the QTensor to the GPU first (lofp.torch.to_device(q, 'cuda'))")
        import torch
        dev = q.codes.device
        g = None
        if q.scheme == "nvfp4":
            g = q.global_scale
            if not (_fw.is_torch(g) and g.device == dev):
                g = torch.tensor(float(g), dtype=torch.float32, device=dev)
        n, k = q.shape
        self.n, self.k, self.device, self.scheme = n, k, dev, q.scheme
        self._h = _lofp.cuda_w4_prepare(q.spec.blob, _fw.raw_in(q.codes), _fw.raw_in(q.scales), g, n, k,
                                        _fw.cuda_stream(dev))

    def __repr__(self) -> str:
        return f"CudaWeight({self.scheme}, n={self.n}, k={self.k}, device={self.device})"


def cuda_weight(q: QTensor) -> CudaWeight:
    """Prepares q (on a CUDA device) for the W4A16 GEMM; see CudaWeight."""
    return CudaWeight(q)


def _cuda_rows(a, w, not_cuda: str):
    """Checks a CUDA activation tensor a [..., k] against the prepared weight w and returns
    (leading shape, a as contiguous bf16 rows [m, k]): what both GPU GEMMs read."""
    import torch
    if not _fw.is_cuda(a):
        raise Error(f"invalid argument: {not_cuda}")
    if a.device != w.device:
        raise Error(f"invalid argument: a is on {a.device}, the weights on {w.device}")
    if a.shape[-1] != w.k:
        raise Error(f"shape: a has K={a.shape[-1]}, the weights K={w.k}")
    a2 = a.detach().reshape(-1, w.k)
    if a2.dtype != torch.bfloat16:
        a2 = a2.to(torch.bfloat16)
    return tuple(a.shape[:-1]), a2.contiguous()


def _gemm_cuda(a, b, *, out=None, out_dtype=None):
    import torch
    w = b if isinstance(b, CudaWeight) else CudaWeight(b)
    lead, a2 = _cuda_rows(a, w, "the weights are on a GPU but a is not a CUDA tensor")
    odt = torch.float32 if out_dtype is None else out_dtype
    code = _fw.dtype_code(odt)
    if code not in (_fw.DT_F32, _fw.DT_BF16):
        raise Error("invalid argument: W4A16 output is float32 or bfloat16")
    m = a2.shape[0]
    res = out if out is not None else torch.empty(lead + (w.n,), dtype=odt, device=a.device)
    _lofp.cuda_w4a16_gemm(w._h, a2, m, code, _fw.raw_out(res, "out"), _fw.cuda_stream(a.device))
    return res


def _gemm_cuda_w4a8(a, w, out_dtype):
    """C = A . W^T on the FP8 tensor cores: a's rows quantized per token to E4M3 (lofp_cuda_w4a8_gemm,
    MXFP4 weights, sm_90a), the workspace taken from torch's caching allocator on the current
    stream. out_dtype float32 or bfloat16."""
    import torch
    lead, a2 = _cuda_rows(a, w, "W4A8 on the GPU needs a CUDA tensor a")
    m = a2.shape[0]
    if m == 0:
        raise Error("invalid argument: a has no rows")
    code = _fw.dtype_code(out_dtype)
    if code not in (_fw.DT_F32, _fw.DT_BF16):
        raise Error("invalid argument: W4A8 output is float32 or bfloat16")
    res = torch.empty(lead + (w.n,), dtype=out_dtype, device=a.device)
    ws = torch.empty(_lofp.cuda_w4a8_workspace_bytes(m, w.k), dtype=torch.uint8, device=a.device)
    _lofp.cuda_w4a8_gemm(w._h, a2, m, code, res, ws, _fw.cuda_stream(a.device))
    return res


# --------------------------------------------------------------------------------------------
# verify_gemm


@dataclass(frozen=True)
class VerifyResult:
    """What verify_gemm found: `error` is the relative Frobenius error of C against the fp64
    reference; when it exceeds the tolerance, `candidates` lists (mistake, error) for each
    usual mistake tried and `explained` names the one that reproduces C (None if none does)."""

    error: float
    tol: float
    ok: bool
    explained: Optional[str] = None
    closest: Optional[str] = None
    closest_error: float = float("inf")
    candidates: Tuple[Tuple[str, float], ...] = field(default=())

    def __str__(self) -> str:
        lines = [f"relative Frobenius error vs the fp64 reference: {self.error:.3e} (tolerance {self.tol:.1e})"]
        if self.ok:
            lines.append("OK")
            return "\n".join(lines)
        for d, e in self.candidates:
            lines.append(f"  {d:<72s} -> {e:.3e}")
        if self.explained:
            lines.append(f"explained: {self.explained} (error {self.closest_error:.3e})")
        else:
            lines.append(f"no single known mistake explains it (closest: {self.closest}, {self.closest_error:.3e})")
        return "\n".join(lines)


def _verify_operand(q: QTensor):
    # the scales go as stored (any layout): the check re-reads them the ways a consumer could
    codes = np.ascontiguousarray(_np(q.codes)).reshape(-1).view(np.uint8)
    raw = np.ascontiguousarray(_np(q.scales)).reshape(-1).view(np.uint8)
    g = q.global_value if q.scheme == "nvfp4" else 1.0
    return (q.spec.blob, codes, raw, q.layout, q.rows, q.k, float(g))


def verify_gemm(a: QTensor, b: QTensor, c: Any, *, tol: float = 1e-2, threads: Optional[int] = None) -> VerifyResult:
    """Checks a GEMM result C[M, N] = A . B^T that another program computed from quantized A [M, K]
    and B [N, K] against the fp64 product of the dequantized operands (globals applied once).
    When the relative Frobenius error exceeds `tol`, recomputes the product under each usual
    mistake (either operand's scales read in another layout, packed words byte-reversed or
    row-major, MX scales written at 32 and read at 128, FP4 codes in GGUF order or with swapped
    nibbles, the per-tensor scale missing or inverted) and names the one that reproduces C.
    The check is the C library's lofp_gemm_verify, the same one `lofp verify` prints; C is read
    as float32, as the command line reads it. threads: for the fp64 products (the result does
    not depend on it)."""
    _need_2d(a, "a")
    _need_2d(b, "b")
    M, K = a.shape
    N, Kb = b.shape
    if Kb != K:
        raise Error(f"shape: A has K={K} but B has K={Kb}")
    if _fw.is_torch(c):
        c = c.detach().float().cpu().numpy()
    cf = np.asarray(c)
    if cf.dtype.kind not in "fV":  # "V": bfloat16 from ml_dtypes
        raise Error(f"invalid argument: c is not floating point ({cf.dtype})")
    if cf.size != M * N:
        raise Error(f"shape: c has {cf.size} elements, expected M*N = {M}*{N}")
    cf = np.ascontiguousarray(cf, dtype=np.float32).reshape(-1)
    nt = _core._threads(threads, M * N * K // 64)
    r = _lofp.gemm_verify(_verify_operand(a), _verify_operand(b), cf, float(tol), nt)
    if r["ok"]:
        return VerifyResult(r["error"], r["tol"], True)
    cands = tuple((d, e) for d, e in r["candidates"])
    closest, closest_error = cands[r["closest"]] if r["closest"] >= 0 else ("none", float("inf"))
    return VerifyResult(r["error"], r["tol"], False, closest if r["explained"] else None, closest, closest_error, cands)
