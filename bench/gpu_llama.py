#!/usr/bin/env python3
"""A real model end to end on one GPU: transformers' LlamaForCausalLM with a
Llama-3-8B-sized config and random bf16 weights (the GPU machine has no network, so no checkpoint
can be downloaded: the numbers are speeds, not quality), timed in bf16 and then with every linear
layer replaced by lofp's W4A16 NVFP4 layer (lofp.torch.quantize_model; eager calls go straight to
the kernel, torch.compile / CUDA graphs see lofp::w4a16_gemm), and with --w4a8 once more with the
W4A8 layer (quantize_model(model, "mxfp4", activations="e4m3"): MXFP4 weights, activations rounded
to FP8 E4M3 per token, FP8 tensor cores; sm_90a), rebuilt from the same random bf16 weights.

For each model it reports
  prefill   one forward pass over 2048 tokens at batch 1 (CUDA events, median of 3 after 1 warm-up)
  decode    tokens/s at batch 1 and 16 after a 512-token prompt, three ways:
              eager  model(...) per token with transformers' DynamicCache, wall clock: what a
                     plain transformers loop gets (Python and launch overhead included)
              gpu    the sum of the GPU kernel times of those steps (torch.profiler): what the
                     kernels cost once the launch overhead is gone (as in a CUDA-graph server)
              graph  replay of one CUDA graph per decode step over a StaticCache, when capture
                     works with this transformers version (otherwise the reason is printed)
  agreement one layer's W4A16 output against x W^T in fp32 (the NVFP4 weight error alone), and
            the relative L2 difference of the last token's hidden state after each layer and of the
            logits between the two models on one prompt (how that error grows through 32 layers of
            random weights, which amplify it more than a trained model's would); the same for W4A8

  python3 bench/gpu_llama.py [--layers 32] [--lm-head-bf16] [--w4a8] [--chunk-mib 256,16] [--lt-cand 0,1,2]
                            [--no-reuse-too] [--kernels-too]
                            [--json out.json]
"""
import argparse
import inspect
import json
import re
import statistics
import sys
import time

import torch


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--lm-head-bf16", action="store_true", help="keep lm_head in bf16 (vLLM's default)")
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--w4a8", action="store_true", help="also the W4A8 model (MXFP4 x E4M3; needs sm_90a)")
    ap.add_argument("--chunk-mib", default="",
                    help="comma list: the lofp models' prefill again with the large-M routes' transient chunk "
                         "bound forced to each size (a benchmark hook; 0 = the default)")
    ap.add_argument("--lt-cand", default="",
                    help="comma list: the lofp models' prefill again with the cuBLASLt heuristic's candidate i "
                         "forced in the large-M routes (a benchmark hook; 0 = the production choice)")
    ap.add_argument("--no-reuse-too", action="store_true",
                    help="the W4A8 model's prefill again with its activation reuse defeated (a forward pre-hook "
                         "calls lofp.torch.forget_w4a8_activation before every W4A8 layer)")
    ap.add_argument("--kernels-too", action="store_true",
                    help="the lofp models' prefill again with the large-M routes switched off (cuBLASLt off through "
                         "the benchmark hook lofp_cuda_large_test_config): the W4A16 / W4A8 kernels at every M")
    ap.add_argument("--json")
    return ap.parse_args()


def build(layers):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    model = model.to(torch.bfloat16).eval()
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():  # deterministic random weights: N(0, 0.02) matrices, unit norms
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02, generator=g)
            else:
                p.fill_(1.0)
    return model, cfg


def events_ms(fn, warm=1, reps=3):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def fwd(model, ids, **kw):
    try:
        return model(input_ids=ids, logits_to_keep=1, **kw)
    except TypeError:
        return model(input_ids=ids, **kw)


