#!/usr/bin/env python3
"""bench_torch.py -- the torch baselines of the CUDA benchmark, measured in the same run as
bench_cuda (scripts/gpu_run.sh). Prints one JSON object per line, like bench_cuda.

  copy_1GiB            device-to-device copy (bytes read + written)
  torch_bf16_mm_*      cuBLAS bf16 A @ W.T, 4 weight copies rotated (> L2), back-to-back calls
  torch_nvfp4_quant_*  torch.compile of an NVFP4 two-level quantizer written here in seed 000's
                       style and SPEC §2's op order (amax pass, global = 2688/amax as
                       reciprocal * 2688, per-block bmax/6 -> UE4M3, g/bs_q, bucketize E2M1)
  torch_sdpa_*         F.scaled_dot_product_attention(enable_gqa=True) decode over a bf16 cache
Timing: CUDA events, warm-up, median; L2 flushed by reading 256 MiB before each call where the
inputs could stay in L2.
"""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

dev = "cuda"
ITERS = int(os.environ.get("LOFP_BENCH_ITERS", "30"))
flush_buf = torch.ones(256 << 20, dtype=torch.uint8, device=dev)
flush_sink = torch.empty((), dtype=torch.uint8, device=dev)


def emit(name, us, nbytes=0.0, flops=0.0, **extra):
    d = {"name": name, "us": round(us, 3), "bytes": nbytes, "flops": flops}
    d.update(extra)
    print(json.dumps(d), flush=True)


def time_us(fn, flush=True, batch=1, iters=ITERS):
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    ts = []
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    for i in range(iters):
        if flush:
            # a read of 256 MiB (not a fill): L2 ends up holding clean, unrelated lines, so no
            # write-back of the flush is charged to the timed call (same as bench_cuda.cu)
            flush_sink.copy_(flush_buf.max())
        a.record()
        for j in range(batch):
            fn(i * batch + j)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / batch)
    return statistics.median(ts)


def bench_copy():
    n = 1 << 30
    x = torch.empty(n, dtype=torch.uint8, device=dev)
    x.fill_(1)
    y = torch.empty_like(x)
    us = time_us(lambda i: y.copy_(x), flush=False)
    emit("torch_copy_1GiB", us, 2.0 * n)


