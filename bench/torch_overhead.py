#!/usr/bin/env python3
"""torch_overhead.py -- the host cost of one eager lofp.torch layer call on CUDA, against its kernel.

Layers (bf16 activations, 8192 x 8192 weights, no bias): W4A16Linear NVFP4 and MXFP4 at M = 1,
W4A8Linear (MXFP4 x E4M3) at M = 1 and 256 (sm_90a only), and torch's bf16 nn.Linear as the
reference. Each is called three ways where it applies:
  fast    module(x) in eager mode: the layer calls the kernel directly (lofp.torch's fast path)
  op      torch.ops.lofp.w4a16_gemm / w4a8_gemm: the registered custom op through the dispatcher
          (what torch.compile graphs call)
  gemm    lofp.gemm(x, cuda_weight) (the public array API; W4A16 only)
and, to split the fast path's host time into its parts (M = 1, W4A16 MXFP4):
  C call  the extension's cuda_w4a16_gemm_ptr alone with every argument precomputed (output
          allocated once): argument parsing + the kernel launch, the floor of any route that
          ends in this launch, a C++ op included
  alloc   y = a.new_empty(...) alone: the caching allocator's cost per call
  launch  torch.cuda._sleep(0): one bare kernel launch from Python through torch's binding
Columns:
  kernel us  GPU time per call with the calls queued back to back (CUDA events around N calls
             queued behind a long sleep kernel, so no host gap enters it)
  host us    wall time per call of the host loop issuing those N calls while the GPU is still
             busy with the sleep: the host never waits for the GPU, so this is the host time of
             one call -- what the call adds beyond its kernel when the host is the bottleneck.
             `busy` says the GPU was indeed still sleeping when the loop ended.
  prof us    torch.profiler's CPU time of one call (a record_function around it; the profiler
             adds its own overhead)
  <= 8 us    host us <= 8 (the target for the fast path)
Prints a markdown table, then one JSON object per row.

  python3 bench/torch_overhead.py [--n 200] [--size 8192]
"""
import argparse
import json
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--n", type=int, default=200, help="calls per measurement")
ap.add_argument("--size", type=int, default=8192, help="N = K of the weight")
ap.add_argument("--reps", type=int, default=5, help="measurements per row (the median is reported)")
args = ap.parse_args()

import lofp  # noqa: E402
import lofp.torch as lt  # noqa: E402

if not (torch.cuda.is_available() and lofp.HAVE_CUDA):
    print("torch_overhead: needs a CUDA device and lofp built with the CUDA backend", file=sys.stderr)
    sys.exit(1)
dev = torch.device("cuda")
SM90 = torch.cuda.get_device_capability() == (9, 0)


def _cycles_per_ms():
    """Calibrates torch.cuda._sleep (spins a number of GPU clock cycles)."""
    if not hasattr(torch.cuda, "_sleep"):
        return None
    torch.cuda._sleep(1000)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(10_000_000)
    b.record()
    b.synchronize()
    return 10_000_000 / a.elapsed_time(b)


CYC = _cycles_per_ms()
_busy_a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)


def keep_busy(ms):
    """Queues about `ms` milliseconds of GPU work."""
    if CYC:
        torch.cuda._sleep(int(CYC * ms))
        return
    for _ in range(max(1, int(ms))):  # a bf16 8192^3 product is about 1 ms on an H100 / H200
        torch.mm(_busy_a, _busy_a)


