"""Runs lofp's conformance suite against an implementation (docs/CONFORMANCE.md).

    python -m lofp.vectors verify DIR
    python -m lofp.vectors check DIR --impl NAME [--json OUT] [--max-list N]

`lofp vectors DIR` writes the suite (element.jsonl, block.jsonl, layout.jsonl, manifest.json).
`verify` checks the manifest: every file's SHA-256, its number of cases, unique case ids.
`check` verifies the suite first, then runs each case the implementation can express through it
and sorts every comparison into passed, explained by a documented quirk (an id listed in
docs/CONFORMANCE.md), unexplained, or not applicable (the implementation has no such mode, type
or profile). Exit status: 0 when nothing is unexplained, 1 otherwise (and when verify fails),
2 for a usage error. An implementation that is not installed is reported as such (status 0).

Implementations (imported only when asked for):
  lofp         this package: every family, every producer profile.
  ml_dtypes    element cases of its float types under rne rounding and its own (ieee) overflow.
  gguf         gguf-py's MXFP4 quantizer (gguf.quants) against the ggml profile's MXFP4 rows.
  torchao      torchao's MX (to_mx, every scale rule) and NVFP4 (NVFP4Tensor) quantizers against
               the torchao profile's rows; its FP4/FP6 element casts.
  compressed-tensors   its NVFP4 weight path (generate_gparam, compute_dynamic_scales_and_zp,
               quantize, pack_fp4_to_uint8) against the compressed-tensors profile's rows.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

FAMILIES = ("element", "block", "layout")
ROUNDINGS = ("rne", "ties-to-zero", "ties-away")

# Quirks: differences between an implementation and the suite that are understood and documented
# (docs/CONFORMANCE.md "Quirks"). Each predicate gets the case, the rounding mode (element cases),
# the expected and the observed value.
QUIRKS = {
    "Q-MLD-NAN-SIGN": "ml_dtypes: FP4/FP6 have no NaN; +NaN encodes to the negative zero code and "
                      "-NaN to +0 (lofp writes +0 for both)",
    "Q-MLD-E8M0-TIE-UP": "ml_dtypes: float8_e8m0fnu rounds every exact tie 1.5*2^k up; lofp rounds "
                         "to the even exponent under rne",
    "Q-MLD-E8M0-SUBNORMAL": "ml_dtypes: fp32 subnormals strictly between 2^-127 and 1.5*2^-127 give "
                            "2^-126 (0x01); the nearest E8M0 value is 2^-127 (0x00)",
    "Q-MLD-UE4M3-OVERFLOW": "ml_dtypes has no UE4M3; through float8_e4m3fn, inputs past 464 and +Inf "
                            "give NaN (0x7f) where UE4M3 saturates to 448 (0x7e) under both policies",
}


class SuiteError(Exception):
    """The suite directory is missing, malformed or does not match its manifest."""


# ----------------------------------------------------------------------------------------------
# Reading and verifying the suite
# ----------------------------------------------------------------------------------------------

def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(suite_dir: str) -> Tuple[dict, List[str]]:
    """Checks manifest.json against the files: SHA-256, case count, unique ids. Returns the
    manifest and a list of problems (empty when the suite is intact)."""
    mpath = os.path.join(suite_dir, "manifest.json")
    try:
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise SuiteError(f"{mpath}: {e}") from None
    problems = []
    names = [e.get("name") for e in manifest.get("files", [])]
    for fam in FAMILIES:
        if f"{fam}.jsonl" not in names:
            problems.append(f"manifest.json lists no {fam}.jsonl")
    for entry in manifest.get("files", []):
        path = os.path.join(suite_dir, entry["name"])
        if not os.path.isfile(path):
            problems.append(f"{entry['name']}: missing")
            continue
        digest = _sha256(path)
        if digest != entry.get("sha256"):
            problems.append(f"{entry['name']}: SHA-256 {digest} differs from the manifest's {entry.get('sha256')}")
        ids = set()
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                n += 1
                try:
                    cid = json.loads(line)["id"]
                except (ValueError, KeyError):
                    problems.append(f"{entry['name']}:{n}: not a JSON case with an id")
                    continue
                if cid in ids:
                    problems.append(f"{entry['name']}:{n}: duplicate id {cid}")
                ids.add(cid)
        if n != entry.get("cases"):
            problems.append(f"{entry['name']}: {n} cases, the manifest says {entry.get('cases')}")
    return manifest, problems


def load(suite_dir: str, family: str) -> List[dict]:
    with open(os.path.join(suite_dir, f"{family}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _f32(words_hex: str) -> np.ndarray:
    """The suite's input encoding: fp32 bit patterns, 8 hex digits each, most significant first."""
    return np.frombuffer(bytes.fromhex(words_hex), dtype=">u4").astype(np.uint32).view(np.float32)


