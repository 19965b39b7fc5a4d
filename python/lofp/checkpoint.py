"""Whole checkpoints (include/lofp/checkpoint.h, docs/CHECKPOINTS.md): convert a Hugging Face
model directory or a GGUF into the formats inference engines load, import any of them back to
dense safetensors, and read their tensors. Thin wrappers: the C converter does the work (GIL
released), its error messages come back as lofp.Error."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Union

import numpy as np

from . import _args, _core, _fw, _lofp
from ._core import QTensor
from ._io import _NP_OF_IO
from ._lofp import Error

FORMATS = ("modelopt", "compressed-tensors", "gpt-oss", "gguf", "lofp")
_IMPORT_DTYPES = {"bfloat16": "BF16", "bf16": "BF16", "float16": "F16", "f16": "F16", "float32": "F32", "f32": "F32"}

PathLike = Union[str, "os.PathLike[str]"]
_MAX_JOBS = 256      # LOFP_CKPT_MAX_JOBS, include/lofp/checkpoint.h
_MAX_THREADS = 256   # LOFP_CKPT_MAX_THREADS


def _count(name: str, v: Any, hi: int) -> int:
    """An integer option in 1..hi; anything else (a bool, a float, a string, -1, 10**6) raises
    lofp.Error instead of wrapping around in the C call."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise Error(f"invalid argument: {name} must be an integer 1..{hi}, got {v!r}")
    if not 1 <= v <= hi:
        raise Error(f"invalid argument: {name} {v} is out of range (1..{hi})")
    return v


def _path(name: str, p: Any) -> str:
    s = os.fspath(p)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if not s:
        raise Error(f"invalid argument: the {name} path is empty")
    return s


def convert(src: PathLike, dst: PathLike, to: str = "modelopt", scheme: Optional[str] = None, *,
            include: Iterable[str] = (), exclude: Iterable[str] = (), fuse_scales: bool = True, pad: bool = False,
            input_scales: Optional[PathLike] = None, jobs: int = 1, threads: int = 1,
            requantize_unfit: bool = False, profile: Optional[str] = None) -> List[str]:
    """Converts the model at `src` (a directory, one .safetensors file, or a .gguf for to='gguf')
    into `dst`, as `lofp convert --to TO` does (byte-identical output).

    to: 'modelopt' (scheme 'nvfp4' or 'mxfp8'), 'compressed-tensors' ('nvfp4', 'mxfp4'),
    'gpt-oss' ('mxfp4'), 'gguf' ('mxfp4', 'nvfp4'); scheme None is the format's default.
    include / exclude: fnmatch globs over tensor names (exclude wins); fuse_scales=False gives
    every NVFP4 tensor its own per-tensor scale; pad zero-pads K instead of refusing a tensor;
    input_scales: a JSON file of activation amaxes (NVFP4 W4A4 configs). An already-quantized
    `src` (modelopt, compressed-tensors, gpt-oss, lofp files) is cast exactly instead of requantized
    ('lofp' is then a target too): codes and block scales copied, the NVFP4 per-tensor scale
    converted, MXFP4 -> NVFP4 by the closed form; blocks that do not fit raise lofp.Error unless
    requantize_unfit=True requantizes them alone. profile: whose numerics quantize (None or 'lofp':
    lofp's own; 'modelopt' with to='modelopt', 'compressed-tensors' with to='compressed-tensors'
    (nvfp4), 'ggml' with to='gguf': the file then equals what that tool writes, fused groups
    included; other pairs raise lofp.Error). Returns the converter's note lines (what was left
    unquantized and why, the casts' reports). jobs and threads are integers 1..256; `dst` must not
    be `src`, lie inside it or contain it, nor be a symbolic link (lofp.Error otherwise)."""
    if to not in FORMATS and to != "ct":
        raise Error(f"not found: unknown checkpoint format '{to}' (modelopt, compressed-tensors, gpt-oss, gguf, lofp)")
    src_s, dst_s = _path("input", src), _path("output", dst)
    jobs, threads = _count("jobs", jobs, _MAX_JOBS), _count("threads", threads, _MAX_THREADS)
    include, exclude = _args.patterns("include", include), _args.patterns("exclude", exclude)
    pad, fuse_scales = bool(_args.flag("pad", pad)), bool(_args.flag("fuse_scales", fuse_scales))
    return _lofp.ckpt_convert(src_s, dst_s, to, scheme, include,
                              exclude, not fuse_scales, pad,
                              None if input_scales is None else os.fspath(input_scales), jobs, threads,
                              bool(_args.flag("requantize_unfit", requantize_unfit)), None if profile is None else str(profile))