def bench_mm():
    """cuBLAS bf16, and the weight-compressed peers a Hopper user has: int4 tinygemm
    (torch._weight_int4pack_mm, group 32) and FP8 rowwise W8A8 (torch._scaled_mm). Weights rotate
    over 4 copies (all > L2 together); M <= 256 as 20 back-to-back calls."""
    for n, k in ((8192, 8192), (14336, 4096)):
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(4)]
        peers = {}
        try:  # int4 tinygemm, group 32
            w8 = torch.randint(0, 256, (n, k // 2), device=dev, dtype=torch.uint8)
            packs = [torch._convert_weight_to_int4pack(w8, 8) for _ in range(4)]
            sz = torch.rand(k // 32, n, 2, device=dev, dtype=torch.bfloat16)
            peers["int4_tinygemm"] = lambda a: (lambda i: torch._weight_int4pack_mm(a, packs[i % 4], 32, sz))
        except Exception as e:
            print(json.dumps({"name": "torch_int4_tinygemm_error", "error": repr(e)[:300]}), flush=True)
        try:  # FP8 rowwise W8A8: `fp8_rowwise` is torch._scaled_mm alone on activations quantized
            # per token before the timed calls (the GEMM a fused serving kernel would run);
            # `fp8_rowwise_q` quantizes them inside the timed call with eager torch ops (four
            # launches: launch-bound at small M, so it is printed but is not the target)
            w8s = [(w / (w.abs().amax(dim=1, keepdim=True) / 448)).to(torch.float8_e4m3fn) for w in ws]
            sw = (ws[0].abs().amax(dim=1) / 448).float().view(1, n)

            def fp8_quant(a):
                sa = (a.abs().amax(dim=1, keepdim=True).float() / 448).clamp(min=1e-12)
                return (a / sa).to(torch.float8_e4m3fn), sa

            def fp8_gemm(a):
                aq, sa = fp8_quant(a)
                return lambda i: torch._scaled_mm(aq, w8s[i % 4].T, scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)

            def fp8_with_quant(a):
                def call(i):
                    aq, sa = fp8_quant(a)
                    return torch._scaled_mm(aq, w8s[i % 4].T, scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)
                return call
            peers["fp8_rowwise"] = fp8_gemm
            peers["fp8_rowwise_q"] = fp8_with_quant
        except Exception as e:
            print(json.dumps({"name": "torch_fp8_rowwise_error", "error": repr(e)[:300]}), flush=True)
        for m in (1, 16, 64, 256, 512, 1024, 2048, 4096):
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            small = m <= 256
            us = time_us(lambda i: a @ ws[i % 4].T, flush=not small, batch=20 if small else 1)
            emit(f"torch_bf16_mm_m{m}_n{n}_k{k}", us, n * k * 2.0 + m * k * 2 + m * n * 2,
                 2.0 * m * n * k, m=m, n=n, k=k)
            for name, fn in peers.items():
                # cuBLAS only at M = 512, 1024, 2048 (the large-M crossover of lofp's W4A16), and the
                # FP8 rowwise pair at 1024, 2048 (the W4A8 routes)
                if m in (512, 1024, 2048) and not (m != 512 and name.startswith("fp8_rowwise")):
                    continue
                try:
                    call = fn(a)
                    us = time_us(call, flush=not small, batch=20 if small else 1,
                                 iters=30 if m < 4096 or name != "int4_tinygemm" else 5)
                    emit(f"torch_{name}_m{m}_n{n}_k{k}", us, 0.0, 2.0 * m * n * k, m=m, n=n, k=k)
                except Exception as e:
                    print(json.dumps({"name": f"torch_{name}_m{m}_error", "error": repr(e)[:300]}), flush=True)
        del ws, peers
        torch.cuda.empty_cache()


E2M1_MIDS = None


def quantize_nvfp4(x):
    """NVFP4 two-level, seed 000's structure and SPEC §2's op order (ties-to-zero bucketize)."""
    xf = x.float()
    amax = xf.abs().amax().clamp(min=1e-12)
    global_scale = amax.reciprocal() * 2688.0
    g = (xf * global_scale).view(x.shape[0], -1, 16)
    bmax = g.abs().amax(dim=-1, keepdim=True)
    bs = (bmax / 6.0).clamp(1e-12, 448.0)
    bs_q = bs.to(torch.float8_e4m3fn)
    div = bs_q.float()
    div = torch.where(div == 0, torch.full_like(div, 2.0 ** -9), div)
    e = (g / div).clamp(-6.0, 6.0)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=x.device)
    mag = torch.bucketize(e.abs(), mids).to(torch.uint8)
    code = mag | (torch.signbit(e).to(torch.uint8) << 3)
    code = code.view(x.shape[0], -1)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed, bs_q.view(x.shape[0], -1).view(torch.uint8), global_scale


def bench_quant():
    x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    eager_us = time_us(lambda i: quantize_nvfp4(x), flush=True, iters=10)
    emit("torch_nvfp4_quant_eager_8192x8192", eager_us, 8192 * 8192 * 2.0 * 2 + 8192 * 8192 * 0.5625)
    qc = torch.compile(quantize_nvfp4)
    qc(x)
    torch.cuda.synchronize()
    us = time_us(lambda i: qc(x), flush=True)
    emit("torch_nvfp4_quant_compiled_8192x8192", us, 8192 * 8192 * 2.0 * 2 + 8192 * 8192 * 0.5625)


def bench_sdpa():
    B, hq, hk, D, N = 8, 32, 8, 128, 32768
    q = torch.randn(B, hq, 1, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(B, hk, N, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(B, hk, N, D, device=dev, dtype=torch.bfloat16)
    us = time_us(lambda i: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), flush=True)
    emit(f"torch_sdpa_gqa_B{B}_Hq{hq}_Hk{hk}_D{D}_N{N}", us, 2.0 * B * hk * N * D * 2, 4.0 * B * hq * N * D)


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    print(json.dumps({"name": "torch", "version": torch.__version__,
                      "device": torch.cuda.get_device_name()}), flush=True)
    torch.manual_seed(0)
    steps = [("copy", bench_copy), ("gemm", bench_mm), ("quant", bench_quant), ("attn", bench_sdpa)]
    for key, fn in steps:
        if only and key not in only:
            continue
        try:
            fn()
        except Exception as e:  # report and go on: one failing baseline must not hide the rest
            print(json.dumps({"name": f"torch_{key}_error", "error": repr(e)[:300]}), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