def prefill_ms(model, T, vocab):
    """(median ms of one forward pass over T tokens, its kernel time split by kernel_split)"""
    ids = torch.randint(0, vocab, (1, T), device="cuda")
    with torch.no_grad():
        ms = events_ms(lambda: fwd(model, ids, use_cache=False))
        split = {}
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fwd(model, ids, use_cache=False)
                torch.cuda.synchronize()
            split = {"prefill_" + k: v for k, v in kernel_split(prof, 1).items()}
        except Exception as ex:  # noqa: BLE001 -- report, do not fail the run
            split = {"prefill_prof_error": f"{type(ex).__name__}: {ex}"[:300]}
        return ms, split


def decode_eager(model, B, P, steps, vocab):
    """wall-clock tokens/s of a plain loop and GPU kernel time per step (profiler)"""
    g = torch.Generator(device="cuda").manual_seed(B)
    ids = torch.randint(0, vocab, (B, P), device="cuda", generator=g)
    res = {}
    with torch.no_grad():
        out = fwd(model, ids, use_cache=True)
        pkv = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        for _ in range(3):  # warm-up (first-call preparation of the lofp weights, cuBLAS handles)
            out = fwd(model, nxt, past_key_values=pkv, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            out = fwd(model, nxt, past_key_values=pkv, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        res["eager_tok_s"] = B * steps / dt
        res["eager_ms_step"] = 1e3 * dt / steps
        try:
            from torch.profiler import ProfilerActivity, profile
            n = 8
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    out = fwd(model, nxt, past_key_values=pkv, use_cache=True)
                    nxt = out.logits[:, -1:].argmax(-1)
                torch.cuda.synchronize()
            res.update(kernel_split(prof, n))
            res["gpu_tok_s"] = B / (res["gpu_ms_step"] / 1e3)
        except Exception as ex:  # noqa: BLE001 -- report, do not fail the run
            res["gpu_error"] = f"{type(ex).__name__}: {ex}"[:300]
    return res


_MATMUL = re.compile(r"gemm|gemv|cutlass|xmma|nvjet|ws_kernel|w4a8|w4_to_bf16|w4_to_e4m3|act_quant|splitK|cublas", re.I)


def kernel_split(prof, n):
    """GPU kernel time per step from a profile of n steps: total, the matrix products (lofp's
    GEMV / GEMM kernels, cuBLAS's, the W4A8 activation quantize and weight cast), the rest, and
    the six largest kernels (us per step)"""
    tot = mm = 0.0
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0) or 0.0
        if not getattr(e, "is_user_annotation", False) and e.key and not e.key.startswith("ProfilerStep"):
            tot += t
            if _MATMUL.search(e.key):
                mm += t
    top = sorted(prof.key_averages(), key=lambda e: -(getattr(e, "self_device_time_total", 0.0) or 0.0))[:6]
    return {"gpu_ms_step": tot / n / 1e3, "gpu_matmul_ms_step": mm / n / 1e3, "gpu_other_ms_step": (tot - mm) / n / 1e3,
            "gpu_top": [(e.key[:60], round((getattr(e, "self_device_time_total", 0.0) or 0.0) / n, 1)) for e in top]}


def decode_graph(model, cfg, B, P, steps, vocab):
    """one CUDA graph per decode step over transformers' StaticCache, replayed"""
    from transformers import StaticCache
    L = P + steps + 16
    want = dict(config=cfg, max_cache_len=L, max_batch_size=B, batch_size=B, device="cuda", dtype=torch.bfloat16)
    sig = inspect.signature(StaticCache.__init__).parameters
    cache = StaticCache(**{k: v for k, v in want.items() if k in sig})
    g = torch.Generator(device="cuda").manual_seed(B)
    ids = torch.randint(0, vocab, (B, P), device="cuda", generator=g)
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True,
                    cache_position=torch.arange(P, device="cuda"))
        tok = out.logits[:, -1:].argmax(-1).contiguous()
        pos = torch.tensor([P], device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):  # warm-up on the capture stream
                o = model(input_ids=tok, past_key_values=cache, use_cache=True, cache_position=pos)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = model(input_ids=tok, past_key_values=cache, use_cache=True, cache_position=pos)
            nxt = o.logits[:, -1:].argmax(-1)
        for _ in range(3):
            graph.replay()
            tok.copy_(nxt)
            pos += 1
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            graph.replay()
            tok.copy_(nxt)
            pos += 1
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        res = {"graph_tok_s": B * steps / dt, "graph_ms_step": 1e3 * dt / steps}
        try:  # the kernels of a few replays: how much of the step the matrix products are
            from torch.profiler import ProfilerActivity, profile
            n = 4
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    graph.replay()
                    tok.copy_(nxt)
                    pos += 1
                torch.cuda.synchronize()
            res.update({"graph_" + k: v for k, v in kernel_split(prof, n).items()})
        except Exception as ex:  # noqa: BLE001 -- report, do not fail the run
            res["graph_prof_error"] = f"{type(ex).__name__}: {ex}"[:300]
    del graph, cache
    return res


