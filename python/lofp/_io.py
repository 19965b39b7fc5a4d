"""lofp files: .safetensors / .npy through the C library's reader and atomic writer, with the
quantized-tensor convention of `lofp quantize` (docs/CLI.md "File format")."""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import ml_dtypes
import numpy as np

from . import _core, _fw, _lofp
from ._core import QTensor
from ._lofp import Error

# safetensors dtype name -> numpy dtype (FP4 / FP6 are kept as their packed bytes, uint8)
_NP_OF_IO = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8), "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16), "U32": np.dtype(np.uint32), "I32": np.dtype(np.int32), "U64": np.dtype(np.uint64),
    "I64": np.dtype(np.int64), "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32), "F64": np.dtype(np.float64), "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2), "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz), "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "C64": np.dtype(np.complex64),
}
_IO_OF_NP = {v: k for k, v in _NP_OF_IO.items()}
_SRC_DTYPE = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float32"}
_SRC_IO = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def _read_all(path):
    h, fmt, tensors, meta = _lofp.file_open(os.fspath(path))
    arrays = {}
    for i, (name, dtn, shape, nbytes) in enumerate(tensors):
        raw = np.empty(nbytes, np.uint8)
        _lofp.file_read(h, i, raw)
        if dtn in ("F4", "F6_E2M3", "F6_E3M2"):
            # packed sub-byte elements: the bytes, last dimension in bytes
            if shape:
                bits = 4 if dtn == "F4" else 6
                last = shape[-1] * bits // 8 if len(shape) else nbytes
                arr = raw.reshape(tuple(shape[:-1]) + (last,)) if _fw.prod(shape[:-1]) * last == nbytes else raw
            else:
                arr = raw
        else:
            arr = raw.view(_NP_OF_IO[dtn]).reshape(shape)
        arrays[name] = (arr, dtn)
    return h, fmt, arrays, meta


def load(path: Union[str, os.PathLike], *, device: Any = None) -> Dict[str, Any]:
    """Reads a .safetensors or .npy file (validated completely by the C reader).

    Returns {name: value}: tensors written by `lofp quantize` or lofp.save (a 'lofp:NAME'
    metadata entry with NAME.codes, NAME.scales and NAME.global_scale) come back as one QTensor
    each; every other tensor as a numpy array (BF16 and FP8 as ml_dtypes arrays; F4 / F6 as their
    packed uint8 bytes). The file's other metadata is in result['__metadata__'] when present.
    device: None for numpy; a torch device ('cpu', 'cuda') for torch tensors.
    """
    h, fmt, arrays, meta = _read_all(path)
    out: Dict[str, Any] = {}
    used = set()
    other_meta = {}
    for key, value in meta:
        if not key.startswith("lofp:"):
            other_meta[key] = value
            continue
        name = key[5:]
        out[name] = _qtensor_from(h, path, name, arrays)
        used.update({f"{name}.codes", f"{name}.scales", f"{name}.global_scale"})
    for name, (arr, _) in arrays.items():
        if name not in used:
            out[name] = arr
    if device is not None:
        from . import torch as lt
        out = {k: (lt.to_device(v, device) if isinstance(v, QTensor) else lt.from_numpy(v, device)) for k, v in out.items()}
    if other_meta:
        out["__metadata__"] = other_meta
    return out


def _qtensor_from(h, path, name, arrays) -> QTensor:
    # the C library parses the metadata and checks every stored tensor against it
    # (lofp_qtensor_load): nothing here interprets the 'lofp:NAME' value
    d = _lofp.qfile_load(h, os.fspath(path), name)
    spec = _core._scheme_of_blob(d["scheme"])
    codes = arrays[d["codes"]][0].view(np.uint8)
    scales, sdt = arrays[d["scales"]]
    if sdt != "U32":
        scales = scales.view(np.uint8).view(_fw.NP_VIEW[spec.scale_view])
    shape = tuple(d["shape"])
    return QTensor(codes, scales, float(d["global"]), spec.name, shape, d["layout"],
                   None if spec.profile == "lofp" else spec.profile, spec, _SRC_DTYPE.get(d["source_dtype"], "float32"),
                   int(d["pad_byte"]))


def _host(a):
    if _fw.is_torch(a):
        import torch
        a = a.detach().cpu().contiguous()
        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if a.dtype.itemsize == 1 and a.dtype not in (torch.uint8, torch.int8, torch.bool):
            n = a.view(torch.uint8).numpy()
            name = str(a.dtype).replace("torch.", "")
            return n.view(_fw.NP_VIEW[name]) if name in _fw.NP_VIEW else n
        if a.dtype == torch.uint32:
            return a.view(torch.int32).numpy().view(np.uint32)
        return a.numpy()
    return np.ascontiguousarray(np.asarray(a))


def _describe(name: str, q: QTensor) -> Dict[str, Any]:
    """How q is stored under `name` (the C library's lofp_qtensor_* functions): metadata key and
    value, and the parts [(name, dtype, shape)] -- codes, scales, two-level NVFP4's global scale."""
    return _lofp.qfile_describe(name, q.spec.blob, q.layout, int(q.pad_byte), tuple(int(d) for d in q.shape),
                                int(q.padded_k), _SRC_IO.get(q.dtype, "F32"))


def meta_value(q: QTensor) -> str:
    """The 'lofp:NAME' metadata value of q (docs/CLI.md), as `lofp quantize` writes it."""
    return _describe("_", q)["meta"]


def save(path: Union[str, os.PathLike], tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes tensors atomically to a .safetensors (or a single-tensor .npy) file.

    QTensors are written as `lofp quantize` writes them (NAME.codes, NAME.scales,
    NAME.global_scale and a 'lofp:NAME' metadata entry), so `lofp dequantize`, `lofp inspect` and
    lofp.load read them back; numpy arrays and torch tensors are written as they are (BF16 and
    FP8 from their ml_dtypes / torch dtypes). The result is byte-identical to safetensors'
    serialize() for the same tensors and metadata.
    """
    entries = []
    meta = dict(metadata or {})
    for name, v in tensors.items():
        if not isinstance(name, str):
            raise Error(f"invalid argument: tensor names must be strings, got {name!r}")
        if isinstance(v, QTensor):
            d = _describe(name, v)
            bufs = [_host(v.codes).reshape(-1).view(np.uint8), _host(v.scales).reshape(-1).view(np.uint8),
                    np.array(v.global_value, np.float32)]
            for (pname, pdt, pshape), buf in zip(d["parts"], bufs):
                entries.append((pname, pdt, tuple(pshape), buf))
            meta[d["key"]] = d["meta"]
            continue
        a = _host(v)
        dtn = _IO_OF_NP.get(a.dtype)
        if dtn is None:
            raise Error(f"unsupported: tensor '{name}' has dtype {a.dtype}, which lofp files do not hold")
        raw = a.reshape(-1).view(np.uint8) if a.size else np.empty(0, np.uint8)
        entries.append((name, dtn, tuple(int(d) for d in a.shape), raw))
    items = [(str(k), str(v)) for k, v in meta.items()]
    _lofp.file_write(os.fspath(path), entries, items)
