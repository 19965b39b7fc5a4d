#!/usr/bin/env python3
"""bench_report.py LOFP.jsonl TORCH.jsonl [OUT.md] [--llama FILE] [--host FILE] -- joins bench_cuda
and bench_torch output into the markdown tables of BENCHMARKS.md "## CUDA (H200)", with the
targets checked.

  --llama FILE  the JSON of `python3 bench/gpu_llama.py --w4a8 --json FILE` (end to end prefill
                and decode of the bf16, W4A16 NVFP4 and W4A8 MXFP4 models)
  --host FILE   the output of `python3 bench/torch_overhead.py` (its JSON lines: host time of one
                eager lofp.torch call; other lines are skipped)
"""
import argparse
import json

SHAPES = ((8192, 8192), (14336, 4096))  # N x K of the GEMM tables


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


def load_json_lines(path):
    """the JSON objects of a file, one a line; other lines skipped"""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def us_cell(o):
    """a result's median time in µs, one decimal; '-' where the result is missing"""
    return f"{o['us']:.1f}" if o else "-"


def yes_no(ok):
    return "yes" if ok else "no"


def table(p, cols, rows):
    """a markdown table through p: the header line, its rule, then one line per row of cells"""
    p("| " + " | ".join(cols) + " |")
    p("|" + "---|" * len(cols))
    for r in rows:
        p("| " + " | ".join(r) + " |")


def us_of(src, name):
    o = src.get(name)
    return o["us"] if o else None


def copy_pct(o, cbw):
    """a quantizer's bytes moved per second as a percentage of the copy bandwidth (TB/s)"""
    return 100 * o["bytes"] / o["us"] / 1e6 / cbw


def quantize_section(p, L, T, cbw):
    p("\n### Quantize, 8192 x 8192 bf16\n")
    rows = []
    for name, o in L.items():
        if not name.startswith("quant_"):
            continue
        bw = o["bytes"] / o["us"] / 1e6
        pct = 100 * bw / cbw if cbw else 0
        target, met = "", ""
        if name == "quant_nvfp4_linear":
            target = "≥ 85 % (both passes)"
            met = yes_no(pct >= 85)
        elif name == "quant_mxfp4_linear":
            target = "≥ 85 %"
            met = yes_no(pct >= 85)
        rows.append((name[6:], us_cell(o), f"{o['bytes'] / 1e6:.1f}", f"{bw:.2f}", f"{pct:.0f} %", target, met))
    table(p, ("kernel", "µs", "bytes moved (MB)", "TB/s", "% of copy BW", "target", "met"), rows)
    tq = T.get("torch_nvfp4_quant_compiled_8192x8192")
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


def w4a16_section(p, L, T):
    p("\n### W4A16 GEMV / GEMM (bf16 activations, bf16 out; weights rotated over 4 copies)\n")
    p("M <= 256: 20 back-to-back calls per timing (both benches); M = 4096: one call after an L2 flush. "
      "`read floor`: a plain read of the same weight bytes in the same harness.\n")
    rows = []
    for preset in ("nvfp4", "mxfp4"):
        for n, k in SHAPES:
            rf = L.get(f"read_floor_{preset}_n{n}_k{k}")
            for m in (1, 16, 64, 256, 512, 1024, 2048, 4096):
                o = L.get(f"w4a16_{preset}_m{m}_n{n}_k{k}")
                if not o:
                    continue
                t = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
                ti = T.get(f"torch_int4_tinygemm_m{m}_n{n}_k{k}")
                tf8 = T.get(f"torch_fp8_rowwise_m{m}_n{n}_k{k}")
                sp = t["us"] / o["us"] if t else 0
                tf = o["flops"] / o["us"] / 1e6
                wbw = (n * k * (0.5 + (1 / 16 if preset == "nvfp4" else 1 / 32))) / o["us"] / 1e6
                rows.append((preset, str(m), f"{n} x {k}", us_cell(o), us_cell(rf) if m <= 64 else "-", us_cell(t),
                             us_cell(ti), us_cell(tf8), f"{sp:.2f}x", f"{tf:.1f}", f"{wbw:.2f}"))
    table(p, ("weights", "M", "N x K", "lofp µs", "read floor µs", "cuBLAS bf16", "int4 tinygemm",
              "fp8 rowwise `_scaled_mm`", "vs cuBLAS", "lofp TFLOP/s", "weight TB/s"), rows)