def last_logits(model, vocab):
    """last-token logits and the last token's hidden state after each layer"""
    g = torch.Generator(device="cuda").manual_seed(7)
    ids = torch.randint(0, vocab, (1, 256), device="cuda", generator=g)
    with torch.no_grad():
        out = fwd(model, ids, use_cache=False, output_hidden_states=True)
        return out.logits[0, -1].float(), [h[0, -1].float() for h in out.hidden_states]


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def measure(name, model, cfg, a):
    r = {"model": name, "prefill_tokens": a.prefill}
    r["prefill_ms"], split = prefill_ms(model, a.prefill, cfg.vocab_size)
    r.update(split)
    print(f"[{name}] prefill {a.prefill} tokens: {r['prefill_ms']:.1f} ms; " + json.dumps(split), flush=True)
    if a.chunk_mib and name.startswith("lofp"):
        from lofp import _lofp
        for mib in [int(x) for x in a.chunk_mib.split(",")]:
            _lofp.cuda_large_test_config(mib << 20, False)
            ms, sp = prefill_ms(model, a.prefill, cfg.vocab_size)
            r[f"prefill_ms_chunk{mib}"] = ms
            print(f"[{name}] prefill {a.prefill} tokens, chunk bound {mib} MiB: {ms:.1f} ms; " + json.dumps(sp),
                  flush=True)
        _lofp.cuda_large_test_config(0, False)
    if a.lt_cand and name.startswith("lofp"):
        from lofp import _lofp
        for cand in [int(x) for x in a.lt_cand.split(",")]:
            _lofp.cuda_large_test_algo(cand)
            try:
                ms, sp = prefill_ms(model, a.prefill, cfg.vocab_size)
            except Exception as ex:  # noqa: BLE001 -- a candidate the heuristic does not offer
                print(f"[{name}] prefill, cuBLASLt candidate {cand}: {type(ex).__name__}: {ex}"[:300], flush=True)
                continue
            r[f"prefill_ms_cand{cand}"] = ms
            print(f"[{name}] prefill {a.prefill} tokens, cuBLASLt candidate {cand}: {ms:.1f} ms; "
                  + json.dumps({k: v for k, v in sp.items() if k != "prefill_gpu_top"}), flush=True)
        _lofp.cuda_large_test_algo(0)
    if a.kernels_too and name.startswith("lofp"):
        from lofp import _lofp
        _lofp.cuda_large_test_config(0, True)
        try:
            ms, sp = prefill_ms(model, a.prefill, cfg.vocab_size)
        finally:
            _lofp.cuda_large_test_config(0, False)
        r["prefill_ms_kernels"] = ms
        print(f"[{name}] prefill {a.prefill} tokens, large-M routes off: {ms:.1f} ms; "
              + json.dumps({k: v for k, v in sp.items() if k != "prefill_gpu_top"}), flush=True)
    if a.no_reuse_too and "W4A8" in name:
        import lofp.torch as lt
        hooks = [mod.register_forward_pre_hook(lambda *_: lt.forget_w4a8_activation())
                 for mod in model.modules() if isinstance(mod, lt.W4A8Linear)]
        ms, sp = prefill_ms(model, a.prefill, cfg.vocab_size)
        for h in hooks:
            h.remove()
        r["prefill_ms_no_reuse"] = ms
        print(f"[{name}] prefill {a.prefill} tokens, activation reuse defeated: {ms:.1f} ms; "
              + json.dumps({k: v for k, v in sp.items() if k != "prefill_gpu_top"}), flush=True)
    for B in [int(b) for b in a.batches.split(",")]:
        d = decode_eager(model, B, a.prompt, a.steps, cfg.vocab_size)
        if not a.no_graph:
            try:
                d.update(decode_graph(model, cfg, B, a.prompt, a.steps, cfg.vocab_size))
            except Exception as ex:  # noqa: BLE001 -- report, do not fail the run
                d["graph_error"] = f"{type(ex).__name__}: {ex}"[:300]
        r[f"decode_b{B}"] = d
        print(f"[{name}] decode B={B}: " + json.dumps(d), flush=True)
        torch.cuda.empty_cache()
    return r


