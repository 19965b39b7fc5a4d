"""Argument checks shared by the public functions: a bad argument raises lofp.Error naming the
argument and what it accepts, before Python's own conversions (int() of -1 into a uint64,
bool("no"), iterating a str char by char) could turn it into a different request."""
from __future__ import annotations

from typing import Any, Iterable, List, Optional

import numpy as np

from ._lofp import Error

# The CLI's --threads and --jobs accept 1..256 (cli_parse_long bounds); Python takes the same.
MAX_THREADS = 256
SEED_MAX = (1 << 64) - 1  # lofp_scheme.seed is a uint64_t

ROUNDINGS = ("rne", "ties-to-zero", "ties-away", "stochastic")
SCALE_RULES = ("floor", "ceil", "even", "rceil")
METHODS = ("rtn", "mse", "gptq")


def _is_int(v: Any) -> bool:
    # bool is an int subclass, but threads=True is a mistake, not 1.
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def int_range(name: str, v: Any, lo: int, hi: int) -> int:
    if not _is_int(v) or not lo <= int(v) <= hi:
        raise Error(f"invalid argument: {name} must be an integer {lo}..{hi}, got {v!r}")
    return int(v)


def opt_int_range(name: str, v: Any, lo: int, hi: int) -> Optional[int]:
    return None if v is None else int_range(name, v, lo, hi)


def threads(v: Any) -> Optional[int]:
    return opt_int_range("threads", v, 1, MAX_THREADS)


def seed(v: Any) -> Optional[int]:
    return opt_int_range("seed", v, 0, SEED_MAX)


def flag(name: str, v: Any) -> Optional[bool]:
    """None or a real bool: pad="no" would otherwise be truthy and turn padding on."""
    if v is None or isinstance(v, (bool, np.bool_)):
        return None if v is None else bool(v)
    raise Error(f"invalid argument: {name} must be True or False, got {v!r}")


def choice(name: str, v: Any, valid: Iterable[str]) -> Optional[str]:
    valid = tuple(valid)
    if v is None:
        return None
    # An unknown name is left to the C library, whose "not found: unknown ..." message the CLI
    # shares; only what is not a name at all (scale_rule=5) is refused here.
    if not isinstance(v, str):
        raise Error(f"invalid argument: {name} must be one of {', '.join(valid)}; got {v!r}")
    return v


def patterns(name: str, v: Any) -> List[str]:
    """A glob list; one str is one pattern (iterating it would give one pattern per character)."""
    if v is None:
        return []
    if isinstance(v, (str, bytes)):
        v = [v]
    try:
        out = list(v)
    except TypeError:
        raise Error(f"invalid argument: {name} must be a str or a list of str, got {type(v).__name__}") from None
    for p in out:
        if not isinstance(p, str):
            raise Error(f"invalid argument: {name} patterns must be str, got {p!r}")
    return out


def dense_out(name: str, out: Any, shape: tuple, np_dtype: Any) -> None:
    """A numpy out= must have exactly the result's dtype and shape: the raw-buffer path after
    this one checks only byte counts and contiguity, so an int32 array of the right size would
    be filled with float bits. Other frameworks' arrays are checked by the DLPack path."""
    if not isinstance(out, np.ndarray):
        return
    want = np.dtype(np_dtype)
    if out.dtype != want:
        raise Error(f"invalid argument: {name} has dtype {out.dtype}, the result is {want}")
    if out.nbytes != want.itemsize * int(np.prod(shape, dtype=np.int64)):
        return  # the size check after this one says "buffer too small" with the byte counts
    if tuple(out.shape) != tuple(shape):
        raise Error(f"invalid argument: {name} has shape {tuple(out.shape)}, the result is {tuple(shape)}")


def method_args(method: Any, importance: Any, hessian: Any, damp: Any, act_order: Any, k: int,
                mse_scales: Any = False):
    """lofp.quantize's method arguments: returns (method id 0/1/2, importance, hessian, damp,
    act_order, mse_scales) with importance / hessian as C-contiguous float32 numpy arrays of shape
    (k,) / (k, k), or raises lofp.Error naming the argument."""
    if not isinstance(method, str) or method not in METHODS:
        raise Error(f"invalid argument: method must be one of {', '.join(METHODS)}; got {method!r}")
    mid = METHODS.index(method)
    if importance is not None and method != "mse":
        raise Error(f"invalid argument: importance is for method='mse' (got method={method!r})")
    if hessian is not None and method != "gptq":
        raise Error(f"invalid argument: hessian is for method='gptq' (got method={method!r})")
    if method == "gptq" and hessian is None:
        raise Error("invalid argument: method='gptq' needs hessian, the [K, K] input Hessian X^T X")
    if isinstance(damp, (bool, np.bool_)) or not isinstance(damp, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(damp) and damp >= 0):
        raise Error(f"invalid argument: damp must be a finite number >= 0, got {damp!r}")
    ao = flag("act_order", act_order)
    ms = flag("mse_scales", mse_scales)
    if (ao or ms or float(damp) != 0.01) and method != "gptq":
        raise Error(f"invalid argument: damp, act_order and mse_scales are for method='gptq' (got method={method!r})")

    def as_f32(name: str, v: Any, shape: tuple) -> Any:
        if v is None:
            return None
        if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor
            v = v.detach().cpu().numpy()
        try:
            a = np.asarray(v)
        except Exception:  # noqa: BLE001 -- whatever it is, it is not an array
            raise Error(f"invalid argument: {name} must be an array, got {type(v).__name__}") from None
        if a.dtype.kind not in "fiu":
            raise Error(f"invalid argument: {name} must hold real numbers, got dtype {a.dtype}")
        if tuple(a.shape) != shape:
            raise Error(f"invalid argument: {name} has shape {tuple(a.shape)}, expected {shape}")
        return np.ascontiguousarray(a, dtype=np.float32)

    return (mid, as_f32("importance", importance, (k,)), as_f32("hessian", hessian, (k, k)), float(damp),
            bool(ao), bool(ms))