def _bits(h: str) -> int:
    return int(h, 16)


# ----------------------------------------------------------------------------------------------
# Tallies
# ----------------------------------------------------------------------------------------------

class Tally:
    """Counts per family: passed, quirk (by id), unexplained (with details), not applicable."""

    def __init__(self) -> None:
        self.passed: Dict[str, int] = {f: 0 for f in FAMILIES}
        self.na: Dict[str, int] = {f: 0 for f in FAMILIES}
        self.quirks: Dict[str, Dict[str, int]] = {f: {} for f in FAMILIES}
        self.unexplained: Dict[str, List[str]] = {f: [] for f in FAMILIES}

    def ok(self, fam: str, n: int = 1) -> None:
        self.passed[fam] += n

    def skip(self, fam: str, n: int = 1) -> None:
        self.na[fam] += n

    def quirk(self, fam: str, qid: str) -> None:
        self.quirks[fam][qid] = self.quirks[fam].get(qid, 0) + 1

    def fail(self, fam: str, what: str) -> None:
        self.unexplained[fam].append(what)

    def totals(self) -> Tuple[int, int, int, int]:
        return (sum(self.passed.values()), sum(sum(q.values()) for q in self.quirks.values()),
                sum(len(u) for u in self.unexplained.values()), sum(self.na.values()))

    def as_dict(self) -> dict:
        p, q, u, na = self.totals()
        return {"passed": p, "quirk": q, "unexplained": u, "not_applicable": na,
                "families": {f: {"passed": self.passed[f], "quirks": self.quirks[f],
                                 "unexplained": self.unexplained[f], "not_applicable": self.na[f]}
                             for f in FAMILIES}}


# ----------------------------------------------------------------------------------------------
# Implementations
# ----------------------------------------------------------------------------------------------

class NotInstalled(Exception):
    pass


class Impl:
    """An implementation under test. Subclasses fill what they can express."""
    name = ""

    def version(self) -> str:
        return "?"

    def run_element(self, cases: List[dict], t: Tally) -> None:
        t.skip("element", sum(len(c["codes"]) + len(c.get("stochastic", {})) for c in cases))

    def run_block(self, cases: List[dict], t: Tally) -> None:
        t.skip("block", sum(len(c["expected"]) for c in cases))

    def run_layout(self, cases: List[dict], t: Tally) -> None:
        t.skip("layout", len(cases))


def _group(cases: Iterable[dict], key: Callable[[dict], Any]) -> Dict[Any, List[dict]]:
    out: Dict[Any, List[dict]] = {}
    for c in cases:
        out.setdefault(key(c), []).append(c)
    return out


def _compare_result(exp: dict, got: dict) -> Optional[str]:
    """None when `got` (status, codes, scales, global) equals `exp`, else what differs."""
    if exp["status"] != got["status"]:
        return f"status {got['status']}, expected {exp['status']}"
    if exp["status"] != "ok":
        return None
    for k in ("codes", "scales", "global"):
        if k in got and got[k] != exp[k]:
            return f"{k} {got[k]}, expected {exp[k]}"
    return None