def measure_w4a8(a, ref, x0, w0):
    """The W4A8 model, rebuilt from the same seed as the others (the caller has freed the NVFP4
    one), quantized with MXFP4 weights and E4M3 activations: its agreement with the bf16 logits,
    then the same measurements."""
    import gc
    import lofp.torch as lt
    gc.collect()  # (transformers' modules can hold reference cycles)
    torch.cuda.empty_cache()
    t0 = time.time()
    model, cfg = build(a.layers)
    lt.quantize_model(model, "mxfp4", activations="e4m3", exclude=["lm_head"] if a.lm_head_bf16 else [])
    torch.cuda.synchronize()
    nq = sum(1 for m in model.modules() if isinstance(m, lt.W4A8Linear))
    print(f"quantize_model(mxfp4, activations=e4m3): {nq} W4A8 layers, rebuilt and quantized in "
          f"{time.time() - t0:.1f} s; GPU memory {torch.cuda.memory_allocated() / 2**30:.1f} GiB", flush=True)
    with torch.no_grad():
        one = rel(model.model.layers[0].mlp.down_proj(x0).float(), x0.float() @ w0.t())
    got, _ = last_logits(model, cfg.vocab_size)
    cos = torch.nn.functional.cosine_similarity(ref, got, dim=0).item()
    rl = rel(got, ref)
    print(f"W4A8: layer 0 down_proj relative L2 vs fp32 x W^T {one:.4f}; last-token logits vs bf16: cosine "
          f"{cos:.4f}, relative L2 {rl:.3f}", flush=True)
    r = measure("lofp W4A8 MXFP4", model, cfg, a)
    r["agreement"] = {"cosine": cos, "rel_l2": rl, "one_layer_w4a8": one}
    return r


