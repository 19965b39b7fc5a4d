"""lofp for PyTorch: the kernels as torch custom operators (torch.library, with fake
implementations so torch.compile traces them without graph breaks), a W4A16 linear layer,
quantize_model, and conversions to and from torchao's NVFP4Tensor / MXTensor fields.

    import lofp.torch as lt
    model = lt.quantize_model(model, "nvfp4", exclude=["lm_head"])   # nn.Linear -> W4A16Linear
    y = torch.ops.lofp.quantize(x, "nvfp4", "linear")               # (codes, scales, global)

Tensors on CUDA run the CUDA backend on torch's current stream; CPU tensors the C library.
"""
from __future__ import annotations

import fnmatch
import math
from weakref import ref as _weakref
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from . import _args, _core, _fw, _gemm, _lofp
from ._core import QTensor
from ._lofp import Error

__all__ = ["W4A16Linear", "W4A8Linear", "quantize_model", "as_float4", "to_torchao", "from_torchao", "torchao_fields",
           "to_device", "from_numpy", "quantize", "dequantize"]

_SCALE_DTYPES = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e8m0fnu": torch.float8_e8m0fnu, "uint8": torch.uint8}


# --------------------------------------------------------------------------------------------
# Moving QTensors between numpy and torch devices


def from_numpy(a: Any, device: Any = "cpu") -> torch.Tensor:
    """A numpy array (ml_dtypes bfloat16 / float8 included) as a torch tensor on `device`."""
    if _fw.is_torch(a):
        return a.to(device)
    a = np.ascontiguousarray(a)
    name = a.dtype.name
    if name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    elif name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
        t = torch.from_numpy(a.view(np.uint8)).view(getattr(torch, name))
    elif a.dtype == np.uint32:
        t = torch.from_numpy(a.view(np.int32)).view(torch.uint32)
    else:
        t = torch.from_numpy(a)
    return t.to(device)


def to_device(q: QTensor, device: Any) -> QTensor:
    """q with codes, scales and global_scale as torch tensors on `device` (from numpy or any
    torch device)."""
    g = q.global_scale
    gt = g.to(device) if _fw.is_torch(g) else torch.tensor(float(g), dtype=torch.float32, device=device)
    return _core.replace(q, codes=from_numpy(q.codes, device), scales=from_numpy(q.scales, device), global_scale=gt)


def as_float4(q: QTensor) -> torch.Tensor:
    """q's packed FP4 codes viewed as torch.float4_e2m1fn_x2 (same bytes, last dim in bytes), the
    dtype torch._scaled_mm and torchao take."""
    if q.spec.elem != "e2m1":
        raise Error(f"invalid argument: {q.scheme} codes are not FP4")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        raise Error("unsupported: this torch has no float4_e2m1fn_x2 dtype")
    codes = q.codes if _fw.is_torch(q.codes) else from_numpy(q.codes)
    return codes.view(torch.float4_e2m1fn_x2)


def quantize(x: torch.Tensor, scheme: str = "nvfp4", **kw: Any) -> QTensor:
    """lofp.quantize (the same function; here for symmetry)."""
    return _core.quantize(x, scheme, **kw)


def dequantize(q: QTensor, dtype: Any = None, **kw: Any) -> torch.Tensor:
    """lofp.dequantize."""
    return _core.dequantize(q, dtype, **kw)


# --------------------------------------------------------------------------------------------
# Custom operators