class LofpImpl(Impl):
    name = "lofp"

    def __init__(self) -> None:
        import lofp
        import lofp.layout
        self.lofp = lofp

    def version(self) -> str:
        return self.lofp.__version__

    def run_element(self, cases: List[dict], t: Tally) -> None:
        lofp = self.lofp
        for (elem, ovf), group in _group(cases, lambda c: (c["elem"], c["overflow"])).items():
            x = np.array([_bits(c["x"]) for c in group], dtype=np.uint32).view(np.float32)
            for mode in ROUNDINGS:
                got = lofp.encode(x, elem, rounding=mode, overflow=ovf)
                for c, g in zip(group, got.tolist()):
                    if g == _bits(c["codes"][mode]):
                        t.ok("element")
                    else:
                        t.fail("element", f"{c['id']} [{mode}]: got 0x{g:02x}, expected {c['codes'][mode]}")
            sto = [c for c in group if "stochastic" in c]
            for rb in sorted({r for c in sto for r in c["stochastic"]}):
                sub = [c for c in sto if rb in c["stochastic"]]
                xs = np.array([_bits(c["x"]) for c in sub], dtype=np.uint32).view(np.float32)
                got = lofp.encode(xs, elem, rounding="stochastic", overflow=ovf,
                                  rbits=np.full(len(sub), _bits(rb), dtype=np.uint32))
                for c, g in zip(sub, got.tolist()):
                    if g == _bits(c["stochastic"][rb]):
                        t.ok("element")
                    else:
                        t.fail("element", f"{c['id']} [stochastic {rb}]: got 0x{g:02x}, expected {c['stochastic'][rb]}")

    def quantize(self, c: dict, profile: str) -> dict:
        lofp = self.lofp
        x = _f32(c["x"]).reshape(c["rows"], c["k"])
        try:
            q = lofp.quantize(x, c["scheme"], scale_rule=c["scale_rule"] if c["scheme"] != "nvfp4" else None,
                              two_level=c["two_level"] if c["scheme"] == "nvfp4" else None,
                              pad=c["pad"], propagate_nonfinite=c["propagate_nonfinite"], profile=profile)
        except lofp.Error as e:
            st = str(getattr(e, "status", "") or e)
            return {"status": "nonfinite" if "non-finite" in st else st}
        g = np.float32(q.global_value).view(np.uint32)
        return {"status": "ok", "codes": np.asarray(q.codes).view(np.uint8).tobytes().hex(),
                "scales": np.asarray(q.scales).view(np.uint8).tobytes().hex(), "global": f"0x{int(g):08x}"}

    def run_block(self, cases: List[dict], t: Tally) -> None:
        for c in cases:
            for profile, exp in c["expected"].items():
                diff = _compare_result(exp, self.quantize(c, profile))
                if diff is None:
                    t.ok("block")
                else:
                    t.fail("block", f"{c['id']} [{profile}]: {diff}")

    def run_layout(self, cases: List[dict], t: Tally) -> None:
        for c in cases:
            lin = np.frombuffer(bytes.fromhex(c["linear"]), dtype=np.uint8).reshape(c["rows"], c["cols"])
            buf = self.lofp.layout.convert_scales(lin, c["rows"], c["cols"], "linear", c["layout"])
            got = np.ascontiguousarray(buf).view(np.uint8).tobytes().hex()
            if got == c["buffer"]:
                t.ok("layout")
            else:
                t.fail("layout", f"{c['id']}: buffer differs")


