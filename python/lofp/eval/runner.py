"""The sweep: for every variant (weight scheme x scale rule x rounding x profile, an activation
recipe and/or a KV cache type) quantize the model's linear weights through the backend, run the
same forward (with the activation recipe at the input of every linear layer whose weight
linear_weights() lists), and compare with the unquantized forward."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from . import metrics
from .backend import ACT_RECIPES, MX_SCHEMES, BackendError

WEIGHT_SCHEMES = ("nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2",
                  "mxint8", "tilelang-mxfp8")
# Nominal storage per value: element bits + scale bits / block (+ nothing for the one fp32
# per-tensor scale of two-level NVFP4).
BITS = {"nvfp4": 4.5, "mxfp4": 4.25, "mxfp6-e2m3": 6.25, "mxfp6-e3m2": 6.25, "mxfp8-e4m3": 8.25,
        "mxfp8-e5m2": 8.25, "mxint8": 8.25, "tilelang-mxfp8": 8.0625, "ultraquant": 4.25}
ELEMENT_BITS = {"nvfp4": 4, "mxfp4": 4, "mxfp6-e2m3": 6, "mxfp6-e3m2": 6, "mxfp8-e4m3": 8,
                "mxfp8-e5m2": 8, "mxint8": 8, "tilelang-mxfp8": 8, "ultraquant": 4}


@dataclass(frozen=True)
class Variant:
    scheme: str | None = None       # weight scheme; None = weights unquantized
    rounding: str | None = None     # None = the preset's default
    scale_rule: str | None = None   # None = the preset's default
    profile: str | None = None      # None = the default profile
    kv: str | None = None           # KV cache type through lofp attention; None = numpy fp attention
    method: str | None = None       # None / "rtn": round to nearest; "mse", "gptq" (docs/QUALITY.md)
    act: str | None = None          # ACT_RECIPES entry at every linear input; None = as computed

    @property
    def weight_key(self) -> tuple:
        """(scheme, rounding, scale_rule, profile, method): variants with the same key share
        weights."""
        return (self.scheme, self.rounding, self.scale_rule, self.profile, self.method)

    @property
    def label(self) -> str:
        """The variant as the report prints it ('mxfp4/rceil + act:e4m3-token + kv:ultraquant')."""
        parts = []
        if self.scheme is not None:
            w = self.scheme
            if self.scale_rule:
                w += "/" + self.scale_rule
            if self.rounding:
                w += "/" + self.rounding
            if self.profile:
                w += f" [{self.profile}]"
            if self.method and self.method != "rtn":
                w += f" {self.method}"
            parts.append(w)
        if self.act:
            parts.append(f"act:{self.act}")
        if self.kv:
            parts.append(f"kv:{self.kv}")
        return " + ".join(parts) or "weights fp"


METHODS = ("rtn", "mse", "gptq")

# What each activation recipe does, as the report's header line says it.
ACT_RECIPE_TEXT = {
    "e4m3-token": "per-token E4M3 at the input of every linear layer whose weight the schemes "
                  "quantize (scale amax/448 in fp32, x/scale in fp32, E4M3 RNE saturating, "
                  "dequantized code*scale in fp32: lofp_cuda_w4a8_gemm's activation recipe)"}


def build_variants(schemes: Sequence[str] = WEIGHT_SCHEMES, scale_rules: Sequence[Optional[str]] = (None,),
                   roundings: Sequence[Optional[str]] = (None,), profiles: Sequence[Optional[str]] = (None,),
                   kv: Optional[str] = None, weights_with_kv: bool = True,
                   methods: Sequence[Optional[str]] = (None,),
                   acts: Sequence[Optional[str]] = (None,)) -> list[Variant]:
    """Every scheme x scale rule x rounding x profile x method (scale rules only for the MX
    schemes), once per activation recipe of `acts` (None: activations as computed); a recipe
    also gets its own row with the weights unquantized (what the activations alone cost). With kv,
    also the KV cache alone and (weights_with_kv) each of those variants together with it."""
    for a in acts:
        if a is not None and a not in ACT_RECIPES:
            raise ValueError(f"unknown activation recipe {a!r} (choose from none, "
                             f"{', '.join(ACT_RECIPES)})")
    out: list[Variant] = []
    for s in schemes:
        rules = [r for r in scale_rules if r is None or s in MX_SCHEMES] or [None]
        for r in dict.fromkeys(rules):
            for rd in roundings:
                for p in profiles:
                    for m in methods:
                        out.append(Variant(s, rd, r, p, method=m))
    weights = out
    out = []
    for a in dict.fromkeys(acts):
        if a is None:
            out += weights
        else:
            out += [Variant(act=a)] + [replace(v, act=a) for v in weights]
    if kv:
        kvv = [Variant(kv=kv)]
        if weights_with_kv:
            kvv += [replace(v, kv=kv) for v in out]
        out += kvv
    return out


def method_inputs(calibration, method: Optional[str], name: str, k: int) -> dict:
    """What method `method` reads for weight `name` (input dimension k) from the calibration file:
    mse its diagonal as importance (unweighted without a file), gptq its Hessian."""
    if method in (None, "rtn"):
        return {}
    if method == "mse":
        return {"importance": calibration.diag(name, k)} if calibration is not None else {}
    if method == "gptq":
        if calibration is None:
            raise ValueError("method gptq needs a calibration file (lofp calibrate; --calibration)")
        return {"hessian": calibration.hessian(name, k)}
    raise ValueError(f"unknown method {method!r} (rtn, mse, gptq)")


def quantize_model(model, backend, v: Variant, calibration=None, method_options=None):
    """Fake-quantizes every linear weight of `model` under `v` (its method reading `calibration`,
    a lofp.calibrate.Calibration, where it needs statistics); returns (weights, per-layer errors)."""
    qw, layers = {}, []
    sig = noise = 0.0
    for name, w in model.linear_weights().items():
        extra = method_inputs(calibration, v.method, name, w.shape[-1])
        if v.method not in (None, "rtn"):
            extra["method"] = v.method
            if v.method == "gptq":
                extra.update(method_options or {})
        wq = backend.fake_quant(w, v.scheme, rounding=v.rounding, scale_rule=v.scale_rule,
                                profile=v.profile, **extra)
        qw[name] = wq
        e = metrics.weight_error(w, wq)
        sig += e.pop("_sig")
        noise += e.pop("_noise")
        layers.append({"name": name, "shape": list(w.shape), **e})
    total = {"snr_db": float(10 * np.log10(sig / noise)) if noise else float("inf"),
             "rel_fro": float(np.sqrt(noise / sig)),
             "min_layer_snr_db": min(l["snr_db"] for l in layers)}
    return qw, layers, total


def run(model: Any, variants: Sequence[Variant], backend: Any, text: Optional[str] = None,
        log: Optional[Callable[[dict], None]] = None, calibration: Any = None,
        method_options: Optional[dict] = None) -> dict:
    """Runs the model in full precision, then under every variant, and returns the report dict
    (model, backend, kept tensors, and per variant the metrics against the reference); `log` is
    called with each variant's row as it completes. `calibration` (a lofp.calibrate.Calibration)
    feeds the variants' methods; method_options (damp, act_order) go to GPTQ."""
    t_start = time.perf_counter()
    inputs = model.inputs(text)
    t0 = time.perf_counter()
    ref = model.forward(inputs)
    t_ref = time.perf_counter() - t0
    res = {"model": asdict(model.info), "backend": backend.name,
           "activations": {a: ACT_RECIPE_TEXT[a] for a in dict.fromkeys(v.act for v in variants)
                           if a is not None},
           "kept_unquantized": [{"name": k.name, "shape": list(k.shape), "why": k.why}
                                for k in model.kept_tensors()],
           "quantized_tensors": [{"name": n, "shape": list(w.shape)}
                                 for n, w in model.linear_weights().items()],
           "results": []}
    if model.info.kind == "lm":
        ppl0 = metrics.perplexity(ref, inputs)
        res["input"] = {"windows": [len(w) for w in inputs],
                        "predicted_tokens": sum(len(w) - 1 for w in inputs)}
        res["reference"] = {"ppl": ppl0}
    else:
        emb0 = ref
        sim0 = metrics.similarity_matrix(emb0)
        res["input"] = {"sentences": len(inputs), "tokens": [len(s) for s in inputs]}
        res["reference"] = {"similarity": sim0.tolist()}
    # Variants sharing a weight quantization run together, and only one quantized copy of the
    # weights is alive at a time (SmolLM2's is 0.4 GB); rows keep the order asked for.
    groups: dict = {}
    for idx, v in enumerate(variants):
        groups.setdefault(v.weight_key, []).append((idx, v))
    rows: list = [None] * len(variants)
    for key, members in groups.items():
        t0 = time.perf_counter()
        weights = layers = total = None
        error = None
        if key[0] is not None:
            try:
                weights, layers, total = quantize_model(model, backend, members[0][1], calibration,
                                                        method_options)
            except (BackendError, ValueError) as e:  # e.g. a profile without that scheme
                error = str(e)
        t_quant = time.perf_counter() - t0
        if error is not None:
            for idx, v in members:
                rows[idx] = {"label": v.label, **asdict(v), "error": error,
                             "bits": BITS.get(v.scheme)}
                if log:
                    log({**rows[idx], "time_quantize_s": t_quant, "time_forward_s": 0.0})
            continue
        for n_in_group, (idx, v) in enumerate(members):
            row = {"label": v.label, **asdict(v),
                   "bits": BITS.get(v.scheme) if v.scheme else None}
            if weights is not None:
                row["weight_error"] = total
                row["layers"] = layers
            t1 = time.perf_counter()
            if v.act is None:
                out = model.forward(inputs, weights, v.kv, backend)
            else:
                out = model.forward(inputs, weights, v.kv, backend,
                                    act=lambda x, r=v.act: backend.fake_quant_act(x, r))
            if model.info.kind == "lm":
                ppl = metrics.perplexity(out, inputs)
                kl, klmax, top1 = metrics.kl_top1(ref, out)
                row.update(ppl=ppl, ppl_rel=ppl / ppl0 - 1.0, kl=kl, kl_max=klmax, top1=top1)
            else:
                cos = metrics.cosine_rows(emb0, out)
                sim = metrics.similarity_matrix(out)
                row.update(cos_min=float(cos.min()), cos_mean=float(cos.mean()),
                           sim_max_abs_diff=float(np.abs(sim - sim0).max()))
            row["time_quantize_s"] = t_quant if n_in_group == 0 else 0.0
            row["time_forward_s"] = time.perf_counter() - t1
            rows[idx] = row
            if log:
                log(row)
        del weights
    res["results"] = rows
    res["timing"] = {"reference_forward_s": t_ref, "total_s": time.perf_counter() - t_start}
    return res
