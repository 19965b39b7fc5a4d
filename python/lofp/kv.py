"""The UltraQuant FP4 paged KV cache (vLLM's `ultraquant` layout) and the attention that reads it,
with fp32 and bf16 caches as baselines (docs/KVCACHE.md).

    cache = lofp.kv.Cache(num_blocks=64, block_size=16, num_kv_heads=2, head_dim=128)
    cache.store(k, v, slot_mapping)            # k, v [tokens, Hk, D]; slot = block * block_size + row
    out = cache.decode(q, block_tables, seq_lens)   # q [seqs, Hq, D] -> fp32 [seqs, Hq, D]

A numpy cache runs on the CPU; a cache made with device='cuda' (torch) stores and attends on the
GPU with the CUDA backend, on torch's current stream.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from . import _args, _core, _fw, _lofp
from ._lofp import Error

__all__ = ["StoreReport", "Cache"]


@dataclass(frozen=True)
class StoreReport:
    """tokens stored, skipped (slot < 0) and groups of 32 zeroed for NaN/Inf (propagation)."""

    tokens_stored: int
    tokens_skipped: int
    zeroed_groups: int


def _ints(a: Any, dtype, what: str, alloc: Optional[_fw.Alloc] = None):
    """An integer index array as a contiguous array of `dtype` (copied when needed)."""
    a = _fw.foreign_cuda_as_torch(a)
    if _fw.is_torch(a):
        import torch
        tdt = {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64}[np.dtype(dtype)]
        if a.dtype.is_floating_point or a.dtype == torch.bool:
            raise Error(f"invalid argument: {what} must be integers, got {a.dtype}")
        if alloc is not None and alloc.cuda:
            if a.device != alloc.device:
                raise Error(f"invalid argument: {what} is on {a.device}, the cache on {alloc.device}")
        elif a.device.type != "cpu":
            a = a.cpu()
        return a.to(tdt).contiguous()
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise Error(f"invalid argument: {what} must be integers, got {arr.dtype}")
    if alloc is not None and alloc.cuda:
        import torch
        return torch.from_numpy(np.ascontiguousarray(arr, dtype)).to(alloc.device)
    return np.ascontiguousarray(arr, dtype)


class Cache:
    """A paged KV cache: uint8 [num_blocks, block_size, num_kv_heads, slot_bytes].

    format: 'ultraquant' (E2M1 codes + E8M0 scale per 32 values, K Hadamard-rotated: 136 B per
    slot at head_dim 128), 'fp32' or 'bf16' (baselines). c: the UltraQuant constant (0.156);
    hadamard: 'butterfly' (vLLM's store kernel, default) or 'dense'; rotate_k=False stores K
    unrotated (for tests). device: None or 'cpu' for a numpy cache, or a torch device
    ('cuda', 'cuda:1', torch.device('cpu')) for a torch cache there. `data` is the cache array.
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int, *,
                 format: str = "ultraquant", c: float = 0.156, hadamard: str = "butterfly", rotate_k: bool = True,
                 device: Any = None) -> None:
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.num_kv_heads, self.head_dim = int(num_kv_heads), int(head_dim)
        self.format, self.c, self.hadamard, self.rotate_k = format, float(c), hadamard, bool(_args.flag("rotate_k", rotate_k))
        for nm, v in (("num_blocks", num_blocks), ("block_size", block_size), ("num_kv_heads", num_kv_heads),
                      ("head_dim", head_dim)):
            if int(v) <= 0:
                raise Error(f"invalid argument: {nm} must be > 0, got {v}")
        self._desc, nbytes, self.slot_bytes, self.offsets = _lofp.kv_desc(
            format, self.head_dim, self.num_kv_heads, self.block_size, self.num_blocks, self.c, hadamard, self.rotate_k)
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.slot_bytes)
        if device is None or (isinstance(device, str) and device == "cpu"):
            self.data = np.zeros(shape, np.uint8)
            self._alloc = _fw.Alloc(self.data)
        else:
            import torch
            dev = torch.device(device)
            self.data = torch.zeros(shape, dtype=torch.uint8, device=dev)
            self._alloc = _fw.Alloc(self.data)
            if dev.type == "cuda":
                if not _lofp.HAVE_CUDA:
                    raise Error("unsupported: this lofp build has no CUDA backend")
                if format != "ultraquant" or hadamard != "butterfly" or not rotate_k:
                    raise Error("unsupported: the CUDA cache is UltraQuant with the butterfly K rotation")
                self._uq = _core.scheme("ultraquant", c=self.c)
        self._ws = None

    @property
    def device(self) -> str:
        """'cpu', or the torch device string of the cache ('cuda:0')."""
        return str(self.data.device) if _fw.is_torch(self.data) else "cpu"

    def __repr__(self) -> str:
        return (f"Cache({self.format}, blocks={self.num_blocks}x{self.block_size}, kv_heads={self.num_kv_heads}, "
                f"head_dim={self.head_dim}, slot={self.slot_bytes} B, device={self.device})")

    def _dense(self, x, what, tokens_dim=True):
        xr, dt, shape = _fw.dense_in(_fw.foreign_cuda_as_torch(x), what)
        if self._alloc.cuda:
            if not _fw.is_cuda(xr) or xr.device != self._alloc.device:
                raise Error(f"invalid argument: {what} must be a CUDA tensor on {self._alloc.device}")
        elif _fw.is_torch(xr) and xr.device.type != "cpu":
            raise Error(f"invalid argument: {what} is on {xr.device}, the cache on the CPU")
        return xr, dt, shape

    def store(self, k: Any, v: Any, slot_mapping: Any, *, propagate_nonfinite: bool = False) -> Optional[StoreReport]:
        """Writes K and V [tokens, Hk, D] (float32 / bfloat16 / float16) into the slots
        slot_mapping[t] (int, block * block_size + row; < 0 skips the token). UltraQuant K is
        rotated and encoded, V encoded, exactly as lofp.quantize(..., 'ultraquant') (bit for bit);
        duplicate slots: the later token wins. NaN/Inf raise lofp.Error (nothing written) unless
        propagate_nonfinite, which writes zero groups (CPU). Returns a StoreReport (CPU) or None
        (CUDA: asynchronous on the current stream)."""
        kr, kdt, kshape = self._dense(k, "k")
        vr, vdt, vshape = self._dense(v, "v")
        want = (self.num_kv_heads, self.head_dim)
        if len(kshape) != 3 or tuple(kshape[1:]) != want or tuple(vshape) != tuple(kshape):
            raise Error(f"shape: k and v must both be [tokens, {want[0]}, {want[1]}], got {tuple(kshape)} and {tuple(vshape)}")
        if kdt != vdt:
            raise Error("invalid argument: k and v must have the same dtype")
        nt = int(kshape[0])
        sm = _ints(slot_mapping, np.int64, "slot_mapping", self._alloc)
        if tuple(sm.shape) != (nt,):
            raise Error(f"shape: slot_mapping must be [{nt}], got {tuple(sm.shape)}")
        if self._alloc.cuda:
            if propagate_nonfinite:
                raise Error("unsupported: propagate_nonfinite is a CPU-cache option")
            _lofp.cuda_uq_store(self._uq.blob, kdt, kr, vr, nt, self.num_kv_heads, self.head_dim, sm, self.data,
                                self.block_size, _fw.cuda_stream(self._alloc.device))
            return None
        r = _lofp.kv_store(self._desc, self.data, kdt, kr, vr, nt, sm, 1 if propagate_nonfinite else 0)
        return StoreReport(*r)

    def gather(self, block_table: Any, num_tokens: int) -> Tuple[Any, Any]:
        """Reads positions [0, num_tokens) of one sequence back as fp32 (K, V), each
        [num_tokens, Hk, D]; UltraQuant K stays in the rotated basis (as vLLM's ultraquant_dequant).
        Runs on the CPU (a CUDA cache is copied to the host first)."""
        data = self.data
        if _fw.is_torch(data):
            data = data.cpu()
        bt = _ints(block_table, np.int32, "block_table")
        if _fw.is_torch(bt):
            bt = bt.cpu()
        shape = (int(num_tokens), self.num_kv_heads, self.head_dim)
        ko = np.empty(shape, np.float32)
        vo = np.empty(shape, np.float32)
        _lofp.kv_gather(self._desc, data, bt, int(num_tokens), ko, vo)
        if _fw.is_torch(self.data):
            import torch
            return torch.from_numpy(ko).to(self.data.device), torch.from_numpy(vo).to(self.data.device)
        return ko, vo

    def decode(self, q: Any, block_tables: Any, seq_lens: Any, *, scale: Optional[float] = None, sinks: Any = None,
               path: str = "auto", threads: int = 1, split_tokens: int = 0, max_seq_len: Optional[int] = None,
               num_splits: int = 0, out: Any = None) -> Any:
        """Decode attention, one query token per sequence: q [seqs, Hq, D] (raw, unrotated;
        Hq a multiple of Hk: GQA), block_tables int [seqs, max_blocks], seq_lens int [seqs].
        scale defaults to 1/sqrt(D); sinks [Hq] float32 logits join the softmax denominator only.
        CPU: path 'auto' | 'reference' | 'scalar' | 'avx2' | 'avx512', threads, split_tokens.
        CUDA: max_seq_len (host bound of seq_lens; read from seq_lens when None, which
        synchronises) and num_splits (0 = automatic). Returns fp32 [seqs, Hq, D]."""
        return self._attend(q, None, block_tables, seq_lens, scale, sinks, path, threads, split_tokens, max_seq_len,
                            num_splits, out)

    def prefill(self, q: Any, query_start_loc: Any, block_tables: Any, seq_lens: Any, *, scale: Optional[float] = None,
                sinks: Any = None, path: str = "auto", threads: int = 1, split_tokens: int = 0, out: Any = None) -> Any:
        """Causal attention of several query tokens per sequence (CPU): sequence b owns the rows
        [query_start_loc[b], query_start_loc[b+1]) of q [T, Hq, D], its last positions, whose K
        and V must already be stored. Returns fp32 [T, Hq, D]."""
        if self._alloc.cuda:
            raise Error("unsupported: prefill attention runs on the CPU cache")
        return self._attend(q, query_start_loc, block_tables, seq_lens, scale, sinks, path, threads, split_tokens,
                            None, 0, out)

    def _attend(self, q, qsl, block_tables, seq_lens, scale, sinks, path, threads, split, max_seq_len, num_splits, out):
        qr, qdt, qshape = self._dense(q, "q")
        if len(qshape) != 3 or int(qshape[2]) != self.head_dim:
            raise Error(f"shape: q must be [rows, Hq, {self.head_dim}], got {tuple(qshape)}")
        rows, hq = int(qshape[0]), int(qshape[1])
        if hq % self.num_kv_heads:
            raise Error(f"shape: query heads {hq} are not a multiple of the KV heads {self.num_kv_heads}")
        bt = _ints(block_tables, np.int32, "block_tables", self._alloc)
        if bt.ndim != 2:
            raise Error(f"shape: block_tables must be [seqs, max_blocks], got {tuple(bt.shape)}")
        ns = int(bt.shape[0])
        sl = _ints(seq_lens, np.int32, "seq_lens", self._alloc)
        if tuple(sl.shape) != (ns,):
            raise Error(f"shape: seq_lens must be [{ns}], got {tuple(sl.shape)}")
        scale = 1.0 / math.sqrt(self.head_dim) if scale is None else float(scale)
        sk = None
        if sinks is not None:
            sinks = _fw.foreign_cuda_as_torch(sinks)
            if _fw.is_torch(sinks):
                sk = sinks.detach().float().contiguous()
                if not self._alloc.cuda:
                    sk = sk.cpu()
            else:
                sk = np.ascontiguousarray(np.asarray(sinks, np.float32))
                if self._alloc.cuda:
                    import torch
                    sk = torch.from_numpy(sk).to(self._alloc.device)
        if out is None:
            res = self._alloc.empty((rows, hq, self.head_dim), np.float32)
        else:
            res = out
        raw = _fw.raw_out(res, "out")
        if self._alloc.cuda:
            if qsl is not None:
                raise Error("unsupported: prefill on CUDA")
            if rows != ns:
                raise Error(f"shape: decode takes one query row per sequence ({ns}), q has {rows}")
            import torch
            if qdt == _fw.DT_F16:
                qr, qdt = qr.float(), _fw.DT_F32
            mx = int(sl.max().item()) if max_seq_len is None else int(max_seq_len)
            maxb = int(bt.shape[1])
            wsb = _lofp.cuda_uq_attention_ws_bytes(maxb, mx, ns, hq, self.num_kv_heads, self.head_dim, self.block_size,
                                                   int(num_splits))
            ws = torch.empty(max(wsb, 1), dtype=torch.uint8, device=self._alloc.device)
            _lofp.cuda_uq_attention(qr, qdt, self.data, bt, maxb, sl, mx, ns, hq, self.num_kv_heads, self.head_dim,
                                    self.block_size, scale, sk, int(num_splits), raw, ws,
                                    _fw.cuda_stream(self._alloc.device))
            return res
        qsl_a = None
        if qsl is not None:
            qsl_a = _ints(qsl, np.int32, "query_start_loc")
            if tuple(qsl_a.shape) != (ns + 1,):
                raise Error(f"shape: query_start_loc must be [{ns + 1}], got {tuple(qsl_a.shape)}")
        elif rows != ns:
            raise Error(f"shape: decode takes one query row per sequence ({ns}), q has {rows}")
        data = self.data
        info = _lofp.attention(self._desc, data, ns, qsl_a, qdt, qr, bt, int(bt.shape[1]), sl, hq, scale, sk, path,
                               _args.int_range("threads", threads, 1, _args.MAX_THREADS), int(split), None, raw)
        self.last_report = {"path": info[0], "partitions": info[1], "saturated_q": info[2]}
        return res
