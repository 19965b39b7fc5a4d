"""Terminal table, JSON and matplotlib plots of a run()."""
from __future__ import annotations

import json
import math
from pathlib import Path


def _f(x, fmt):
    if x is None:
        width = fmt.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 1)
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, fmt)


def _variant_table(res: dict, head: str, cells) -> list[str]:
    """The per-variant rows of the text table: label, bits, the task's columns (`head`, and
    `cells(result)` for each row), then the weight-error columns every task shares."""
    lw = max([34] + [len(r["label"]) for r in res["results"]])
    hdr = f"{'variant':<{lw}} {'bits':>6} {head} {'wSNR dB':>8} {'min':>6} {'relF':>7} {'quant s':>8}"
    out = [hdr, "-" * len(hdr)]
    for r in res["results"]:
        if "error" in r:
            out.append(f"{r['label']:<{lw}} not run: {r['error']}")
            continue
        we = r.get("weight_error") or {}
        out.append(
            f"{r['label']:<{lw}} {_f(r['bits'], '6.3g')} {cells(r)} "
            f"{_f(we.get('snr_db'), '8.2f')} {_f(we.get('min_layer_snr_db'), '6.2f')} "
            f"{_f(we.get('rel_fro'), '7.4f')} {_f(r.get('time_quantize_s') if we else None, '8.2f')}")
    return out


def _activation_lines(res: dict) -> list[str]:
    """One line per activation recipe the rows use (none when every row leaves them as the
    forward computes them)."""
    acts = res.get("activations") or {}
    if not acts:
        return []
    return [f"activations: rows with act:{a}: {t}; other rows: unquantized (the forward's fp32/fp64)"
            for a, t in acts.items()]


def table(res: dict) -> str:
    m = res["model"]
    lines = [f"model: {m['name']} ({m['params']:,} params; {'; '.join(m['notes'])})",
             f"lofp: {res['backend']}"]
    q = res["quantized_tensors"]
    kept = res["kept_unquantized"]
    lines.append(f"quantized: {len(q)} linear weights (blocks along the input dim, zero-padded "
                 f"to the block); kept as they are: " +
                 ", ".join(sorted({k['why'] for k in kept})) + f" ({len(kept)} tensors)")
    lines += _activation_lines(res)
    if m["kind"] == "lm":
        inp = res["input"]
        lines.append(f"text: {inp['predicted_tokens']} predicted tokens in "
                     f"{len(inp['windows'])} window(s); reference perplexity "
                     f"{res['reference']['ppl']:.4f}")
        lines += _variant_table(
            res, f"{'ppl':>9} {'dppl%':>7} {'KL':>8} {'top1':>6}",
            lambda r: f"{r['ppl']:9.4f} {100 * r['ppl_rel']:+7.2f} {r['kl']:8.5f} {r['top1']:6.3f}")
    else:
        inp = res["input"]
        lines.append(f"sentences: {inp['sentences']} ({sum(inp['tokens'])} tokens); metric: "
                     f"cosine of each sentence embedding with the unquantized one")
        lines += _variant_table(
            res, f"{'cos min':>8} {'cos mean':>8} {'dsim max':>8}",
            lambda r: f"{r['cos_min']:8.5f} {r['cos_mean']:8.5f} {r['sim_max_abs_diff']:8.5f}")
    t = res["timing"]
    lines.append(f"time: {t['total_s']:.2f} s in all (reference forward "
                 f"{t['reference_forward_s']:.2f} s)")
    return "\n".join(lines)