def measure(fn, n):
    """(kernel us, host us, busy) for n calls of fn queued behind a sleep."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()  # a first estimate of the loop's host time, to size the sleep
    for _ in range(min(n, 20)):
        fn()
    torch.cuda.synchronize()
    est_ms = 1e3 * (time.perf_counter() - t0) / min(n, 20) * n
    keep_busy(2.0 * est_ms + 20.0)
    asleep = torch.cuda.Event()
    asleep.record()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = time.perf_counter() - t0
    busy = not asleep.query()
    e1.record()
    e1.synchronize()
    return 1e3 * e0.elapsed_time(e1) / n, 1e6 * host / n, busy


def prof_cpu_us(fn, n):
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            with record_function("lofp_bench_call"):
                fn()
        torch.cuda.synchronize()
    for e in prof.key_averages():
        if e.key == "lofp_bench_call":
            return e.cpu_time_total / max(1, e.count)
    return float("nan")


def op_call(mod, x):
    op = torch.ops.lofp.w4a8_gemm if isinstance(mod, lt.W4A8Linear) else torch.ops.lofp.w4a16_gemm
    return lambda: op(x, mod.codes, mod.scales, mod.global_scale, mod.scheme, mod.out_features, mod.in_features,
                      mod._handle)


def rows():
    S = args.size
    g = torch.Generator(device=dev).manual_seed(0)
    lin = torch.nn.Linear(S, S, bias=False, device=dev, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.normal_(0.0, 0.02, generator=g)
    cases = []
    for scheme in ("nvfp4", "mxfp4"):
        mod = lt.W4A16Linear.from_linear(lin, scheme)
        x = torch.randn(1, S, device=dev, dtype=torch.bfloat16, generator=g)
        w = lofp.cuda_weight(mod.qtensor())
        name = f"W4A16Linear {scheme} M=1"
        cases += [(name, "fast", lambda mod=mod, x=x: mod(x), mod, x),
                  (name, "op", op_call(mod, x), mod, x),
                  (name, "gemm", lambda w=w, x=x: lofp.gemm(x, w, out_dtype=torch.bfloat16), None, None)]
    if SM90:
        mod = lt.W4A8Linear.from_linear(lin)
        for m in (1, 256):
            x = torch.randn(m, S, device=dev, dtype=torch.bfloat16, generator=g)
            name = f"W4A8Linear mxfp4 M={m}"
            cases += [(name, "fast", lambda mod=mod, x=x: mod(x), mod, x), (name, "op", op_call(mod, x), mod, x)]
    for m in (1, 256):
        x = torch.randn(m, S, device=dev, dtype=torch.bfloat16, generator=g)
        cases.append((f"nn.Linear bf16 M={m}", "torch", lambda x=x: lin(x), None, None))
    # the parts of the fast path (MXFP4 W4A16, M = 1)
    from lofp import _fw, _lofp
    mod = lt.W4A16Linear.from_linear(lin, "mxfp4")
    x = torch.randn(1, S, device=dev, dtype=torch.bfloat16, generator=g)
    mod(x)
    f = mod._fast
    if f is not None:
        y = x.new_empty((1, S))
        h, ap, yp, code, st = f[1], x.data_ptr(), y.data_ptr(), _fw.DT_BF16, lt._raw_stream(f[0])
        call = _lofp.cuda_w4a16_gemm_ptr
        cases.append(("W4A16Linear mxfp4 M=1 parts", "C call", lambda: call(h, ap, 1, code, yp, st), None, None))
        cases.append(("W4A16Linear mxfp4 M=1 parts", "alloc", lambda: x.new_empty((1, S)), None, None))
    if hasattr(torch.cuda, "_sleep"):
        cases.append(("one kernel launch", "launch", lambda: torch.cuda._sleep(0), None, None))
    return cases


def main():
    print(f"torch {torch.__version__}, lofp {lofp.__version__}, {torch.cuda.get_device_name()}, "
          f"sleep kernel {'yes' if CYC else 'no (matmuls keep the GPU busy)'}", flush=True)
    out = []
    with torch.no_grad():
        cases = rows()
        for _name, _path, fn, _mod, _x in cases:  # every kernel loaded and every layer prepared first
            fn()
        torch.cuda.synchronize()
        checked = set()
        for name, path, fn, mod, x in cases:
            if path == "fast" and name not in checked:  # the fast path gives the op's bits
                y, r = fn(), op_call(mod, x)()
                same = torch.equal(y.view(torch.int16), r.view(torch.int16))
                checked.add(name)
                print(f"{name}: fast path bit-identical to the op: {same}; fast state kept: {mod._fast is not None}",
                      flush=True)
            ks, hs, busy = [], [], True
            for _ in range(args.reps):
                k, h, b = measure(fn, args.n)
                ks.append(k)
                hs.append(h)
                busy = busy and b
            p = prof_cpu_us(fn, min(args.n, 100))
            r = {"layer": name, "path": path, "kernel_us": round(statistics.median(ks), 2),
                 "host_us": round(statistics.median(hs), 2), "prof_cpu_us": round(p, 2), "gpu_busy": busy,
                 "host_le_8us": statistics.median(hs) <= 8.0, "device": torch.cuda.get_device_name()}
            out.append(r)
            print(json.dumps(r), flush=True)
    print("\n| layer | path | kernel us | host us beyond kernel | profiler CPU us | <= 8 us | GPU busy |")
    print("|---|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['layer']} | {r['path']} | {r['kernel_us']:.1f} | {r['host_us']:.1f} | {r['prof_cpu_us']:.1f} | "
              f"{'yes' if r['host_le_8us'] else 'no'} | {'yes' if r['gpu_busy'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