def main():
    a = parse()
    import transformers
    import lofp
    import lofp.torch as lt
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, lofp {lofp.__version__} "
          f"(CUDA backend {lofp.HAVE_CUDA}), {torch.cuda.get_device_name()}", flush=True)
    t0 = time.time()
    model, cfg = build(a.layers)
    nparam = sum(p.numel() for p in model.parameters())
    print(f"Llama {a.layers} layers, {nparam / 1e9:.2f} B parameters, random N(0, 0.02) bf16 weights "
          f"(no download possible on the GPU machine), built in {time.time() - t0:.1f} s", flush=True)
    ref, ref_h = last_logits(model, cfg.vocab_size)
    lin = model.model.layers[0].mlp.down_proj
    w0 = lin.weight.detach().float().clone()
    x0 = torch.randn(16, w0.shape[1], device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    x0 = x0.to(torch.bfloat16)
    res = [measure("bf16", model, cfg, a)]
    t0 = time.time()
    lt.quantize_model(model, "nvfp4", exclude=["lm_head"] if a.lm_head_bf16 else [])
    torch.cuda.synchronize()
    nq = sum(1 for m in model.modules() if isinstance(m, lt.W4A16Linear))
    nl = sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear))
    print(f"quantize_model: {nq} W4A16 NVFP4 layers, {nl} nn.Linear left, {time.time() - t0:.1f} s; "
          f"GPU memory {torch.cuda.memory_allocated() / 2**30:.1f} GiB", flush=True)
    with torch.no_grad():  # one layer: the W4A16 output against x W^T in fp32 (NVFP4 weight error alone)
        y_ref = x0.float() @ w0.t()
        one = rel(model.model.layers[0].mlp.down_proj(x0).float(), y_ref)
        one_bf16 = rel((x0 @ w0.to(torch.bfloat16).t()).float(), y_ref)
    print(f"layer 0 down_proj on random x [16, {w0.shape[1]}]: relative L2 vs fp32 x W^T: W4A16 NVFP4 {one:.4f}, "
          f"bf16 nn.Linear {one_bf16:.4f}", flush=True)
    got, got_h = last_logits(model, cfg.vocab_size)
    cos = torch.nn.functional.cosine_similarity(ref, got, dim=0).item()
    rl = rel(got, ref)
    depth = [round(rel(gh, rh), 3) for gh, rh in zip(got_h, ref_h)]
    print(f"last-token logits W4A16 vs bf16: cosine {cos:.4f}, relative L2 {rl:.3f}; last-token hidden state "
          f"relative L2 after each layer (embeddings first): {depth}", flush=True)
    res.append(measure("lofp W4A16 NVFP4", model, cfg, a))
    agree = {"cosine": cos, "rel_l2": rl, "by_depth": depth, "one_layer_w4a16": one, "one_layer_bf16": one_bf16}
    res.append({"agreement": agree, "w4a16_layers": nq, "lm_head_bf16": a.lm_head_bf16})
    w8 = None
    if a.w4a8:
        if torch.cuda.get_device_capability() != (9, 0):
            print("--w4a8: skipped, the W4A8 kernel needs a compute capability 9.0 GPU", flush=True)
        else:
            del model
            w8 = measure_w4a8(a, ref, x0, w0)
            res.insert(2, w8)
    b, q = res[0], res[1]
    if w8 is None:
        print("\n| | bf16 | lofp W4A16 NVFP4 | ratio |\n|---|---|---|---|")
    else:
        print("\n| | bf16 | lofp W4A16 NVFP4 | ratio | lofp W4A8 MXFP4 | ratio |\n|---|---|---|---|---|---|")
    extra = f" {w8['prefill_ms']:.1f} | {b['prefill_ms'] / w8['prefill_ms']:.2f}x |" if w8 else ""
    print(f"| prefill {a.prefill} tokens (ms) | {b['prefill_ms']:.1f} | {q['prefill_ms']:.1f} | "
          f"{b['prefill_ms'] / q['prefill_ms']:.2f}x |" + extra)
    for B in [int(x) for x in a.batches.split(",")]:
        for k, lab in (("graph_tok_s", "CUDA graph"), ("gpu_tok_s", "kernel time"), ("eager_tok_s", "eager loop")):
            x, y = b[f"decode_b{B}"].get(k), q[f"decode_b{B}"].get(k)
            if x and y:
                z = w8[f"decode_b{B}"].get(k) if w8 else None
                extra = f" {z:.0f} | {z / x:.2f}x |" if z else (" - | - |" if w8 else "")
                print(f"| decode B={B} tok/s ({lab}) | {x:.0f} | {y:.0f} | {y / x:.2f}x |" + extra)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
