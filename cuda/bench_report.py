#!/usr/bin/env python3
"""bench_report.py LOFP.jsonl TORCH.jsonl [OUT.md] -- joins bench_cuda and bench_torch output into
the markdown tables of BENCHMARKS.md "## CUDA (H200)", with the issue's targets checked."""
import json
import sys


def load(path):
    d = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    o = json.loads(line)
                    d[o["name"]] = o
                except Exception:
                    pass
    return d


def main():
    L, T = load(sys.argv[1]), load(sys.argv[2])
    out = []
    p = out.append
    dev = L.get("device", {}).get("device", "?")
    p(f"Device: {dev}; torch {T.get('torch', {}).get('version', '?')}. Times are medians of CUDA-event "
      "timings (µs); bandwidth counts bytes read + written.")
    copy = L.get("copy_1GiB")
    tcopy = T.get("torch_copy_1GiB")
    cbw = copy["bytes"] / copy["us"] / 1e6 if copy else None  # TB/s
    if copy:
        p(f"\nCopy bandwidth (cudaMemcpy D2D 1 GiB): **{cbw:.3f} TB/s**"
          + (f"; torch copy_: {tcopy['bytes'] / tcopy['us'] / 1e6:.3f} TB/s" if tcopy else ""))

    # ---- quantize
    p("\n### Quantize, 8192 x 8192 bf16\n")
    p("| kernel | µs | bytes moved (MB) | TB/s | % of copy BW | target | met |")
    p("|---|---|---|---|---|---|---|")
    tq = T.get("torch_nvfp4_quant_compiled_8192x8192")
    for name, o in L.items():
        if not name.startswith("quant_"):
            continue
        bw = o["bytes"] / o["us"] / 1e6
        pct = 100 * bw / cbw if cbw else 0
        target, met = "", ""
        if name == "quant_nvfp4_linear":
            target = "≥ 70 % (both passes)"
            met = "yes" if pct >= 70 else "no"
        elif o.get("passes") == 1 and not name.startswith("quant_nvfp4") and "ultraquant" not in name:
            target = "≥ 75 % (single pass)"
            met = "yes" if pct >= 75 else "no"
        p(f"| {name[6:]} | {o['us']:.1f} | {o['bytes'] / 1e6:.1f} | {bw:.2f} | {pct:.0f} % | {target} | {met} |")
    if tq and "quant_nvfp4_linear" in L:
        sp = tq["us"] / L["quant_nvfp4_linear"]["us"]
        te = T.get("torch_nvfp4_quant_eager_8192x8192")
        p(f"\nNVFP4 two-level vs `torch.compile` of the seed-000-style quantizer: {tq['us']:.1f} µs vs "
          f"{L['quant_nvfp4_linear']['us']:.1f} µs = **{sp:.1f}x** (target ≥ 8x: {'met' if sp >= 8 else 'missed'})"
          + (f"; eager torch {te['us']:.0f} µs" if te else ""))
    if "dequant_nvfp4_bf16" in L:
        o = L["dequant_nvfp4_bf16"]
        p(f"\nDequantize NVFP4 -> bf16: {o['us']:.1f} µs ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")

    # ---- gemm
    p("\n### W4A16 GEMV / GEMM (bf16 activations, bf16 out; weights rotated over 4 copies)\n")
    p("| weights | M | N x K | lofp µs | best cfg µs | cuBLAS bf16 µs | speedup | lofp TFLOP/s | % of cuBLAS TFLOP/s | weight TB/s | target | met |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for preset in ("nvfp4", "mxfp4"):
        for n, k in ((8192, 8192), (14336, 4096)):
            for m in (1, 16, 256, 4096):
                key = f"w4a16_{preset}_m{m}_n{n}_k{k}"
                o = L.get(key)
                t = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
                if not o:
                    continue
                best = min([v["us"] for kk, v in L.items() if kk.startswith(key + "_cfg")] + [o["us"]])
                sp = t["us"] / o["us"] if t else 0
                tf = o["flops"] / o["us"] / 1e6
                pct = 100 * t["us"] / o["us"] if t else 0
                wbw = (n * k * (0.5 + (1 / 16 if preset == "nvfp4" else 1 / 32))) / o["us"] / 1e6
                if m == 1:
                    target, ok = "≥ 3x", sp >= 3
                elif m == 16:
                    target, ok = "≥ 2.5x", sp >= 2.5
                elif m == 256:
                    target, ok = "≥ 1x", sp >= 1
                else:
                    target, ok = "≥ 50 % TFLOP/s", pct >= 50
                p(f"| {preset} | {m} | {n} x {k} | {o['us']:.1f} | {best:.1f} | {t['us'] if t else float('nan'):.1f} | "
                  f"{sp:.2f}x | {tf:.1f} | {pct:.0f} % | {wbw:.2f} | {target} | {'yes' if ok else 'no'} |")
    cfgs = sorted((kk, v["us"]) for kk, v in L.items() if "_cfg" in kk)
    if cfgs:
        p("\nGEMV configuration sweep (MT weight tiles per warp x WK warps per CTA), µs:\n")
        p("| case | " + " | ".join(["default"] + sorted({kk.split('_cfg')[1] for kk, _ in cfgs})) + " |")
        cols = sorted({kk.split('_cfg')[1] for kk, _ in cfgs})
        p("|---|" + "---|" * (len(cols) + 1))
        for key in sorted({kk.split('_cfg')[0] for kk, _ in cfgs}):
            row = [f"{L[key]['us']:.1f}" if key in L else "-"]
            for c in cols:
                v = L.get(f"{key}_cfg{c}")
                row.append(f"{v['us']:.1f}" if v else "-")
            p(f"| {key[6:]} | " + " | ".join(row) + " |")

    # ---- attention
    p("\n### UltraQuant decode attention, B=8, Hq=32, Hk=8, D=128, N=32768, block 16\n")
    ts = T.get("torch_sdpa_gqa_B8_Hq32_Hk8_D128_N32768")
    p("| kernel | µs | KV TB/s | vs SDPA bf16 | FP4 floor (bytes / copy BW) | target ≤ 100 µs |")
    p("|---|---|---|---|---|---|")
    for name, o in L.items():
        if not name.startswith("uq_decode"):
            continue
        bw = o["bytes"] / o["us"] / 1e6
        floor = o["bytes"] / (cbw * 1e6) if cbw else 0
        sp = ts["us"] / o["us"] if ts else 0
        p(f"| {name} | {o['us']:.1f} | {bw:.2f} | {sp:.2f}x | {floor:.1f} µs | {'yes' if o['us'] <= 100 else 'no'} |")
    if ts:
        p(f"\nSDPA bf16 (enable_gqa): {ts['us']:.1f} µs ({ts['bytes'] / ts['us'] / 1e6:.2f} TB/s).")
    if "uq_store_64k_tokens_hk8_d128" in L:
        o = L["uq_store_64k_tokens_hk8_d128"]
        p(f"\nUltraQuant store, 65536 tokens x Hk 8 x D 128 bf16: {o['us']:.1f} µs ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")
    text = "\n".join(out) + "\n"
    print(text)
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