def markdown(res: dict) -> str:
    """The result table as Markdown (what docs/EVAL.md shows)."""
    lm = res["model"]["kind"] == "lm"
    acts = _activation_lines(res)
    if lm:
        out = acts + [f"reference perplexity **{res['reference']['ppl']:.4f}** "
               f"({res['input']['predicted_tokens']} predicted tokens)", "",
               "| variant | bits/value | ppl | Δppl | KL (nats) | top-1 agree | weight SNR dB "
               "(all / worst layer) | rel. Frobenius | quantize s |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    else:
        out = acts + [f"{res['input']['sentences']} sentences, {sum(res['input']['tokens'])} tokens", "",
               "| variant | bits/value | cosine min | cosine mean | max Δ similarity | weight SNR dB "
               "(all / worst layer) | rel. Frobenius | quantize s |",
               "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["results"]:
        if "error" in r:
            out.append(f"| {r['label']} | not run: {r['error']} |")
            continue
        we = r.get("weight_error") or {}
        snr = (f"{we['snr_db']:.2f} / {we['min_layer_snr_db']:.2f}" if we else "-")
        fro = f"{we['rel_fro']:.4f}" if we else "-"
        tq = f"{r.get('time_quantize_s', 0.0):.2f}" if we else "-"
        bits = _f(r["bits"], ".4g").strip()
        if lm:
            out.append(f"| {r['label']} | {bits} | {r['ppl']:.4f} | {100 * r['ppl_rel']:+.2f} % | "
                       f"{r['kl']:.5f} | {r['top1']:.3f} | {snr} | {fro} | {tq} |")
        else:
            out.append(f"| {r['label']} | {bits} | {r['cos_min']:.5f} | {r['cos_mean']:.5f} | "
                       f"{r['sim_max_abs_diff']:.4f} | {snr} | {fro} | {tq} |")
    return "\n".join(out)


def layers_table(res: dict) -> str:
    # weight errors only: rows that differ from a weight row by KV cache or activations repeat it
    rows = [r for r in res["results"] if r.get("layers") and not r.get("kv") and not r.get("act")]
    if not rows:
        return ""
    names = [l["name"] for l in rows[0]["layers"]]
    w = max(len(n) for n in names)
    hdr = f"{'per-layer SNR dB':<{w}} " + " ".join(f"{r['label'][:12]:>12}" for r in rows)
    out = [hdr, "-" * len(hdr)]
    for i, n in enumerate(names):
        out.append(f"{n:<{w}} " + " ".join(f"{r['layers'][i]['snr_db']:12.2f}" for r in rows))
    return "\n".join(out)


def to_json(res: dict, path) -> None:
    def clean(o):
        if isinstance(o, float) and (math.isinf(o) or math.isnan(o)):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o
    text = json.dumps(clean(res), indent=1)
    if str(path) == "-":
        print(text)
    else:
        Path(path).write_text(text + "\n")


def plots(res: dict, outdir) -> list[str]:
    """Writes <model>_layers.png (per-layer SNR per scheme) and <model>_quality.png (bits vs
    quality). Returns the paths; raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    name = res["model"]["name"]
    paths = []
    rows = [r for r in res["results"] if r.get("layers") and not r.get("kv") and not r.get("act")]
    if rows:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        n = len(rows[0]["layers"])
        for r in rows:
            ax.plot(range(n), [l["snr_db"] for l in r["layers"]], marker=".", label=r["label"])
        names = [l["name"] for l in rows[0]["layers"]]
        step = max(1, n // 28)
        ax.set_xticks(range(0, n, step))
        ax.set_xticklabels(names[::step], rotation=90, fontsize=6)
        ax.set_ylabel("weight SNR (dB)")
        ax.set_title(f"{name}: per-layer weight SNR")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        p = outdir / f"{name}_layers.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(str(p))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lm = res["model"]["kind"] == "lm"

    def y_of(r):
        return max(r["kl"] if lm else 1.0 - r["cos_mean"], 1e-9)
    for r in (r for r in res["results"] if "error" not in r):
        bits = r["bits"] if r["bits"] is not None else 16.0
        if r.get("kv") and r["scheme"] is not None:
            # weights + KV cache: a hollow square at the weights' bits, no label
            ax.scatter([bits], [y_of(r)], marker="s", facecolors="none", edgecolors="gray")
            continue
        ax.scatter([bits], [y_of(r)], marker="s" if r.get("kv") else "^" if r.get("act") else "o")
        ax.annotate(r["label"], (bits, y_of(r)), fontsize=7, xytext=(4, 2),
                    textcoords="offset points")
    ax.set_yscale("log")
    ax.set_xlabel("weight bits per value (16 = unquantized weights)")
    ax.set_ylabel("mean KL to the unquantized model (nats)" if lm else "1 - mean cosine")
    ax.set_title(f"{name}: format vs quality" + (
        "\n(hollow squares: the same weights with the KV cache quantized too)"
        if any(r.get("kv") for r in res["results"]) else ""), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    p = outdir / f"{name}_quality.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(str(p))
    return paths