def _shapes(x_shape: Sequence[int], scheme: str, block: int, pad: bool, layout: str):
    sch = _core.scheme(scheme, block=block if block > 0 else None, pad=pad)
    lead = tuple(int(d) for d in x_shape[:-1])
    k = int(x_shape[-1])
    kp = sch.padded_k(k)
    rows = _fw.prod(lead)
    cols = kp // sch.block
    codes = lead + (kp // sch.codes_per_byte,)
    nbytes = rows * cols if layout == "linear" else _lofp.layout_bytes(rows, kp, sch.block, layout)
    sshape, view = _core._scales_shape(lead, rows, cols, sch.block, layout, nbytes)
    if view == "uint32":
        sshape = sshape[:-1] + (sshape[-1] * 4,)
    return sch, codes, sshape


@torch.library.custom_op("lofp::quantize", mutates_args=())
def _op_quantize(x: torch.Tensor, scheme: str, scale_layout: str = "linear", rounding: str = "", scale_rule: str = "",
                 block: int = 0, two_level: bool = True, pad: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = _core.quantize(x, scheme, scale_layout=scale_layout, rounding=rounding or None, scale_rule=scale_rule or None,
                       block=block or None, two_level=two_level if scheme == "nvfp4" else None, pad=pad or None)
    scales = q.scales.view(torch.uint8)  # (uint32 words: the last dimension becomes bytes)
    return q.codes, scales, q.global_scale.to(x.device)


@_op_quantize.register_fake
def _(x, scheme, scale_layout="linear", rounding="", scale_rule="", block=0, two_level=True, pad=False):
    _, cshape, sshape = _shapes(x.shape, scheme, block, pad, scale_layout)
    return (x.new_empty(cshape, dtype=torch.uint8), x.new_empty(sshape, dtype=torch.uint8),
            x.new_empty((), dtype=torch.float32))


def _qtensor_of(codes, scales, global_scale, scheme, block, shape, layout, two_level=True):
    sch = _core.scheme(scheme, block=block if block > 0 else None, pad=None,
                       two_level=two_level if scheme == "nvfp4" else None)
    if int(shape[-1]) % sch.block:
        sch = _core.scheme(sch, pad=True)
    if layout.startswith("packed-u32"):
        scales = scales.view(torch.uint32)
    else:
        scales = scales.view(_SCALE_DTYPES[sch.scale_view])
    return QTensor(codes, scales, global_scale, sch.name, tuple(int(d) for d in shape), layout, None, sch, "float32",
                   127 if layout == "packed-u32" else 0)


@torch.library.custom_op("lofp::dequantize", mutates_args=())
def _op_dequantize(codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, scheme: str, block: int,
                   shape: List[int], scale_layout: str, dtype: torch.dtype, two_level: bool = True) -> torch.Tensor:
    q = _qtensor_of(codes, scales, global_scale, scheme, block, shape, scale_layout, two_level)
    return _core.dequantize(q, dtype)


@_op_dequantize.register_fake
def _(codes, scales, global_scale, scheme, block, shape, scale_layout, dtype, two_level=True):
    return codes.new_empty(tuple(shape), dtype=dtype)


# Prepared CUDA weights of W4A16Linear modules, by handle (the op's `handle` argument).
_CUDA_WEIGHTS: Dict[int, Any] = {}


def _cuda_weight(handle: int, q: QTensor, device: Any) -> "_gemm.CudaWeight":
    """The prepared CUDA weight of module `handle` on `device` (prepared and kept on first use)."""
    w = _CUDA_WEIGHTS.get(handle)
    if w is None or w.device != device:
        w = _gemm.CudaWeight(q)
        if handle >= 0:
            _CUDA_WEIGHTS[handle] = w
    return w


@torch.library.custom_op("lofp::w4a16_gemm", mutates_args=())
def _op_w4a16(a: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, scheme: str,
              n: int, k: int, handle: int = -1) -> torch.Tensor:
    q = _qtensor_of(codes, scales, global_scale, scheme, 0, (n, k), "linear")
    if a.device.type == "cuda":
        w = _cuda_weight(handle, q, a.device)
        out_dtype = torch.bfloat16 if a.dtype == torch.bfloat16 else torch.float32
        return _gemm.gemm(a, w, out_dtype=out_dtype).to(a.dtype)
    return _gemm.gemm(a, q).to(a.dtype)


@_op_w4a16.register_fake
def _(a, codes, scales, global_scale, scheme, n, k, handle=-1):
    return a.new_empty(tuple(a.shape[:-1]) + (n,))


def _need_w4a8_scheme(scheme: str) -> None:
    if scheme != "mxfp4":
        raise Error(f"unsupported: W4A8 (E4M3 activations) takes MXFP4 weights, not {scheme} (the FP8 kernel folds "
                    f"one scale per 32-element block; NVFP4's 16-element blocks give two)")


def _w4a8_emulate(a: torch.Tensor, q: QTensor) -> torch.Tensor:
    """W4A8 in torch on the CPU: a cast to bfloat16 (what the kernel reads), per-token scale
    amax / 448 in fp32 (1 for an all-zero row, NaN for a row holding Inf or NaN), codes
    (x / scale).to(float8_e4m3fn) (RNE), then the fp32 product of the codes and the dequantized
    weights times the token scale. The GPU sums each 128-element chunk of products in the FP8
    tensor core (truncating accumulation), so it is not bit-identical to this."""
    n, k = q.shape
    a2 = a.detach().reshape(-1, k).to(torch.bfloat16).float()
    amax = a2.abs().amax(dim=1, keepdim=True)
    scale = amax / 448.0
    scale = torch.where(amax == 0, torch.ones_like(scale), scale)
    scale = torch.where(torch.isfinite(amax), scale, torch.full_like(scale, float("nan")))
    codes = (a2 / scale).to(torch.float8_e4m3fn).float()
    w = _core.dequantize(q, "float32")
    w = w if _fw.is_torch(w) else torch.from_numpy(np.asarray(w))
    y = (codes @ w.t()) * scale
    return y.reshape(tuple(a.shape[:-1]) + (n,))


@torch.library.custom_op("lofp::w4a8_gemm", mutates_args=())
def _op_w4a8(a: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, scheme: str,
             n: int, k: int, handle: int = -1) -> torch.Tensor:
    _need_w4a8_scheme(scheme)
    q = _qtensor_of(codes, scales, global_scale, scheme, 0, (n, k), "linear")
    if a.device.type == "cuda":
        w = _cuda_weight(handle, q, a.device)
        out_dtype = torch.bfloat16 if a.dtype == torch.bfloat16 else torch.float32
        return _gemm._gemm_cuda_w4a8(a, w, out_dtype).to(a.dtype)
    if a.shape[-1] != k:
        raise Error(f"shape: a has K={a.shape[-1]}, the weights K={k}")
    return _w4a8_emulate(a, q).to(a.dtype)


@_op_w4a8.register_fake
def _(a, codes, scales, global_scale, scheme, n, k, handle=-1):
    return a.new_empty(tuple(a.shape[:-1]) + (n,))


@torch.library.custom_op("lofp::uq_store", mutates_args=("cache",))
def _op_uq_store(cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor, block_size: int,
                 c: float = 0.156) -> None:
    _cache_view(cache, k.shape[1], k.shape[2], block_size, c).store(k, v, slot_mapping)


@_op_uq_store.register_fake
def _(cache, k, v, slot_mapping, block_size, c=0.156):
    return None


@torch.library.custom_op("lofp::uq_decode_attention", mutates_args=())
def _op_uq_decode(q: torch.Tensor, cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                  num_kv_heads: int, block_size: int, scale: float, sinks: Optional[torch.Tensor] = None,
                  max_seq_len: int = -1, c: float = 0.156) -> torch.Tensor:
    view = _cache_view(cache, num_kv_heads, q.shape[-1], block_size, c)
    return view.decode(q, block_tables, seq_lens, scale=scale, sinks=sinks,
                       max_seq_len=None if max_seq_len < 0 else max_seq_len)


@_op_uq_decode.register_fake
def _(q, cache, block_tables, seq_lens, num_kv_heads, block_size, scale, sinks=None, max_seq_len=-1, c=0.156):
    return q.new_empty(tuple(q.shape), dtype=torch.float32)


def _cache_view(cache: torch.Tensor, hk: int, head_dim: int, block_size: int, c: float):
    from . import kv
    view = kv.Cache.__new__(kv.Cache)
    nb = cache.shape[0]
    view.num_blocks, view.block_size, view.num_kv_heads, view.head_dim = int(nb), int(block_size), int(hk), int(head_dim)
    view.format, view.c, view.hadamard, view.rotate_k = "ultraquant", float(c), "butterfly", True
    view._desc, nbytes, view.slot_bytes, view.offsets = _lofp.kv_desc("ultraquant", view.head_dim, view.num_kv_heads,
                                                                     view.block_size, view.num_blocks, view.c,
                                                                     "butterfly", True)
    if cache.numel() != nbytes or cache.dtype != torch.uint8 or not cache.is_contiguous():
        raise Error(f"invalid argument: cache must be a contiguous uint8 tensor of {nbytes} bytes "
                    f"[blocks, {block_size}, {hk}, {view.slot_bytes}]")
    view.data = cache
    view._alloc = _fw.Alloc(cache)
    view._ws = None
    if cache.device.type == "cuda":
        view._uq = _core.scheme("ultraquant", c=view.c)
    return view


def new_uq_cache(num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int, device: Any = "cpu") -> torch.Tensor:
    """A zeroed UltraQuant cache tensor for the lofp::uq_store / lofp::uq_decode_attention ops."""
    slot = _lofp.kv_desc("ultraquant", head_dim, num_kv_heads, block_size, num_blocks, 0.156, "butterfly", True)[2]
    return torch.zeros((num_blocks, block_size, num_kv_heads, slot), dtype=torch.uint8, device=device)


# --------------------------------------------------------------------------------------------
# The eager fast path of W4A16Linear / W4A8Linear
#
# Through the dispatcher a custom op costs tens of microseconds of Python per call, more than a
# decode GEMV takes on the GPU. In plain eager mode the layers therefore call the extension
# directly: the weight is prepared once, the output comes from torch's caching allocator, and the
# kernel gets raw pointers and torch's current stream (the same kernel and arguments as the op,
# so the same bits). Anything that records or transforms the call -- torch.compile (dynamo),
# torch.jit.trace, a TorchDispatchMode (FakeTensorMode, make_fx, export), functorch transforms,
# tensor subclasses, autograd -- takes the registered op instead, which those understand.

_Tensor = torch.Tensor
_BF16, _F32 = torch.bfloat16, torch.float32
_FAST_DTYPES = (torch.bfloat16, torch.float32, torch.float16)

# dynamo treats is_compiling() as the constant True while it traces, so a compiled forward
# never reaches the fast path (nor reads anything of it); it is also the cheapest of the checks.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
if _is_compiling is None:  # torch < 2.3
    import torch._dynamo
    _is_compiling = torch._dynamo.is_compiling
_no_mode = getattr(torch._C, "_len_torch_dispatch_stack", None)
_functorch = getattr(torch._C, "_are_functorch_transforms_active", None)
_jit_tracing = getattr(torch._C, "_is_tracing", None) or torch.jit.is_tracing


def _recorded() -> bool:
    """True when torch is recording or transforming the ops run now (a dispatch mode, jit
    trace, vmap / grad); then the layers go through the registered op."""
    if _no_mode is None or _no_mode():
        return True  # (a torch without the query: always the op)
    return _jit_tracing() or (_functorch is not None and _functorch())


def _raw_stream_getter():
    # torch._C._cuda_getCurrentRawStream(device_index) gives torch's current stream as an int
    # (about 0.1 us; Triton's launcher and Inductor's generated code call it). The public
    # torch.cuda.current_stream(i).cuda_stream builds a torch.cuda.Stream first (a few us), so it
    # is only the fallback for a torch without the private one.
    f = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if f is not None:
        return f
    return lambda index: torch.cuda.current_stream(index).cuda_stream


_raw_stream = _raw_stream_getter()

# The fast path's W4A8 activation reuse: a transformer applies several W4A8 layers to one tensor in
# a row (q / k / v, gate / up). The last call's workspace, which holds that tensor's E4M3 codes,
# serves the next call while it gets the same tensor object (a weak reference: the entry dies with
# it), unchanged (torch's version counter, bumped by every in-place torch op), with the same k on
# the same stream; lofp_cuda_w4a8_gemm_reuse then skips the quantize when its route reads the
# order the workspace holds. A write that bypasses torch (a raw kernel on data_ptr()) is not seen:
# forget_w4a8_activation() drops the entry. One entry per process: (weakref, version, k, stream,
# workspace, state).
_W8_LAST = None


def _w8_forget(ref) -> None:
    # the weak reference's callback: its tensor is gone
    global _W8_LAST
    last = _W8_LAST
    if last is not None and last[0] is ref:
        _W8_LAST = None


def forget_w4a8_activation() -> None:
    """Makes the next W4A8Linear call quantize its activation even when it is the tensor the last
    call quantized. Needed only after writing into that tensor behind torch's back (a raw kernel
    on its data_ptr(), or through .data), which torch's version counter does not see; releases the
    workspace held for the reuse. Not thread-safe against concurrent W4A8 calls."""
    global _W8_LAST
    _W8_LAST = None


# --------------------------------------------------------------------------------------------
# W4A16Linear, W4A8Linear


class W4A16Linear(torch.nn.Module):
    """y = x W^T + b with W held as NVFP4 / MXFP4 (4.5 / 4.25 bits per weight) and x in 16 or 32
    bits: lofp's CPU GEMM (fp32 accumulation) on the CPU, the W4A16 GEMV/GEMM kernels (bf16
    tensor cores) on CUDA. Build one with from_linear(), from_qtensor() or from_checkpoint().

    forward is the lofp::w4a16_gemm custom op whenever torch records the call (torch.compile,
    which keeps it in the graph, torch.jit.trace, export, dispatch modes, vmap/grad, tensor
    subclasses, inputs that require grad). In plain eager mode on CUDA it calls the kernel
    directly, bit-identical and on the same stream, for about a fifth of the op's host time
    (10-12 against 56-58 us measured on an H100 host).
    The weight is prepared for the GPU on the first CUDA call and again after .to() /
    load_state_dict() / assigning codes, scales, global_scale or bias."""

    _ACT8 = False

    def __init__(self, q: QTensor, bias: Optional[torch.Tensor] = None) -> None:
        super().__init__()
        if len(q.shape) != 2:
            raise Error(f"invalid argument: the weight must be 2-D [out, in], got {q.shape}")
        if q.scheme not in ("nvfp4", "mxfp4") or q.layout != "linear":
            raise Error(f"unsupported: {type(self).__name__} takes NVFP4 / MXFP4 weights with linear scales, got "
                        f"{q.scheme} / {q.layout}")
        if q.spec.pad:
            raise Error("unsupported: in_features must be a multiple of the block")
        self.out_features, self.in_features = int(q.shape[0]), int(q.shape[1])
        self.scheme = q.scheme
        dev = q.device if q.device != "cpu" else "cpu"
        self.register_buffer("codes", from_numpy(q.codes, dev).view(torch.uint8))
        self.register_buffer("scales", from_numpy(q.scales, dev).view(torch.uint8))
        g = q.global_scale
        self.register_buffer("global_scale", g.detach().to(dev).float().reshape(()) if _fw.is_torch(g)
                             else torch.tensor(float(g), dtype=torch.float32, device=dev))
        self.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None
        self._handle = id(self)
        self.__dict__["_fast"] = None

    @classmethod
    def from_qtensor(cls, q: QTensor, bias: Optional[torch.Tensor] = None) -> "W4A16Linear":
        """The layer of an NVFP4 / MXFP4 QTensor [out, in] with linear scales (its buffers on q's
        device), plus an optional bias."""
        return cls(q, bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, scheme: str = "nvfp4", **kw: Any) -> "W4A16Linear":
        """Quantizes linear.weight with lofp.quantize(scheme, **kw) (on its device)."""
        w = linear.weight.detach()
        q = _core.quantize(w, scheme, **kw)
        return cls(q, linear.bias)

    @classmethod
    def from_checkpoint(cls, tensors: Dict[str, Any], prefix: str, format: str = "auto") -> "W4A16Linear":
        """Builds the layer from a checkpoint's tensors (a dict, e.g. safetensors' load_file or
        lofp.load) under `prefix` ('model.layers.0.mlp.down_proj'):
          modelopt            PREFIX.weight (uint8 [n, k/2]), .weight_scale (float8_e4m3fn
                              [n, k/16]), .weight_scale_2 (fp32 decode scale)
          compressed-tensors  PREFIX.weight_packed, .weight_scale, .weight_global_scale (encode)
          lofp                PREFIX.weight as a QTensor (lofp.load) or .codes/.scales/.global_scale
        format 'auto' picks by the names present. PREFIX.bias is used when present."""
        def get(name):
            v = tensors.get(f"{prefix}.{name}")
            return None if v is None else (v if isinstance(v, QTensor) else from_numpy(v) if not _fw.is_torch(v) else v)

        bias = get("bias")
        if format == "auto":
            if isinstance(tensors.get(f"{prefix}.weight"), QTensor):
                format = "lofp"
            elif f"{prefix}.weight_packed" in tensors:
                format = "compressed-tensors"
            elif f"{prefix}.weight_scale_2" in tensors:
                format = "modelopt"
            elif f"{prefix}.weight.codes" in tensors:
                format = "lofp"
            else:
                raise Error(f"not found: no NVFP4 weight under '{prefix}' (modelopt, compressed-tensors or lofp names)")
        if format == "lofp":
            w = tensors.get(f"{prefix}.weight")
            if not isinstance(w, QTensor):
                raise Error(f"not found: '{prefix}.weight' is not a lofp QTensor (load the file with lofp.load)")
            return cls(w, bias)
        if format == "modelopt":
            codes, scales, s2 = get("weight"), get("weight_scale"), get("weight_scale_2")
            g = _lofp.encode_from_decode(float(s2.float().reshape(-1)[0]))
        elif format == "compressed-tensors":
            codes, scales, gs = get("weight_packed"), get("weight_scale"), get("weight_global_scale")
            g = float(gs.float().reshape(-1)[0])
        else:
            raise Error(f"not found: unknown checkpoint format '{format}' (modelopt, compressed-tensors, lofp)")
        if codes is None or scales is None:
            raise Error(f"not found: missing weight tensors under '{prefix}' ({format})")
        n, kh = codes.shape
        k = 2 * int(kh)
        sch = _core.scheme("nvfp4")
        if tuple(scales.shape) != (n, k // 16):
            raise Error(f"shape: '{prefix}' scales are {tuple(scales.shape)}, expected {(n, k // 16)} (linear NVFP4)")
        q = QTensor(codes.view(torch.uint8).contiguous(), scales.view(torch.float8_e4m3fn).contiguous(),
                    torch.tensor(g, dtype=torch.float32, device=codes.device), "nvfp4", (int(n), k), "linear", None, sch,
                    "bfloat16", 0)
        return cls(q, bias)

    def qtensor(self) -> QTensor:
        """The weight as a QTensor (sharing the module's buffers)."""
        sch = _core.scheme(self.scheme)
        return QTensor(self.codes, self.scales.view(_SCALE_DTYPES[sch.scale_view]), self.global_scale, self.scheme,
                       (self.out_features, self.in_features), "linear", None, sch, "float32", 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] (float32 / bfloat16 / float16) -> [..., out] in x's dtype (see the class
        docstring for when the custom op runs and when the kernel is called directly)."""
        if not _is_compiling() and type(x) is _Tensor and not x.requires_grad and not _recorded():
            f = self._fast
            if f is None or x.get_device() != f[0]:
                f = self._prepare_fast(x)
            if f is not None and x.dtype in _FAST_DTYPES and x.dim() and x.shape[-1] == f[3]:
                y = self._run_fast(x, f)
                if y is not None:
                    return y
        op = torch.ops.lofp.w4a8_gemm if self._ACT8 else torch.ops.lofp.w4a16_gemm
        y = op(x, self.codes, self.scales, self.global_scale, self.scheme, self.out_features, self.in_features,
               self._handle)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y

    def _run_fast(self, x, f):
        # the op's arithmetic, step for step: bf16 activations, bf16 output for bf16 input and
        # fp32 otherwise (then cast to x's dtype), then y + bias in y's dtype
        dt = x.dtype
        a = x if dt is _BF16 else x.to(_BF16)
        if not a.is_contiguous():
            a = a.contiguous()
        k = f[3]
        shp = x.shape
        if len(shp) == 2:  # (the common case without the torch.Size slice and concatenation)
            m, oshape = shp[0], (shp[0], f[2])
        else:
            m, oshape = a.numel() // k, shp[:-1] + (f[2],)
        if m == 0:
            return None  # (the op says what an empty input gives)
        if dt is _BF16:
            y, code = a.new_empty(oshape), _fw.DT_BF16
        else:
            y, code = a.new_empty(oshape, dtype=_F32), _fw.DT_F32
        if f[5]:
            global _W8_LAST
            st = _raw_stream(f[0])
            last, held = _W8_LAST, 0
            if last is not None and last[0]() is a and last[1] == a._version and last[2] == k and last[3] == st:
                ws, held = last[4], last[5]
            else:
                ws = a.new_empty((_lofp.cuda_w4a8_workspace_bytes(m, k),), dtype=torch.uint8)  # (stream-ordered)
            _W8_LAST = None  # (a failing call may leave the workspace half rewritten)
            held = _lofp.cuda_w4a8_gemm_ptr(f[1], a.data_ptr(), m, code, y.data_ptr(), ws.data_ptr(), ws.numel(), held,
                                            st)
            _W8_LAST = (_weakref(a, _w8_forget), a._version, k, st, ws, held)
        else:
            _lofp.cuda_w4a16_gemm_ptr(f[1], a.data_ptr(), m, code, y.data_ptr(), _raw_stream(f[0]))
        if dt is not _BF16 and dt is not _F32:
            y = y.to(dt)
        b = f[4]
        if b is not None:
            y.add_(b if b.dtype is y.dtype else b.to(y.dtype))  # (y is ours: in place, same sum as y + b)
        return y

    def _prepare_fast(self, x):
        """The per-module state of the fast path for CUDA input x (None when x is not on the
        weights' GPU): (device index, prepared weight, n, k, bias, W4A8)."""
        dev = x.get_device()
        codes = self.codes
        if dev < 0 or type(codes) is not _Tensor or codes.get_device() != dev or not _lofp.HAVE_CUDA:
            return None
        if self._ACT8:
            _need_w4a8_scheme(self.scheme)
        w = _cuda_weight(self._handle, self.qtensor(), codes.device)
        f = (dev, w._h, self.out_features, self.in_features, self.bias, self._ACT8)
        self.__dict__["_fast"] = f
        return f

    def _forget_prepared(self) -> None:
        # the weight changed place or value: prepare again on the next call (both paths)
        self.__dict__["_fast"] = None
        _CUDA_WEIGHTS.pop(self.__dict__.get("_handle"), None)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in ("codes", "scales", "global_scale", "bias"):
            self._forget_prepared()

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_fast"] = None  # (holds the prepared weight, which is not copied)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__["_handle"] = id(self)  # a copy prepares its own weight
        self.__dict__["_fast"] = None

    def _apply(self, fn, *args, **kw):
        r = super()._apply(fn, *args, **kw)
        self._forget_prepared()
        return r

    def _load_from_state_dict(self, *args, **kw):
        super()._load_from_state_dict(*args, **kw)
        self._forget_prepared()

    def extra_repr(self) -> str:
        """The shape, scheme and bias, for repr(module)."""
        return f"in_features={self.in_features}, out_features={self.out_features}, scheme={self.scheme}, bias={self.bias is not None}"

    def __del__(self):
        _CUDA_WEIGHTS.pop(getattr(self, "_handle", None), None)


class W4A8Linear(W4A16Linear):
    """A W4A16Linear whose activations are rounded to FP8 E4M3 per token before the product
    (opt-in: it costs accuracy). MXFP4 weights only (NVFP4 is refused); on CUDA the W4A8 kernel
    (lofp_cuda_w4a8_gemm: FP8 tensor cores, sm_90a, faster prefill than W4A16) runs through the
    lofp::w4a8_gemm custom op, or directly in eager mode as W4A16Linear does. Its error against
    the product with unrounded activations is a few percent (relative Frobenius, docs/CUDA.md
    "W4A8") where W4A16's is about 1e-7.

    On the CPU the op emulates the arithmetic in torch: per-token scale amax / 448 (fp32),
    codes (x / scale).to(float8_e4m3fn) with round-to-nearest-even, the fp32 product of the codes
    and the dequantized weights, times the scale. The GPU sums each 128-element chunk in the FP8
    tensor core (truncating accumulation), so CPU and GPU results are close but not
    bit-identical.

    Eager CUDA calls on the same bf16 tensor in a row (q / k / v, gate / up) quantize it once:
    the next call reuses the workspace of the last while the tensor object and its version
    counter are unchanged (lofp_cuda_w4a8_gemm_reuse; the same bits as quantizing again). See
    forget_w4a8_activation() for writes torch does not count."""

    _ACT8 = True

    def __init__(self, q: QTensor, bias: Optional[torch.Tensor] = None) -> None:
        _need_w4a8_scheme(q.scheme)
        super().__init__(q, bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, scheme: str = "mxfp4", **kw: Any) -> "W4A8Linear":
        """Quantizes linear.weight with lofp.quantize(scheme, **kw) (MXFP4 only)."""
        _need_w4a8_scheme(scheme if isinstance(scheme, str) else scheme.name)
        w = linear.weight.detach()
        q = _core.quantize(w, scheme, **kw)
        return cls(q, linear.bias)

    def extra_repr(self) -> str:
        """The shape, scheme, bias and activation format, for repr(module)."""
        return super().extra_repr() + ", activations=e4m3"


def quantize_model(model: torch.nn.Module, scheme: str = "nvfp4", *, exclude: Iterable[str] = (),
                   include: Optional[Iterable[str]] = None, activations: Optional[str] = None,
                   **kw: Any) -> torch.nn.Module:
    """Replaces every nn.Linear of `model` (in place) by a W4A16Linear with `scheme` weights,
    except those whose qualified name matches a glob of `exclude` (or, when `include` is given,
    does not match one of it) and those whose in_features is not a multiple of the block (left
    as they are). activations="e4m3" makes them W4A8Linear instead (MXFP4 weights only; the
    activations are rounded to FP8 per token, see W4A8Linear); None keeps them in 16 bits.
    Returns the model."""
    if activations not in (None, "e4m3"):
        raise Error(f"invalid argument: activations is None (16-bit, W4A16) or 'e4m3' (W4A8), got {activations!r}")
    cls = W4A16Linear
    if activations == "e4m3":
        _need_w4a8_scheme(scheme)
        cls = W4A8Linear
    exclude = _args.patterns("exclude", exclude)
    include = None if include is None else _args.patterns("include", include)
    block = _core.scheme(scheme).block if "block" not in kw else int(kw["block"])
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if not isinstance(child, torch.nn.Linear):
                continue
            if any(fnmatch.fnmatchcase(full, p) for p in exclude):
                continue
            if include is not None and not any(fnmatch.fnmatchcase(full, p) for p in include):
                continue
            if child.in_features % block:
                continue
            setattr(mod, child_name, cls.from_linear(child, scheme, **kw))
    return model


# --------------------------------------------------------------------------------------------
# torchao


def torchao_fields(q: QTensor) -> Dict[str, Any]:
    """The fields of the torchao tensor holding the same numbers as q: NVFP4Tensor (qdata uint8
    packed, scale float8_e4m3fn [M, K/16], per_tensor_scale = the decode scale, block_size 16)
    or MXTensor (qdata, scale float8_e8m0fnu [..., K/32], elem_dtype, block_size). Scales in
    swizzle-128x4 give is_swizzled_scales=True."""
    if q.layout not in ("linear", "swizzle-128x4"):
        raise Error(f"unsupported: torchao reads linear or swizzled scales, not {q.layout}")
    q = to_device(q, q.device) if not _fw.is_torch(q.codes) else q
    sw = q.layout == "swizzle-128x4"
    if q.scheme == "nvfp4":
        pts = None
        if q.spec.two_level:
            pts = torch.tensor(q.decode_scale, dtype=torch.float32, device=q.codes.device)
        return {"kind": "NVFP4Tensor", "qdata": q.codes, "scale": q.scales.view(torch.float8_e4m3fn),
                "per_tensor_scale": pts, "block_size": 16, "orig_dtype": getattr(torch, q.dtype),
                "is_swizzled_scales": sw}
    elem = {"mxfp4": getattr(torch, "float4_e2m1fn_x2", torch.uint8), "mxfp8-e4m3": torch.float8_e4m3fn,
            "mxfp8-e5m2": torch.float8_e5m2}.get(q.scheme)
    if elem is None:
        raise Error(f"unsupported: torchao has no tensor for {q.scheme}")
    qdata = q.codes if q.scheme == "mxfp4" else q.codes.view(elem)
    return {"kind": "MXTensor", "qdata": qdata, "scale": q.scales.view(torch.float8_e8m0fnu), "elem_dtype": elem,
            "block_size": q.spec.block, "orig_dtype": getattr(torch, q.dtype), "is_swizzled_scales": sw}


def to_torchao(q: QTensor) -> Any:
    """A torchao NVFP4Tensor / MXTensor holding q's numbers (needs torchao); see torchao_fields."""
    f = torchao_fields(q)
    try:
        if f["kind"] == "NVFP4Tensor":
            from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor
            return NVFP4Tensor(f["qdata"], f["scale"], f["block_size"], f["orig_dtype"],
                               per_tensor_scale=f["per_tensor_scale"], is_swizzled_scales=f["is_swizzled_scales"])
        from torchao.prototype.mx_formats.mx_tensor import MXTensor
        return MXTensor(f["qdata"], f["scale"], f["elem_dtype"], f["block_size"], f["orig_dtype"],
                        is_swizzled_scales=f["is_swizzled_scales"])
    except ImportError:
        raise Error("unsupported: torchao is not installed (lofp.torch.torchao_fields gives the fields)") from None


def from_torchao(t: Any, shape: Optional[Sequence[int]] = None) -> QTensor:
    """A QTensor from a torchao NVFP4Tensor / MXTensor (or a dict of its fields, as
    torchao_fields gives). The per-tensor decode scale becomes the encode global fl(1/pts), so
    lofp.dequantize divides where torchao multiplies: values can differ in the last bit."""
    get = (lambda k, d=None: t.get(k, d)) if isinstance(t, dict) else (lambda k, d=None: getattr(t, k, d))
    qdata, scale = get("qdata"), get("scale")
    if qdata is None or scale is None:
        raise Error("invalid argument: not a torchao NVFP4Tensor / MXTensor (no qdata / scale)")
    sw = bool(get("is_swizzled_scales", False))
    layout = "swizzle-128x4" if sw else "linear"
    orig = get("orig_dtype", torch.float32)
    dtn = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(orig, "float32")
    block = int(get("block_size", 32))
    codes = qdata.view(torch.uint8)
    if scale.dtype == torch.float8_e4m3fn or (isinstance(t, dict) and t.get("kind") == "NVFP4Tensor"):
        pts = get("per_tensor_scale")
        two = pts is not None
        g = _lofp.encode_from_decode(float(pts.float().reshape(-1)[0])) if two else 1.0
        sch = _core.scheme("nvfp4", two_level=two)
        k = codes.shape[-1] * 2
        shp = tuple(shape) if shape is not None else tuple(codes.shape[:-1]) + (k,)
        return QTensor(codes, scale.view(torch.float8_e4m3fn), torch.tensor(g, dtype=torch.float32, device=codes.device),
                       "nvfp4", shp, layout, None, sch, dtn, 0)
    elem = get("elem_dtype")
    if elem == torch.float8_e4m3fn:
        name, k = "mxfp8-e4m3", codes.shape[-1]
    elif elem == torch.float8_e5m2:
        name, k = "mxfp8-e5m2", codes.shape[-1]
    else:
        name, k = "mxfp4", codes.shape[-1] * 2
    sch = _core.scheme(name, block=block)
    shp = tuple(shape) if shape is not None else tuple(codes.shape[:-1]) + (k,)
    return QTensor(codes, scale.view(torch.float8_e8m0fnu), torch.tensor(1.0, device=codes.device), name, shp, layout,
                   None, sch, dtn, 0)