class MlDtypesImpl(Impl):
    """ml_dtypes' casts (x.astype(T)): round to nearest even, its own overflow rule (lofp's ieee
    policy). UE4M3 goes through float8_e4m3fn for non-negative inputs; MXINT8 has no type."""
    name = "ml_dtypes"

    def __init__(self) -> None:
        try:
            import ml_dtypes
        except ImportError:
            raise NotInstalled from None
        self.m = ml_dtypes
        self.types = {"e2m1": ml_dtypes.float4_e2m1fn, "e2m3": ml_dtypes.float6_e2m3fn,
                      "e3m2": ml_dtypes.float6_e3m2fn, "e4m3": ml_dtypes.float8_e4m3fn,
                      "e5m2": ml_dtypes.float8_e5m2, "e8m0": ml_dtypes.float8_e8m0fnu,
                      "ue4m3": ml_dtypes.float8_e4m3fn}

    def version(self) -> str:
        return self.m.__version__

    @staticmethod
    def explain(elem: str, xb: int, exp: int, got: int) -> Optional[str]:
        nan = (xb & 0x7F800000) == 0x7F800000 and (xb & 0x7FFFFF) != 0
        if elem in ("e2m1", "e2m3", "e3m2") and nan and exp == 0:
            width = 4 if elem == "e2m1" else 6
            if got == (0 if xb >> 31 else 1 << (width - 1)):
                return "Q-MLD-NAN-SIGN"
        if elem == "e8m0":
            tie = (xb >> 31) == 0 and ((0 < (xb >> 23) < 255 and (xb & 0x7FFFFF) == 0x400000) or xb == 0x00600000)
            if tie and got == exp + 1:
                return "Q-MLD-E8M0-TIE-UP"
            if 0x00400001 <= xb <= 0x005FFFFF and exp == 0 and got == 1:
                return "Q-MLD-E8M0-SUBNORMAL"
        if elem == "ue4m3" and exp == 0x7E and got == 0x7F:
            x = float(np.uint32(xb).view(np.float32))
            if x > 464.0:
                return "Q-MLD-UE4M3-OVERFLOW"
        return None

    def run_element(self, cases: List[dict], t: Tally) -> None:
        for c in cases:
            n = len(c["codes"]) + len(c.get("stochastic", {}))
            applicable = c["elem"] in self.types and c["overflow"] == "ieee"
            if applicable and c["elem"] == "ue4m3" and _bits(c["x"]) >> 31:
                applicable = False  # float8_e4m3fn is signed: negative inputs say nothing of UE4M3
            t.skip("element", n - (1 if applicable else 0))
        for elem, group in _group([c for c in cases if c["elem"] in self.types and c["overflow"] == "ieee"
                                   and not (c["elem"] == "ue4m3" and _bits(c["x"]) >> 31)],
                                  lambda c: c["elem"]).items():
            xb = np.array([_bits(c["x"]) for c in group], dtype=np.uint32)
            with np.errstate(all="ignore"):
                got = xb.view(np.float32).astype(self.types[elem]).view(np.uint8).tolist()
            for c, b, g in zip(group, xb.tolist(), got):
                exp = _bits(c["codes"]["rne"])
                if g == exp:
                    t.ok("element")
                    continue
                q = self.explain(elem, b, exp, g)
                if q:
                    t.quirk("element", q)
                else:
                    t.fail("element", f"{c['id']} [rne]: got 0x{g:02x}, expected {c['codes']['rne']}")


