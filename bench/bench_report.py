#!/usr/bin/env python3
"""bench_report.py LOFP.jsonl TORCH.jsonl [OUT.md] -- joins bench_cuda and bench_torch output into
the markdown tables of BENCHMARKS.md "## CUDA (H200)", with the targets checked."""
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
            target = "≥ 85 % (both passes)"
            met = "yes" if pct >= 85 else "no"
        elif name == "quant_mxfp4_linear":
            target = "≥ 85 %"
            met = "yes" if pct >= 85 else "no"
        p(f"| {name[6:]} | {o['us']:.1f} | {o['bytes'] / 1e6:.1f} | {bw:.2f} | {pct:.0f} % | {target} | {met} |")
    if tq and "quant_nvfp4_linear" in L:
        sp = tq["us"] / L["quant_nvfp4_linear"]["us"]
        te = T.get("torch_nvfp4_quant_eager_8192x8192")
        p(f"\nNVFP4 two-level vs `torch.compile` of the seed-000-style quantizer: {tq['us']:.1f} µs vs "
          f"{L['quant_nvfp4_linear']['us']:.1f} µs = **{sp:.1f}x** (target ≥ 8x: {'met' if sp >= 8 else 'missed'})"
          + (f"; eager torch {te['us']:.0f} µs" if te else ""))
    for nm in ("dequant_nvfp4_bf16", "dequant_mxfp4_bf16"):
        if nm in L:
            o = L[nm]
            p(f"\nDequantize {nm.split('_')[1].upper()} -> bf16 8192²: {o['us']:.1f} µs ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")

    # ---- gemm
    p("\n### W4A16 GEMV / GEMM (bf16 activations, bf16 out; weights rotated over 4 copies)\n")
    p("M <= 256: 20 back-to-back calls per timing (both benches); M = 4096: one call after an L2 flush. "
      "`read floor`: a plain read of the same weight bytes in the same harness.\n")
    p("| weights | M | N x K | lofp µs | read floor µs | cuBLAS bf16 | int4 tinygemm | fp8 rowwise `_scaled_mm` | vs cuBLAS | lofp TFLOP/s | weight TB/s |")
    p("|---|---|---|---|---|---|---|---|---|---|---|")
    for preset in ("nvfp4", "mxfp4"):
        for n, k in ((8192, 8192), (14336, 4096)):
            rf = L.get(f"read_floor_{preset}_n{n}_k{k}")
            for m in (1, 16, 64, 256, 1024, 2048, 4096):
                key = f"w4a16_{preset}_m{m}_n{n}_k{k}"
                o = L.get(key)
                if not o:
                    continue
                t = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
                ti = T.get(f"torch_int4_tinygemm_m{m}_n{n}_k{k}")
                tf8 = T.get(f"torch_fp8_rowwise_m{m}_n{n}_k{k}")
                sp = t["us"] / o["us"] if t else 0
                tf = o["flops"] / o["us"] / 1e6
                wbw = (n * k * (0.5 + (1 / 16 if preset == "nvfp4" else 1 / 32))) / o["us"] / 1e6
                f = lambda x: f"{x['us']:.1f}" if x else "-"
                p(f"| {preset} | {m} | {n} x {k} | {o['us']:.1f} | {f(rf) if m <= 64 else '-'} | {f(t)} | {f(ti)} | {f(tf8)} | "
                  f"{sp:.2f}x | {tf:.1f} | {wbw:.2f} |")
    # ---- W4A8 (opt-in): MXFP4 weights x E4M3 activations on the FP8 tensor cores
    w8 = [(n, k, m) for n, k in ((8192, 8192), (14336, 4096)) for m in (1, 16, 64, 256, 1024, 2048, 4096)
          if f"w4a8_mxfp4_m{m}_n{n}_k{k}" in L]
    if w8:
        p("\n### W4A8 (opt-in): MXFP4 weights x per-token E4M3 activations, FP8 tensor cores, bf16 out\n")
        p("Target: the FP8 rowwise `torch._scaled_mm` time at each M. `W4A8 GEMM` is the kernel on activations "
          "quantized before the timed calls (`lofp_cuda_w4a8_gemm_quantized`), against `_scaled_mm` likewise; "
          "`quant + GEMM` is the production call `lofp_cuda_w4a8_gemm`, whose route is shown (`large` = weights cast "
          "to E4M3 + cuBLASLt FP8 with rowwise scales, `kernel` = activation quantize + the FP8 wgmma kernel); "
          "`torch quant + _scaled_mm` quantizes inside the call with eager torch ops (launch-bound at small M).\n")
        p("| M | N x K | W4A8 GEMM µs | `_scaled_mm` µs | met (GEMM ≤ `_scaled_mm`) | W4A8 quant + GEMM µs | route | quantize µs | torch quant + `_scaled_mm` µs | W4A16 MXFP4 µs | cuBLAS bf16 µs |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for n, k, m in w8:
            o = L[f"w4a8_mxfp4_m{m}_n{n}_k{k}"]
            og = L.get(f"w4a8gemm_mxfp4_m{m}_n{n}_k{k}")
            oq = L.get(f"w4a8quant_mxfp4_m{m}_n{n}_k{k}")
            tf8 = T.get(f"torch_fp8_rowwise_m{m}_n{n}_k{k}")
            tq8 = T.get(f"torch_fp8_rowwise_q_m{m}_n{n}_k{k}")
            w16 = L.get(f"w4a16_mxfp4_m{m}_n{n}_k{k}")
            tbf = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
            f = lambda x: f"{x['us']:.1f}" if x else "-"
            met = ("yes" if og["us"] <= tf8["us"] else "no") if (tf8 and og) else "-"
            p(f"| {m} | {n} x {k} | {f(og)} | {f(tf8)} | {met} | {o['us']:.1f} | {o.get('route', '-')} | {f(oq)} | {f(tq8)} | "
              f"{f(w16)} | {f(tbf)} |")
    # the two routes of lofp_cuda_w4a8_gemm forced: the crossover behind LOFP_CUDA_W4A8_LARGE_M_MIN
    rk8 = [kk for kk in L if kk.startswith("w4a8_route_")]
    if rk8:
        p("\nW4A8 routes of `lofp_cuda_w4a8_gemm` (quantize included, bf16 out), both forced: `large` = E4M3 weight "
          "cast + cuBLASLt FP8 GEMM with per-row / per-token scales (gemm_w4a8_large.cu), `kernel` = the FP8 wgmma "
          "kernel; the production call takes `large` from M = LOFP_CUDA_W4A8_LARGE_M_MIN.\n")
        p("| N x K | M | large µs | kernel µs | `_scaled_mm` µs | torch quant + `_scaled_mm` µs | cuBLAS bf16 µs | faster | large host µs/call |")
        p("|---|---|---|---|---|---|---|---|---|")
        for n, k in ((8192, 8192), (14336, 4096)):
            for m in (64, 256, 1024, 2048, 4096):
                lg = L.get(f"w4a8_route_large_mxfp4_m{m}_n{n}_k{k}")
                kn = L.get(f"w4a8_route_kernel_mxfp4_m{m}_n{n}_k{k}")
                if not lg and not kn:
                    continue
                f = lambda x: f"{x['us']:.1f}" if x else "-"
                fast = "-" if not (lg and kn) else ("large" if lg["us"] < kn["us"] else "kernel")
                hu = f"{lg.get('host_us', 0):.1f}" if lg else "-"
                p(f"| {n} x {k} | {m} | {f(lg)} | {f(kn)} | {f(T.get(f'torch_fp8_rowwise_m{m}_n{n}_k{k}'))} | "
                  f"{f(T.get(f'torch_fp8_rowwise_q_m{m}_n{n}_k{k}'))} | {f(T.get(f'torch_bf16_mm_m{m}_n{n}_k{k}'))} | {fast} | {hu} |")
        for kk in L:
            if kk.startswith("w4a8_route_") and kk.endswith("_error"):
                p(f"\n`{kk}`: {L[kk].get('error', '?')}")
    for nm, o in L.items():
        if nm.startswith("w4_prepare_"):
            p(f"\nOne-time load step `lofp_cuda_w4_prepare` ({nm[11:]}, checkpoint-layout codes and scales in): "
              f"{o['us']:.1f} µs of GPU time ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")
    # the two routes of the W4A16 dispatch at large M (lofp_cuda_w4a16_gemm_route): the crossover
    rk = [kk for kk in L if kk.startswith("w4a16_route_")]
    if rk:
        p("\nW4A16 routes at large M (bf16 out): `large` = dequantize to bf16 + cuBLASLt (gemm_large.cu), "
          "`kernel` = the wgmma kernel; the production path takes `large` from M = "
          "LOFP_CUDA_LARGE_M_MIN. % = cuBLAS bf16 time / route time.\n")
        p("| weights | N x K | M | large µs | kernel µs | cuBLAS bf16 µs | large % | kernel % | faster | large host µs/call |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for preset in ("nvfp4", "mxfp4"):
            for n, k in ((8192, 8192), (14336, 4096)):
                for m in (256, 512, 1024, 2048, 4096):
                    lg = L.get(f"w4a16_route_large_{preset}_m{m}_n{n}_k{k}")
                    kn = L.get(f"w4a16_route_kernel_{preset}_m{m}_n{n}_k{k}")
                    if not lg and not kn:
                        continue
                    t = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
                    f = lambda x: f"{x['us']:.1f}" if x else "-"
                    pc = lambda x: f"{100 * t['us'] / x['us']:.0f} %" if x and t else "-"
                    fast = "-" if not (lg and kn) else ("large" if lg["us"] < kn["us"] else "kernel")
                    hu = f"{lg.get('host_us', 0):.1f}" if lg else "-"
                    p(f"| {preset} | {n} x {k} | {m} | {f(lg)} | {f(kn)} | {f(t)} | {pc(lg)} | {pc(kn)} | {fast} | {hu} |")
    # the wgmma tile configurations forced one by one (lofp_cuda_wgmma_test_config), M = 64 / 256
    if any(kk.startswith("w4a16_wgcfg") for kk in L):
        names = ["(1,64) persistent", "(2,128) persistent", "(1,64) KS 2", "(2,128) KS 2"]
        p("\nW4A16 wgmma kernel (warp-specialised) per configuration (MT, TN), persistent or K split over a cluster of 2, µs (bf16 out); default = the automatic choice.\n")
        p("| weights | N x K | M | default | " + " | ".join(names) + " |")
        p("|---|---|---|---|" + "---|" * len(names))
        for preset in ("nvfp4", "mxfp4"):
            for n, k in ((8192, 8192), (14336, 4096)):
                for m in (64, 256):
                    d = L.get(f"w4a16_{preset}_m{m}_n{n}_k{k}")
                    cs = [L.get(f"w4a16_wgcfg{c}_{preset}_m{m}_n{n}_k{k}") for c in range(len(names))]
                    if not any(cs):
                        continue
                    f = lambda x: f"{x['us']:.1f}" if x else "-"
                    p(f"| {preset} | {n} x {k} | {m} | {f(d)} | " + " | ".join(f(x) for x in cs) + " |")
    if "w4a16_route_large_unavailable" in L:
        p("\n**The large-M route did not run: cuBLASLt could not be opened on this machine.**")

    # ---- attention
    p("\n### UltraQuant decode attention, B=8, Hq=32, Hk=8, D=128, N=32768, block 16\n")
    ts = T.get("torch_sdpa_gqa_B8_Hq32_Hk8_D128_N32768")
    p("| kernel | µs | KV TB/s | vs SDPA bf16 | FP4 floor (bytes / copy BW) | target ≤ 90 µs |")
    p("|---|---|---|---|---|---|")
    for name, o in L.items():
        if not name.startswith("uq_decode"):
            continue
        bw = o["bytes"] / o["us"] / 1e6
        floor = o["bytes"] / (cbw * 1e6) if cbw else 0
        sp = ts["us"] / o["us"] if ts else 0
        p(f"| {name} | {o['us']:.1f} | {bw:.2f} | {sp:.2f}x | {floor:.1f} µs | {'yes' if o['us'] <= 90 else 'no'} |")
    if ts:
        p(f"\nSDPA bf16 (enable_gqa): {ts['us']:.1f} µs ({ts['bytes'] / ts['us'] / 1e6:.2f} TB/s).")
    if "uq_store_64k_tokens_hk8_d128" in L:
        o = L["uq_store_64k_tokens_hk8_d128"]
        p(f"\nUltraQuant store, 65536 tokens x Hk 8 x D 128 bf16: {o['us']:.1f} µs ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")
    # ---- the decode GEMVs of an 8B Llama (bench_cuda decode): production rule, sweep, floor
    dec = [(n, o) for n, o in L.items() if n.startswith("decode_nvfp4_") and "token" not in n]
    if dec:
        p("\n### Decode GEMVs of an 8B Llama (NVFP4, weight copies rotating past 2x L2)\n")
        p("| shape | M | N x K | lofp µs | read floor µs | % of floor | best sweep config µs (cfg) | per token |")
        p("|---|---|---|---|---|---|---|---|")
        for name, o in dec:
            what = name[len("decode_nvfp4_"):].rsplit("_m", 1)[0]
            sw = [(x["us"], x["cfg"]) for nm, x in L.items()
                  if nm.startswith("decode_gvcfg") and nm.endswith(f"_nvfp4_{what}_m{o['m']}_n{o['n']}_k{o['k']}")]
            best = min(sw) if sw else None
            bs = f"{best[0]:.1f} ({best[1]})" if best else "-"
            p(f"| {what} | {o['m']} | {o['n']} x {o['k']} | {o['us']:.1f} | {o['read_floor_us']:.1f} | "
              f"{100 * o['read_floor_us'] / o['us']:.0f} % | {bs} | {o['per_token']} |")
        for m in (1, 16):
            o = L.get(f"decode_nvfp4_token_m{m}")
            if o:
                p(f"\nM = {m}: {o['us'] / 1e3:.2f} ms of GEMV per token (read floor {o['read_floor_us'] / 1e3:.2f} ms).")
    # ---- targets (BENCHMARKS.md "CUDA": the per-job goals the tables are judged against)
    def us(name, src=L):
        o = src.get(name)
        return o["us"] if o else None
    rows = []
    g = lambda m: us(f"w4a16_nvfp4_m{m}_n8192_k8192")
    for m, tgt in ((1, 11.0), (16, 14.0), (64, 25.0), (256, 46.0)):
        v = g(m)
        if v is not None:
            rows.append((f"W4A16 NVFP4 M={m} 8192²", f"{v:.1f} µs", f"≤ {tgt:g} µs", v <= tgt))
    v, c = g(4096), us("torch_bf16_mm_m4096_n8192_k8192", T)
    if v and c:
        rows.append(("W4A16 NVFP4 M=4096 8192²", f"{v:.0f} µs = {100 * c / v:.0f} % of cuBLAS ({c:.0f})", "≥ 85 % of cuBLAS", c / v >= 0.85))
    v = us("dequant_nvfp4_bf16")
    if v:
        rows.append(("NVFP4 → bf16 dequantize 8192²", f"{v:.1f} µs ({L['dequant_nvfp4_bf16']['bytes'] / v / 1e6:.2f} TB/s)", "≤ 50 µs", v <= 50))
    o = L.get("quant_mxfp4_linear")
    if o and cbw:
        pct = 100 * o["bytes"] / o["us"] / 1e6 / cbw
        rows.append(("MXFP4 quantize 8192²", f"{o['us']:.1f} µs ({pct:.0f} % of copy)", "≥ 85 % of copy", pct >= 85))
    o = L.get("quant_nvfp4_linear")
    if o and cbw:
        pct = 100 * o["bytes"] / o["us"] / 1e6 / cbw
        rows.append(("NVFP4 two-level quantize 8192²", f"{o['us']:.1f} µs ({pct:.0f} % of the two-pass floor)", "≥ 85 %", pct >= 85))
    v = us("uq_decode_B8_Hq32_Hk8_D128_N327680")
    if v:
        rows.append(("UltraQuant decode B8 Hq32 Hk8 D128 N32k", f"{v:.1f} µs", "≤ 90 µs", v <= 90))
    o = L.get("uq_store_64k_tokens_hk8_d128")
    if o:
        bw = o["bytes"] / o["us"] / 1e6
        rows.append(("UltraQuant store 65536 × 8 × 128", f"{o['us']:.1f} µs ({bw:.2f} TB/s)", "≥ 2.5 TB/s", bw >= 2.5))
    if rows:
        p("\n### Targets\n")
        p("| job | measured | target | met |")
        p("|---|---|---|---|")
        for r in rows:
            p(f"| {r[0]} | {r[1]} | {r[2]} | {'yes' if r[3] else 'no'} |")
    text = "\n".join(out) + "\n"
    print(text)
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