def w4a8_section(p, L, T):
    """W4A8 (opt-in): MXFP4 weights x E4M3 activations on the FP8 tensor cores, and its two routes"""
    w8 = [(n, k, m) for n, k in SHAPES for m in (1, 16, 64, 256, 1024, 2048, 4096)
          if f"w4a8_mxfp4_m{m}_n{n}_k{k}" in L]
    if w8:
        p("\n### W4A8 (opt-in): MXFP4 weights x per-token E4M3 activations, FP8 tensor cores, bf16 out\n")
        p("Target: the FP8 rowwise `torch._scaled_mm` time at each M. `W4A8 GEMM` is the kernel on activations "
          "quantized before the timed calls (`lofp_cuda_w4a8_gemm_quantized`), against `_scaled_mm` likewise; "
          "`quant + GEMM` is the production call `lofp_cuda_w4a8_gemm`, whose route is shown (`large` = weights cast "
          "to E4M3 + cuBLASLt FP8 with rowwise scales, `kernel` = activation quantize + the FP8 wgmma kernel); "
          "`torch quant + _scaled_mm` quantizes inside the call with eager torch ops (launch-bound at small M).\n")
        rows = []
        for n, k, m in w8:
            o = L[f"w4a8_mxfp4_m{m}_n{n}_k{k}"]
            og = L.get(f"w4a8gemm_mxfp4_m{m}_n{n}_k{k}")
            tf8 = T.get(f"torch_fp8_rowwise_m{m}_n{n}_k{k}")
            met = yes_no(og["us"] <= tf8["us"]) if (tf8 and og) else "-"
            rows.append((str(m), f"{n} x {k}", us_cell(og), us_cell(tf8), met, us_cell(o), o.get("route", "-"),
                         us_cell(L.get(f"w4a8quant_mxfp4_m{m}_n{n}_k{k}")),
                         us_cell(T.get(f"torch_fp8_rowwise_q_m{m}_n{n}_k{k}")),
                         us_cell(L.get(f"w4a16_mxfp4_m{m}_n{n}_k{k}")), us_cell(T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}"))))
        table(p, ("M", "N x K", "W4A8 GEMM µs", "`_scaled_mm` µs", "met (GEMM ≤ `_scaled_mm`)", "W4A8 quant + GEMM µs",
                  "route", "quantize µs", "torch quant + `_scaled_mm` µs", "W4A16 MXFP4 µs", "cuBLAS bf16 µs"), rows)
    # the two routes of lofp_cuda_w4a8_gemm forced: the crossover behind LOFP_CUDA_W4A8_LARGE_M_MIN
    if any(kk.startswith("w4a8_route_") for kk in L):
        p("\nW4A8 routes of `lofp_cuda_w4a8_gemm` (quantize included, bf16 out), both forced: `large` = E4M3 weight "
          "cast + cuBLASLt FP8 GEMM with per-row / per-token scales (gemm_w4a8_large.cu), `kernel` = the FP8 wgmma "
          "kernel; the production call takes `large` from M = LOFP_CUDA_W4A8_LARGE_M_MIN.\n")
        rows = []
        for n, k in SHAPES:
            for m in (64, 256, 1024, 2048, 4096):
                lg = L.get(f"w4a8_route_large_mxfp4_m{m}_n{n}_k{k}")
                kn = L.get(f"w4a8_route_kernel_mxfp4_m{m}_n{n}_k{k}")
                if not lg and not kn:
                    continue
                fast = "-" if not (lg and kn) else ("large" if lg["us"] < kn["us"] else "kernel")
                hu = f"{lg.get('host_us', 0):.1f}" if lg else "-"
                rows.append((f"{n} x {k}", str(m), us_cell(lg), us_cell(kn),
                             us_cell(T.get(f"torch_fp8_rowwise_m{m}_n{n}_k{k}")),
                             us_cell(T.get(f"torch_fp8_rowwise_q_m{m}_n{n}_k{k}")),
                             us_cell(T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")), fast, hu))
        table(p, ("N x K", "M", "large µs", "kernel µs", "`_scaled_mm` µs", "torch quant + `_scaled_mm` µs",
                  "cuBLAS bf16 µs", "faster", "large host µs/call"), rows)
        for kk in L:
            if kk.startswith("w4a8_route_") and kk.endswith("_error"):
                p(f"\n`{kk}`: {L[kk].get('error', '?')}")


def w4a16_routes_section(p, L, T):
    for nm, o in L.items():
        if nm.startswith("w4_prepare_"):
            p(f"\nOne-time load step `lofp_cuda_w4_prepare` ({nm[11:]}, checkpoint-layout codes and scales in): "
              f"{o['us']:.1f} µs of GPU time ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")
    # the two routes of the W4A16 dispatch at large M (lofp_cuda_w4a16_gemm_route): the crossover
    if any(kk.startswith("w4a16_route_") for kk in L):
        p("\nW4A16 routes at large M (bf16 out): `large` = dequantize to bf16 + cuBLASLt (gemm_large.cu), "
          "`kernel` = the wgmma kernel; the production path takes `large` from M = "
          "LOFP_CUDA_LARGE_M_MIN. % = cuBLAS bf16 time / route time.\n")
        rows = []
        for preset in ("nvfp4", "mxfp4"):
            for n, k in SHAPES:
                for m in (256, 512, 1024, 2048, 4096):
                    lg = L.get(f"w4a16_route_large_{preset}_m{m}_n{n}_k{k}")
                    kn = L.get(f"w4a16_route_kernel_{preset}_m{m}_n{n}_k{k}")
                    if not lg and not kn:
                        continue
                    t = T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")

                    def pc(x):
                        return f"{100 * t['us'] / x['us']:.0f} %" if x and t else "-"
                    fast = "-" if not (lg and kn) else ("large" if lg["us"] < kn["us"] else "kernel")
                    hu = f"{lg.get('host_us', 0):.1f}" if lg else "-"
                    rows.append((preset, f"{n} x {k}", str(m), us_cell(lg), us_cell(kn), us_cell(t), pc(lg), pc(kn),
                                 fast, hu))
        table(p, ("weights", "N x K", "M", "large µs", "kernel µs", "cuBLAS bf16 µs", "large %", "kernel %", "faster",
                  "large host µs/call"), rows)
    # the wgmma tile configurations forced one by one (lofp_cuda_wgmma_test_config), M = 64 / 256 / 512 / 1024
    if any(kk.startswith("w4a16_wgcfg") for kk in L):
        names = ["(1,64) persistent", "(2,128) persistent", "(1,64) KS 2", "(2,128) KS 2", "(1,256) persistent",
                 "(1,256) KS 2"]
        p("\nW4A16 wgmma kernel (warp-specialised) per configuration (MT, TN), persistent or K split over a cluster of 2, "
          "µs (bf16 out); default = the production call (the automatic choice).\n")
        rows = []
        for preset in ("nvfp4", "mxfp4"):
            for n, k in SHAPES:
                for m in (64, 256, 512, 1024):
                    cs = [L.get(f"w4a16_wgcfg{c}_{preset}_m{m}_n{n}_k{k}") for c in range(len(names))]
                    if not any(cs):
                        continue
                    rows.append([preset, f"{n} x {k}", str(m), us_cell(L.get(f"w4a16_{preset}_m{m}_n{n}_k{k}"))]
                                + [us_cell(x) for x in cs])
        table(p, ["weights", "N x K", "M", "default"] + names, rows)
    if "w4a16_route_large_unavailable" in L:
        p("\n**The large-M route did not run: cuBLASLt could not be opened on this machine.**")


def attention_section(p, L, T, cbw):
    p("\n### UltraQuant decode attention, B=8, Hq=32, Hk=8, D=128, N=32768, block 16\n")
    ts = T.get("torch_sdpa_gqa_B8_Hq32_Hk8_D128_N32768")
    rows = []
    for name, o in L.items():
        if not name.startswith("uq_decode"):
            continue
        bw = o["bytes"] / o["us"] / 1e6
        floor = o["bytes"] / (cbw * 1e6) if cbw else 0
        sp = ts["us"] / o["us"] if ts else 0
        rows.append((name, us_cell(o), f"{bw:.2f}", f"{sp:.2f}x", f"{floor:.1f} µs", yes_no(o["us"] <= 90)))
    table(p, ("kernel", "µs", "KV TB/s", "vs SDPA bf16", "FP4 floor (bytes / copy BW)", "target ≤ 90 µs"), rows)
    if ts:
        p(f"\nSDPA bf16 (enable_gqa): {ts['us']:.1f} µs ({ts['bytes'] / ts['us'] / 1e6:.2f} TB/s).")
    if "uq_store_64k_tokens_hk8_d128" in L:
        o = L["uq_store_64k_tokens_hk8_d128"]
        p(f"\nUltraQuant store, 65536 tokens x Hk 8 x D 128 bf16: {o['us']:.1f} µs ({o['bytes'] / o['us'] / 1e6:.2f} TB/s).")


def decode_section(p, L):
    """the decode GEMVs of an 8B Llama (bench_cuda decode): production rule, sweep, floor"""
    dec = [(n, o) for n, o in L.items() if n.startswith("decode_nvfp4_") and "token" not in n]
    if not dec:
        return
    p("\n### Decode GEMVs of an 8B Llama (NVFP4, weight copies rotating past 2x L2)\n")
    rows = []
    for name, o in dec:
        what = name[len("decode_nvfp4_"):].rsplit("_m", 1)[0]
        sw = [(x["us"], x["cfg"]) for nm, x in L.items()
              if nm.startswith("decode_gvcfg") and nm.endswith(f"_nvfp4_{what}_m{o['m']}_n{o['n']}_k{o['k']}")]
        best = min(sw) if sw else None
        bs = f"{best[0]:.1f} ({best[1]})" if best else "-"
        rows.append((what, str(o["m"]), f"{o['n']} x {o['k']}", us_cell(o), f"{o['read_floor_us']:.1f}",
                     f"{100 * o['read_floor_us'] / o['us']:.0f} %", bs, str(o["per_token"])))
    table(p, ("shape", "M", "N x K", "lofp µs", "read floor µs", "% of floor", "best sweep config µs (cfg)",
              "per token"), rows)
    for m in (1, 16):
        o = L.get(f"decode_nvfp4_token_m{m}")
        if o:
            p(f"\nM = {m}: {o['us'] / 1e3:.2f} ms of GEMV per token (read floor {o['read_floor_us'] / 1e3:.2f} ms).")


def targets(L, T, cbw):
    """the older per-job goals (BENCHMARKS.md "CUDA"): (job, measured, target, met) rows"""
    rows = []

    def g(m):
        return us_of(L, f"w4a16_nvfp4_m{m}_n8192_k8192")
    for m, tgt in ((1, 11.0), (16, 14.0), (64, 25.0), (256, 46.0)):
        v = g(m)
        if v is not None:
            rows.append((f"W4A16 NVFP4 M={m} 8192²", f"{v:.1f} µs", f"≤ {tgt:g} µs", v <= tgt))
    v, c = g(4096), us_of(T, "torch_bf16_mm_m4096_n8192_k8192")
    if v and c:
        rows.append(("W4A16 NVFP4 M=4096 8192²", f"{v:.0f} µs = {100 * c / v:.0f} % of cuBLAS ({c:.0f})", "≥ 85 % of cuBLAS", c / v >= 0.85))
    v = us_of(L, "dequant_nvfp4_bf16")
    if v:
        rows.append(("NVFP4 → bf16 dequantize 8192²", f"{v:.1f} µs ({L['dequant_nvfp4_bf16']['bytes'] / v / 1e6:.2f} TB/s)", "≤ 50 µs", v <= 50))
    o = L.get("quant_mxfp4_linear")
    if o and cbw:
        pct = copy_pct(o, cbw)
        rows.append(("MXFP4 quantize 8192²", f"{o['us']:.1f} µs ({pct:.0f} % of copy)", "≥ 85 % of copy", pct >= 85))
    o = L.get("quant_nvfp4_linear")
    if o and cbw:
        pct = copy_pct(o, cbw)
        rows.append(("NVFP4 two-level quantize 8192²", f"{o['us']:.1f} µs ({pct:.0f} % of the two-pass floor)", "≥ 85 %", pct >= 85))
    v = us_of(L, "uq_decode_B8_Hq32_Hk8_D128_N327680")
    if v:
        rows.append(("UltraQuant decode B8 Hq32 Hk8 D128 N32k", f"{v:.1f} µs", "≤ 90 µs", v <= 90))
    o = L.get("uq_store_64k_tokens_hk8_d128")
    if o:
        bw = o["bytes"] / o["us"] / 1e6
        rows.append(("UltraQuant store 65536 × 8 × 128", f"{o['us']:.1f} µs ({bw:.2f} TB/s)", "≥ 2.5 TB/s", bw >= 2.5))
    return rows


def llama_models(res):
    """(bf16, W4A16, W4A8) entries of gpu_llama.py's JSON list, None where absent: found by their
    "model" name; an entry without one counts by position (bf16 first, W4A16 second)"""
    ms = [r for r in res if isinstance(r, dict) and "prefill_ms" in r] if isinstance(res, list) else []

    def pick(word, pos):
        for r in ms:
            if word in str(r.get("model", "")):
                return r
        if pos is not None and pos < len(ms) and "model" not in ms[pos]:
            return ms[pos]
        return None
    return pick("bf16", 0), pick("W4A16", 1), pick("W4A8", None)


def llama_rows(res):
    """end to end: prefill time ratios and CUDA-graph decode tok/s ratios against bf16, with the
    kernel-time ratios where the profiler's split is in the file"""
    bf, w16, w8 = llama_models(res)
    rows = []
    if not bf:
        return rows
    for model, label, tgt, tt in ((w8, "W4A8 MXFP4", 1.15, "1.15x"), (w16, "W4A16 NVFP4", 1.0, "1.0x")):
        if not (model and bf.get("prefill_ms") and model.get("prefill_ms")):
            continue
        r = bf["prefill_ms"] / model["prefill_ms"]
        meas = f"{model['prefill_ms']:.1f} ms vs bf16 {bf['prefill_ms']:.1f} ms = {r:.2f}x"
        kb, km = bf.get("prefill_gpu_ms_step"), model.get("prefill_gpu_ms_step")
        if kb and km:
            meas += f"; kernel time {km:.1f} ms vs bf16 {kb:.1f} ms = {kb / km:.2f}x"
        toks = model.get("prefill_tokens")
        what = f"prefill {toks} tokens" if toks else "prefill"
        rows.append((f"End to end {what}, {label} ≥ {tt} bf16", meas, r >= tgt))
    for B, tgt, tt in ((1, 1.6, "1.6x"), (16, 1.2, "1.2x")):
        db, dm = bf.get(f"decode_b{B}") or {}, (w16 or {}).get(f"decode_b{B}") or {}
        x, y = db.get("graph_tok_s"), dm.get("graph_tok_s")
        if not (x and y):
            continue
        meas = f"{y:.0f} vs bf16 {x:.0f} tok/s = {y / x:.2f}x"
        gx, gy = db.get("gpu_tok_s"), dm.get("gpu_tok_s")
        if gx and gy:
            meas += f"; kernel time {gy:.0f} vs bf16 {gx:.0f} tok/s = {gy / gx:.2f}x"
        rows.append((f"End to end decode B={B} tok/s (CUDA graph), W4A16 NVFP4 ≥ {tt} bf16", meas, y / x >= tgt))
    return rows


def targets_fp8_host_e2e(L, T, cbw, llama, host):
    """FP8 route, batched W4A16, attention, host time, end to end: (target, measured, met) rows,
    one where its inputs are present"""
    rows = []
    for preset in ("nvfp4", "mxfp4"):
        for n, k in SHAPES:
            for m in (256, 1024):
                o, c = L.get(f"w4a16_{preset}_m{m}_n{n}_k{k}"), T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
                if o and c:
                    r = c["us"] / o["us"]
                    rows.append((f"W4A16 {preset.upper()} M={m} {n} x {k} ≥ 0.9x cuBLAS bf16",
                                 f"{o['us']:.1f} µs vs cuBLAS {c['us']:.1f} µs = {r:.2f}x", r >= 0.9))
    for n, k in SHAPES:
        for m in (1024, 2048, 4096):
            o, c = L.get(f"w4a8_mxfp4_m{m}_n{n}_k{k}"), T.get(f"torch_bf16_mm_m{m}_n{n}_k{k}")
            if o and c:
                rows.append((f"W4A8 MXFP4 quant + GEMM M={m} {n} x {k} vs cuBLAS bf16 (informational; met = faster)",
                             f"{o['us']:.1f} µs ({o.get('route', '-')} route) vs cuBLAS {c['us']:.1f} µs = "
                             f"{c['us'] / o['us']:.2f}x", o["us"] < c["us"]))
    v = us_of(L, "uq_decode_B8_Hq32_Hk8_D128_N327680")
    if v is not None:
        rows.append(("UltraQuant decode B8 Hq32 Hk8 D128 N32k ≤ 100 µs", f"{v:.1f} µs", v <= 100))
    o = L.get("quant_nvfp4_linear")
    if o and cbw:
        pct = copy_pct(o, cbw)
        rows.append(("NVFP4 two-level quantize 8192² ≥ 85 % of its two-pass floor",
                     f"{o['us']:.1f} µs ({pct:.0f} % of the two-pass floor)", pct >= 85))
    for r in host:
        if r.get("path") == "fast" and str(r.get("layer", "")).startswith("W4A16Linear") and "host_us" in r:
            kern = f" (kernel {r['kernel_us']:.1f} µs)" if "kernel_us" in r else ""
            rows.append((f"Eager lofp.torch {r['layer']} call ≤ 8 µs of host time", f"{r['host_us']:.1f} µs{kern}",
                         r["host_us"] <= 8.0))
    return rows + llama_rows(llama)


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lofp", help="bench_cuda's JSON lines")
    ap.add_argument("torch", help="bench/bench_torch.py's JSON lines")
    ap.add_argument("out", nargs="?", help="also write the report to this file")
    ap.add_argument("--llama", help="the JSON of bench/gpu_llama.py --json")
    ap.add_argument("--host", help="the output of bench/torch_overhead.py")
    return ap.parse_args()


def main():
    a = parse()
    L, T = load(a.lofp), load(a.torch)
    llama = []
    if a.llama:
        with open(a.llama) as f:
            llama = json.load(f)
    host = load_json_lines(a.host) if a.host else []
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
    quantize_section(p, L, T, cbw)
    w4a16_section(p, L, T)
    w4a8_section(p, L, T)
    w4a16_routes_section(p, L, T)
    attention_section(p, L, T, cbw)
    decode_section(p, L)
    rows = targets(L, T, cbw)
    if rows:
        p("\n### Targets\n")
        table(p, ("job", "measured", "target", "met"), [(j, m, t, yes_no(ok)) for j, m, t, ok in rows])
    rows = targets_fp8_host_e2e(L, T, cbw, llama, host)
    if rows:
        p("\n### Targets: FP8 route, batched W4A16, attention, host time, end to end\n")
        table(p, ("target", "measured", "met"), [(t, m, yes_no(ok)) for t, m, ok in rows])
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