class GgufImpl(Impl):
    """gguf-py's MXFP4 quantizer (gguf.quants.quantize, GGMLQuantizationType.MXFP4) against the
    ggml profile: block byte 0 is the E8M0 scale, bytes 1..16 the codes in llama.cpp's split
    nibble order (byte j = element j | element j+16 << 4), converted here to the standard order.
    gguf-py has no NVFP4 quantizer and no refusal of non-finite input."""
    name = "gguf"

    def __init__(self) -> None:
        try:
            import gguf
            from gguf import quants
        except ImportError:
            raise NotInstalled from None
        self.gguf = gguf
        self.quants = quants

    def version(self) -> str:
        try:
            from importlib.metadata import version
            return version("gguf")
        except Exception:
            return "?"

    def quantize(self, c: dict) -> dict:
        rows, k = c["rows"], c["k"]
        kp = -(-k // 32) * 32
        x = np.zeros((rows, kp), dtype=np.float32)
        x[:, :k] = _f32(c["x"]).reshape(rows, k)  # the suite's padding is zeros
        with np.errstate(all="ignore"):
            q = np.asarray(self.quants.quantize(x, self.gguf.GGMLQuantizationType.MXFP4), dtype=np.uint8)
        blocks = q.reshape(rows, kp // 32, 17)
        scales = blocks[:, :, 0]
        qs = blocks[:, :, 1:]
        lo, hi = qs & 0x0F, qs >> 4
        codes = np.concatenate([lo, hi], axis=-1)  # elements 0..31 of each block
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        return {"status": "ok", "codes": packed.tobytes().hex(), "scales": scales.tobytes().hex()}

    def run_block(self, cases: List[dict], t: Tally) -> None:
        for c in cases:
            n = len(c["expected"])
            exp = c["expected"].get("ggml")
            if c["scheme"] != "mxfp4" or exp is None or exp["status"] != "ok":
                t.skip("block", n)
                continue
            t.skip("block", n - 1)
            diff = _compare_result(exp, self.quantize(c))
            if diff is None:
                t.ok("block")
            else:
                t.fail("block", f"{c['id']} [ggml]: {diff}")


def _dist_version(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "?"


def _padded(c: dict, block: int) -> np.ndarray:
    """The case's input as [rows, k rounded up to `block`]: the suite's padding is zeros, and the
    producers' quantizers want whole blocks."""
    rows, k = c["rows"], c["k"]
    kp = -(-k // block) * block
    x = np.zeros((rows, kp), dtype=np.float32)
    x[:, :k] = _f32(c["x"]).reshape(rows, k)
    return x


def _u8hex(t: Any) -> str:
    import torch
    t = t.contiguous()
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.cpu().numpy().tobytes().hex()


class _ProducerImpl(Impl):
    """Runs a producer's own quantizer on the block lines that hold its profile's result
    (expected[profile]) and compares codes, block scales and the per-tensor scale, each as the
    producer stores it. A line whose expected status is `nonfinite` is not applicable: these
    producers never refuse an input, lofp's profile refuses on their behalf."""
    profile = ""

    def quantize(self, c: dict) -> Optional[dict]:
        raise NotImplementedError

    def explain(self, c: dict, exp: dict, got: dict) -> Optional[str]:
        return None

    def run_block(self, cases: List[dict], t: Tally) -> None:
        for c in cases:
            n = len(c["expected"])
            exp = c["expected"].get(self.profile)
            if exp is None or exp["status"] != "ok":
                t.skip("block", n)
                continue
            t.skip("block", n - 1)
            try:
                with np.errstate(all="ignore"):
                    got = self.quantize(c)
            except Exception as e:  # the producer raising on a valid input is a finding, not a crash
                t.fail("block", f"{c['id']} [{self.profile}]: raised {type(e).__name__}: {str(e)[:120]}")
                continue
            if got is None:
                t.skip("block")
                continue
            diff = _compare_result(exp, got)
            if diff is None:
                t.ok("block")
                continue
            q = self.explain(c, exp, got)
            if q:
                t.quirk("block", q)
            else:
                t.fail("block", f"{c['id']} [{self.profile}]: {diff}")


class CompressedTensorsImpl(_ProducerImpl):
    """compressed-tensors' NVFP4 (NVFP4A16 weights: tensor_group, group 16, FP8 E4M3 scales) as
    its compressor writes a checkpoint: global scale by generate_gparam over the tensor's min and
    max, block scales by compute_dynamic_scales_and_zp, elements by quantize() and packed by
    pack_fp4_to_uint8; weight_scale is the scale cast to float8_e4m3fn. The per-tensor scale is
    the encode multiplier G, the suite's direction for this profile."""
    name = "compressed-tensors"
    profile = "compressed-tensors"

    def __init__(self) -> None:
        try:
            import torch
            from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
            from compressed_tensors.quantization.lifecycle.forward import quantize
            from compressed_tensors.quantization.quant_scheme import NVFP4A16
            from compressed_tensors.quantization.utils.helpers import (compute_dynamic_scales_and_zp,
                                                                       generate_gparam)
        except ImportError:
            raise NotInstalled from None
        self.torch = torch
        self.args = NVFP4A16["weights"]
        self.pack, self.qfn = pack_fp4_to_uint8, quantize
        self.scales_fn, self.gparam = compute_dynamic_scales_and_zp, generate_gparam

    def version(self) -> str:
        return _dist_version("compressed-tensors")

    def quantize(self, c: dict) -> Optional[dict]:
        if c["scheme"] != "nvfp4" or not c["two_level"]:
            return None
        torch = self.torch
        x = torch.from_numpy(_padded(c, 16))
        mn, mx = torch.aminmax(x)
        gs = self.gparam(mn, mx)
        scale, zp = self.scales_fn(x, self.args, module=None, global_scale=gs)
        q = self.qfn(x=x, scale=scale, zero_point=zp, args=self.args, global_scale=gs)
        g = int(np.float32(gs.float().reshape(-1)[0].item()).view(np.uint32))
        return {"status": "ok", "codes": _u8hex(self.pack(q)),
                "scales": _u8hex(scale.to(torch.float8_e4m3fn)), "global": f"0x{g:08x}"}


class TorchaoImpl(_ProducerImpl):
    """torchao's prototype MX and NVFP4 quantizers (eager, CPU): to_mx(x, elem, 32, mode) for
    the MX lines under the line's scale rule (ScaleCalculationMode), NVFP4Tensor.to_nvfp4 for
    NVFP4 (two-level with per_tensor_scale = per_tensor_amax_to_scale(amax), whose value is the
    decode scale the suite holds for this profile). Element cases run through torchao's
    f32_to_f4_unpacked / f32_to_f6_*_unpacked casts (round to nearest even, saturating)."""
    name = "torchao"
    profile = "torchao"

    def __init__(self) -> None:
        try:
            import torch
            from torchao.prototype.mx_formats import kernels
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
            from torchao.prototype.mx_formats.mx_tensor import to_mx
            from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale
        except ImportError:
            raise NotInstalled from None
        self.torch, self.kernels, self.mode = torch, kernels, ScaleCalculationMode
        self.to_mx, self.nvfp4, self.pts = to_mx, NVFP4Tensor, per_tensor_amax_to_scale
        self.mx_dtypes = {"mxfp4": torch.float4_e2m1fn_x2, "mxfp6-e2m3": DTYPE_FP6_E2M3,
                          "mxfp6-e3m2": DTYPE_FP6_E3M2, "mxfp8-e4m3": torch.float8_e4m3fn,
                          "mxfp8-e5m2": torch.float8_e5m2}

    def version(self) -> str:
        return _dist_version("torchao")

    def run_element(self, cases: List[dict], t: Tally) -> None:
        # torchao's casts round to nearest even and saturate (lofp's saturate policy); they have
        # no NaN (custom_fp_utils: "no special values"), so NaN inputs are not applicable.
        casts = {"e2m1": self.kernels.f32_to_f4_unpacked, "e2m3": self.kernels.f32_to_f6_e2m3_unpacked,
                 "e3m2": self.kernels.f32_to_f6_e3m2_unpacked}

        def runnable(c: dict) -> bool:
            xb = _bits(c["x"])
            nan = (xb & 0x7F800000) == 0x7F800000 and (xb & 0x7FFFFF) != 0
            return c["elem"] in casts and c["overflow"] == "saturate" and not nan

        for c in cases:
            t.skip("element", len(c["codes"]) + len(c.get("stochastic", {})) - (1 if runnable(c) else 0))
        for elem, group in _group([c for c in cases if runnable(c)], lambda c: c["elem"]).items():
            xb = np.array([_bits(c["x"]) for c in group], dtype=np.uint32)
            got = casts[elem](self.torch.from_numpy(xb.view(np.float32).copy())).numpy().tolist()
            for c, g in zip(group, got):
                if g == _bits(c["codes"]["rne"]):
                    t.ok("element")
                else:
                    t.fail("element", f"{c['id']} [rne]: got 0x{g:02x}, expected {c['codes']['rne']}")

    def quantize(self, c: dict) -> Optional[dict]:
        torch = self.torch
        if c["scheme"] == "nvfp4":
            x = torch.from_numpy(_padded(c, 16))
            pts = self.pts(torch.max(torch.abs(x))) if c["two_level"] else None
            t = self.nvfp4.to_nvfp4(x, per_tensor_scale=pts)
            out = {"status": "ok", "codes": _u8hex(t.qdata), "scales": _u8hex(t.scale)}
            if pts is not None:
                out["global"] = f"0x{int(np.float32(pts.float().item()).view(np.uint32)):08x}"
            return out
        dt = self.mx_dtypes.get(c["scheme"])
        if dt is None:
            return None
        x = torch.from_numpy(_padded(c, 32))
        s, d = self.to_mx(x, dt, 32, getattr(self.mode, c["scale_rule"].upper()))
        return {"status": "ok", "codes": _u8hex(d), "scales": _u8hex(s)}


IMPLS: Dict[str, Callable[[], Impl]] = {
    "lofp": LofpImpl,
    "ml_dtypes": MlDtypesImpl,
    "gguf": GgufImpl,
    "torchao": TorchaoImpl,
    "compressed-tensors": CompressedTensorsImpl,
}


def check(suite_dir: str, impl_name: str) -> Tuple[dict, Tally, Optional[Impl]]:
    """Verifies the suite and runs it against one implementation. Returns the manifest, the tally
    and the implementation (None when it is not installed). Raises SuiteError when the suite does
    not match its manifest."""
    manifest, problems = verify(suite_dir)
    if problems:
        raise SuiteError("; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""))
    t = Tally()
    try:
        impl = IMPLS[impl_name]()
    except NotInstalled:
        return manifest, t, None
    impl.run_element(load(suite_dir, "element"), t)
    impl.run_block(load(suite_dir, "block"), t)
    impl.run_layout(load(suite_dir, "layout"), t)
    return manifest, t, impl


def _report(manifest: dict, t: Tally, impl: Optional[Impl], name: str, max_list: int) -> str:
    lines = [f"suite {manifest.get('suite_version')} (written by lofp {manifest.get('lofp_version')}), "
             f"implementation {name}" + (f" {impl.version()}" if impl else ": not installed")]
    if impl is None:
        return "\n".join(lines)
    for f in FAMILIES:
        q = t.quirks[f]
        qs = ", ".join(f"{k} {v}" for k, v in sorted(q.items()))
        lines.append(f"  {f:8s} passed {t.passed[f]}, quirk {sum(q.values())}{' (' + qs + ')' if qs else ''}, "
                     f"unexplained {len(t.unexplained[f])}, not applicable {t.na[f]}")
    p, q, u, na = t.totals()
    lines.append(f"  total    passed {p}, quirk {q}, unexplained {u}, not applicable {na}")
    if u:
        lines.append("unexplained failures:")
        shown = 0
        for f in FAMILIES:
            for w in t.unexplained[f]:
                if shown < max_list:
                    lines.append(f"  {w}")
                shown += 1
        if shown > max_list:
            lines.append(f"  ... and {shown - max_list} more")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lofp.vectors",
                                 description="Run lofp's conformance suite (lofp vectors DIR) against an implementation.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="check the manifest's SHA-256 and case counts")
    v.add_argument("dir")
    c = sub.add_parser("check", help="run the suite against an implementation")
    c.add_argument("dir")
    c.add_argument("--impl", required=True, choices=sorted(IMPLS))
    c.add_argument("--json", metavar="OUT", help="also write the tally as JSON to OUT")
    c.add_argument("--max-list", type=int, default=50, help="unexplained failures to print (default 50)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "verify":
            manifest, problems = verify(a.dir)
            for p in problems:
                print(f"verify: {p}")
            print(f"verify: suite {manifest.get('suite_version')}, "
                  f"{sum(e.get('cases', 0) for e in manifest.get('files', []))} cases, "
                  + ("manifest matches" if not problems else f"{len(problems)} problems"))
            return 1 if problems else 0
        manifest, t, impl = check(a.dir, a.impl)
    except SuiteError as e:
        print(f"python -m lofp.vectors: {e}", file=sys.stderr)
        return 1
    print(_report(manifest, t, impl, a.impl, a.max_list))
    if a.json:
        d = {"impl": a.impl, "installed": impl is not None, "version": impl.version() if impl else None,
             "suite_version": manifest.get("suite_version"), "lofp_version": manifest.get("lofp_version")}
        d.update(t.as_dict())
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=1)
    return 1 if t.totals()[2] else 0


if __name__ == "__main__":
    sys.exit(main())