def import_checkpoint(src: PathLike, dst: PathLike, dtype: str = "bfloat16") -> List[str]:
    """Imports any readable checkpoint (modelopt, compressed-tensors, gpt-oss, gguf, lofp files)
    to a dense safetensors model directory in `dtype` (bfloat16, float16, float32), each format
    dequantized the way its own consumers decode it, as `lofp import` does. A missing or inverted
    per-tensor scale raises lofp.Error ('mismatch'). Returns the note lines."""
    dt = _IMPORT_DTYPES.get(str(dtype))
    if dt is None:
        raise Error(f"invalid argument: import dtype is bfloat16, float16 or float32, got '{dtype}'")
    return _lofp.ckpt_import(_path("input", src), _path("output", dst), dt)


def _scheme_from_blob(blob: bytes) -> _core.Scheme:
    return _core._scheme_of_blob(blob)


class Checkpoint:
    """An open checkpoint (lofp_ckpt): `format`, `description`, the logical tensor names
    (`names`, iteration, `in`), and per tensor `info(name)`, `get(name)` (a QTensor in lofp's
    convention for quantized tensors, whatever the file stores, else a numpy array) and
    `dequantize(name, dtype)` (as the format's consumers decode it)."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._h, self.format, self.description, self._n = _lofp.ckpt_open(self.path)
        self._index: Optional[Dict[str, int]] = None

    def _idx(self) -> Dict[str, int]:
        if self._index is None:
            self._index = {_lofp.ckpt_tensor(self._h, i, None, None, None)["name"]: i for i in range(self._n)}
        return self._index

    @property
    def names(self) -> List[str]:
        """The logical tensor names (a quantized weight and its scales are one name)."""
        return list(self._idx())

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[str]:
        return iter(self._idx())

    def __contains__(self, name: str) -> bool:
        return name in self._idx()

    def __repr__(self) -> str:
        return f"Checkpoint({self.path!r}, {self.format}: {self.description}, {self._n} tensors)"

    def _i(self, name: Union[str, int]) -> int:
        if isinstance(name, int):
            return name
        i = self._idx().get(name)
        if i is None:
            raise Error(f"not found: {self.path}: no tensor '{name}'")
        return i

    def info(self, name: Union[str, int]) -> Dict[str, Any]:
        """What the file stores for the tensor: shape, quantized, scheme, stored names, the
        per-tensor scale as stored and its direction ('encode', 'decode', 'none'), ..."""
        d = dict(_lofp.ckpt_tensor(self._h, self._i(name), None, None, None))
        d["scheme"] = _lofp.scheme_info(d["scheme"])["name"] if d["quantized"] else None
        return d

    def get(self, name: Union[str, int]) -> Any:
        """Tensor `name` (or its index) in lofp's convention: a QTensor for a quantized weight,
        a numpy array otherwise."""
        i = self._i(name)
        d = _lofp.ckpt_tensor(self._h, i, None, None, None)
        shape = tuple(d["shape"])
        if not d["quantized"]:
            raw = np.empty(d["nbytes"], np.uint8)
            _lofp.ckpt_tensor(self._h, i, None, None, raw)
            dt = _NP_OF_IO.get(d["dtype"])
            return raw if dt is None else raw.view(dt).reshape(shape)
        sch = _scheme_from_blob(d["scheme"])
        codes = np.empty(d["codes_bytes"], np.uint8)
        scales = np.empty(d["scales_bytes"], np.uint8)
        _lofp.ckpt_tensor(self._h, i, codes, scales, None)
        lead = shape[:-1]
        codes = codes.reshape(lead + (d["kp"] // sch.codes_per_byte,))
        scales = scales.reshape(lead + (d["kp"] // sch.block,)).view(_fw.NP_VIEW[sch.scale_view])
        if d["kp"] != d["k"] and not sch.pad:
            sch = _core.scheme(sch, pad=True)
        return QTensor(codes, scales, float(d["global_scale"]), sch.name, shape, "linear", None, sch, "bfloat16", 0)

    def dequantize(self, name: Union[str, int], dtype: str = "float32") -> np.ndarray:
        """The tensor decoded as the format defines (ModelOpt code * fl(scale * weight_scale_2),
        compressed-tensors code * fl(scale / global), lofp and MX lofp_dequantize)."""
        i = self._i(name)
        d = _lofp.ckpt_tensor(self._h, i, None, None, None)
        code = _fw.dtype_code(dtype)
        io = {_fw.DT_F32: "F32", _fw.DT_BF16: "BF16", _fw.DT_F16: "F16"}[code]
        res, raw = _fw.Alloc(None).dense(tuple(d["shape"]), code)
        _lofp.ckpt_dequantize(self._h, i, io, raw)
        return res


def open_checkpoint(path: PathLike) -> Checkpoint:
    """Opens a checkpoint directory, safetensors file or GGUF file and recognises its format."""
    return Checkpoint(path)


@dataclass(frozen=True)
class CheckpointReport:
    format: str
    description: str
    tensors: int
    quantized: int


def check_checkpoint(path: PathLike) -> CheckpointReport:
    """Opens the checkpoint and reads every tensor's description: the index, every shard, every
    scale tensor's shape and every per-tensor scale (present, finite, positive and plausible in the
    format's direction) are checked by the C reader. Raises lofp.Error naming the file and tensor
    at the first problem ('mismatch' for a missing or inverted scale); returns a summary."""
    c = Checkpoint(path)
    q = 0
    for i in range(len(c)):
        q += bool(_lofp.ckpt_tensor(c._h, i, None, None, None)["quantized"])
    return CheckpointReport(c.format, c.description, len(c), q)



@dataclass(frozen=True)
class CheckpointVerifyReport:
    """What lofp.verify_checkpoint found: the quantized checkpoint's description, its quantized
    tensors, how many are reproduced bit for bit and how many not, and the per-tensor lines as
    `lofp verify-checkpoint` prints them (ok lines left out under quiet=True)."""
    description: str
    quantized: int
    reproduced: int
    failed: int
    lines: List[str]

    @property
    def ok(self) -> bool:
        """True when every tensor is reproduced as the format stores it (the command's exit 0)."""
        return self.failed == 0


def verify_checkpoint(original: PathLike, quantized: PathLike, *, quiet: bool = False) -> CheckpointVerifyReport:
    """`lofp verify-checkpoint [--quiet] ORIGINAL QUANTIZED` (the same C check, lofp_ckpt_verify):
    re-quantizes every quantized tensor of `quantized` from the dense tensor of the same name in
    `original` under every producer profile and says which producer, scale direction, scale layout
    and nibble order reproduce it bit for bit. A tensor that does not match is a FAIL line of the
    report, not an error; a checkpoint that cannot be opened raises lofp.Error. The one-directory
    check is lofp.check_checkpoint."""
    d, n, good, bad, lines = _lofp.ckpt_verify(_path("original", original), _path("quantized", quantized),
                                               bool(_args.flag("quiet", quiet)))
    return CheckpointVerifyReport(d, n, good, bad, list(lines))
