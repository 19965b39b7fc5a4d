"""bench/bench_report.py on synthetic bench_cuda / bench_torch / gpu_llama.py / torch_overhead.py
output: the targets tables' verdicts on both sides of each threshold, rows absent without their
inputs, the positional OUT.md and the older tables' headers. Needs no GPU and no torch."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bench_report.py"
NEW = "### Targets: FP8 route, batched W4A16, attention, host time, end to end"


def jsonl(path, objs, junk=True):
    lines = ["not JSON: a log line"] if junk else []
    lines += [json.dumps(o) for o in objs]
    path.write_text("\n".join(lines) + "\n")
    return path


def r(name, us, nbytes=0.0, flops=0.0, **extra):
    return {"name": name, "us": us, "bytes": nbytes, "flops": flops, **extra}


def lofp_results():
    n = 8192 * 8192
    out = [{"name": "device", "device": "Test GPU", "sms": 132, "l2_bytes": 62914560},
           # 1 TB/s copy bandwidth: a quantizer moving B bytes in t us reaches B / t / 1e4 percent
           r("copy_1GiB", 1000.0, 1e9),
           r("quant_nvfp4_linear", 100.0, 0.86e8, passes=2),   # 86 % of the copy: met
           r("quant_mxfp4_linear", 100.0, 0.84e8, passes=1),   # 84 %: missed
           r("dequant_nvfp4_bf16", 40.0, n * 2.5625),
           r("read_floor_nvfp4_n8192_k8192", 15.0, n * 0.5625),
           r("uq_decode_B8_Hq32_Hk8_D128_N327680", 100.0, 1.4e8, 1e10, splits=0, default=1),
           r("uq_decode_B8_Hq32_Hk8_D128_N32768_splits16", 100.1, 1.4e8, 1e10, splits=16, default=0),
           r("uq_store_64k_tokens_hk8_d128", 200.0, 5e8)]
    # W4A16 against cuBLAS bf16 at 100 us: 0.89x (missed) and 0.91x (met) on either shape
    w = {("nvfp4", 8192, 256): 100 / 0.89, ("nvfp4", 8192, 1024): 100 / 0.91,
         ("mxfp4", 14336, 256): 100 / 0.91, ("mxfp4", 14336, 1024): 100 / 0.89}
    for (preset, nn, m), us in w.items():
        k = 8192 if nn == 8192 else 4096
        out.append(r(f"w4a16_{preset}_m{m}_n{nn}_k{k}", us, 1e8, 2.0 * m * nn * k, m=m, n=nn, k=k, default=1))
    out.append(r("w4a16_nvfp4_m1_n8192_k8192", 10.5, 1e8, 2.0 * n, m=1, n=8192, k=8192, default=1))
    # W4A8 production call at 100 us: cuBLAS 101 (faster: met) and 99 (slower: missed)
    for m in (1024, 2048):
        out.append(r(f"w4a8_mxfp4_m{m}_n8192_k8192", 100.0, 1e8, 2.0 * m * n, m=m, n=8192, k=8192,
                     route="large", why="m", rowwise=1))
    return out


def torch_results():
    out = [{"name": "torch", "version": "9.9", "device": "Test GPU"}]
    for nn, k in ((8192, 8192), (14336, 4096)):
        for m in (256, 4096):
            out.append(r(f"torch_bf16_mm_m{m}_n{nn}_k{k}", 100.0, 1e8, 2.0 * m * nn * k, m=m, n=nn, k=k))
    # M = 1024 on 8192^2 only: the 14336 x 4096 M = 1024 W4A16 row has no baseline
    out.append(r("torch_bf16_mm_m1024_n8192_k8192", 100.0, 1e8, 2.0 * 1024 * 8192 * 8192, m=1024, n=8192, k=8192))
    out.append(r("torch_bf16_mm_m2048_n8192_k8192", 99.0, 1e8, 2.0 * 2048 * 8192 * 8192, m=2048, n=8192, k=8192))
    out.append(r("torch_sdpa_gqa_B8_Hq32_Hk8_D128_N32768", 300.0, 1e9, 1e10))
    return out


def llama_json(w4a8=True):
    res = [{"model": "bf16", "prefill_ms": 230.0, "prefill_gpu_ms_step": 220.0,
            "decode_b1": {"eager_tok_s": 30.0, "gpu_tok_s": 50.0, "graph_tok_s": 100.0},
            "decode_b16": {"eager_tok_s": 400.0, "gpu_tok_s": 700.0, "graph_tok_s": 1000.0}},
           # prefill 230 / 232.3 = 0.99x (missed); decode B=1 1.61x (met), B=16 1.19x (missed)
           {"model": "lofp W4A16 NVFP4", "prefill_ms": 232.3, "prefill_gpu_ms_step": 200.0,
            "decode_b1": {"eager_tok_s": 25.0, "gpu_tok_s": 90.0, "graph_tok_s": 161.0},
            "decode_b16": {"eager_tok_s": 300.0, "gpu_tok_s": 900.0, "graph_tok_s": 1190.0}},
           {"agreement": {"cosine": 0.99}, "w4a16_layers": 224, "lm_head_bf16": False}]
    if w4a8:  # prefill 230 / 199 = 1.156x (met)
        res.insert(2, {"model": "lofp W4A8 MXFP4", "prefill_ms": 199.0, "decode_b1": {"graph_error": "x"},
                       "agreement": {"cosine": 0.98}})
    return res


def host_lines():
    rows = [{"layer": "W4A16Linear nvfp4 M=1", "path": "fast", "kernel_us": 11.2, "host_us": 7.9, "prof_cpu_us": 9.0},
            {"layer": "W4A16Linear nvfp4 M=1", "path": "op", "kernel_us": 11.2, "host_us": 14.0, "prof_cpu_us": 19.0},
            {"layer": "W4A16Linear mxfp4 M=1", "path": "fast", "kernel_us": 11.0, "host_us": 8.1, "prof_cpu_us": 9.0},
            {"layer": "W4A8Linear mxfp4 M=1", "path": "fast", "kernel_us": 11.0, "host_us": 5.0, "prof_cpu_us": 9.0}]
    return ("torch 9.9, lofp 0, Test GPU, sleep kernel yes\n"
            "W4A16Linear nvfp4 M=1: fast path bit-identical to the op: True; fast state kept: True\n"
            + "".join(json.dumps(x) + "\n" for x in rows)
            + "\n| layer | path | kernel us | host us beyond kernel | profiler CPU us | <= 8 us | GPU busy |\n")


def run(tmp_path, *args):
    p = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return p.stdout


def rows_of(text, heading):
    """{first cell: last cell} of the table under a heading"""
    part = text.split("\n" + heading + "\n", 1)[1].split("\n### ", 1)[0]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in part.splitlines() if ln.startswith("| ")]
    return {c[0]: c[-1] for c in cells[1:]}


def inputs(tmp_path):
    return jsonl(tmp_path / "lofp.jsonl", lofp_results()), jsonl(tmp_path / "torch.jsonl", torch_results(), junk=False)


def test_targets_both_sides(tmp_path):
    lo, to = inputs(tmp_path)
    (tmp_path / "llama.json").write_text(json.dumps(llama_json()))
    (tmp_path / "host.txt").write_text(host_lines())
    out = tmp_path / "report.md"
    text = run(tmp_path, lo, to, out, "--llama", tmp_path / "llama.json", "--host", tmp_path / "host.txt")
    assert out.read_text() == text[:-1]  # print adds a newline
    got = rows_of(text, NEW)
    want = {
        "W4A16 NVFP4 M=256 8192 x 8192 ≥ 0.9x cuBLAS bf16": "no",
        "W4A16 NVFP4 M=1024 8192 x 8192 ≥ 0.9x cuBLAS bf16": "yes",
        "W4A16 MXFP4 M=256 14336 x 4096 ≥ 0.9x cuBLAS bf16": "yes",
        "W4A8 MXFP4 quant + GEMM M=1024 8192 x 8192 vs cuBLAS bf16 (informational; met = faster)": "no",
        "W4A8 MXFP4 quant + GEMM M=2048 8192 x 8192 vs cuBLAS bf16 (informational; met = faster)": "no",
        "UltraQuant decode B8 Hq32 Hk8 D128 N32k ≤ 100 µs": "yes",
        "NVFP4 two-level quantize 8192² ≥ 85 % of its two-pass floor": "yes",
        "Eager lofp.torch W4A16Linear nvfp4 M=1 call ≤ 8 µs of host time": "yes",
        "Eager lofp.torch W4A16Linear mxfp4 M=1 call ≤ 8 µs of host time": "no",
        "End to end prefill, W4A8 MXFP4 ≥ 1.15x bf16": "yes",
        "End to end prefill, W4A16 NVFP4 ≥ 1.0x bf16": "no",
        "End to end decode B=1 tok/s (CUDA graph), W4A16 NVFP4 ≥ 1.6x bf16": "yes",
        "End to end decode B=16 tok/s (CUDA graph), W4A16 NVFP4 ≥ 1.2x bf16": "no",
    }
    assert got == want
    assert "| 100.0 µs (large route) vs cuBLAS 99.0 µs = 0.99x | no |" in text
    assert "| 112.4 µs vs cuBLAS 100.0 µs = 0.89x | no |" in text
    assert "| 7.9 µs (kernel 11.2 µs) | yes |" in text
    assert "kernel time 200.0 ms vs bf16 220.0 ms = 1.10x" in text  # W4A16 prefill, profiler split
    assert "kernel time 90 vs bf16 50 tok/s = 1.80x" in text
    # the older targets table, unchanged: 86 % met, 84 % missed, UQ against its 90 us
    old = rows_of(text, "### Targets")
    assert old["NVFP4 two-level quantize 8192²"] == "yes"
    assert old["MXFP4 quantize 8192²"] == "no"
    assert old["UltraQuant decode B8 Hq32 Hk8 D128 N32k"] == "no"
    assert old["W4A16 NVFP4 M=1 8192²"] == "yes"


def test_thresholds_other_side(tmp_path):
    L = lofp_results()
    for o in L:
        if o["name"] == "uq_decode_B8_Hq32_Hk8_D128_N327680":
            o["us"] = 100.1
        if o["name"] == "quant_nvfp4_linear":
            o["bytes"] = 0.84e8
        if o["name"] == "w4a8_mxfp4_m1024_n8192_k8192":
            o["us"] = 99.0
    lo = jsonl(tmp_path / "lofp.jsonl", L)
    to = jsonl(tmp_path / "torch.jsonl", torch_results())
    res = llama_json()
    res[1]["prefill_ms"] = 229.0  # 1.004x
    res[2]["prefill_ms"] = 201.0  # 1.144x
    res[1]["decode_b1"]["graph_tok_s"] = 159.0
    res[1]["decode_b16"]["graph_tok_s"] = 1210.0
    res[1]["prefill_tokens"] = 2048  # (gpu_llama.py records it; older files do not)
    (tmp_path / "llama.json").write_text(json.dumps(res))
    got = rows_of(run(tmp_path, lo, to, "--llama", tmp_path / "llama.json"), NEW)
    assert got["UltraQuant decode B8 Hq32 Hk8 D128 N32k ≤ 100 µs"] == "no"
    assert got["NVFP4 two-level quantize 8192² ≥ 85 % of its two-pass floor"] == "no"
    assert got["W4A8 MXFP4 quant + GEMM M=1024 8192 x 8192 vs cuBLAS bf16 (informational; met = faster)"] == "yes"
    assert got["End to end prefill, W4A8 MXFP4 ≥ 1.15x bf16"] == "no"
    assert got["End to end prefill 2048 tokens, W4A16 NVFP4 ≥ 1.0x bf16"] == "yes"
    assert got["End to end decode B=1 tok/s (CUDA graph), W4A16 NVFP4 ≥ 1.6x bf16"] == "no"
    assert got["End to end decode B=16 tok/s (CUDA graph), W4A16 NVFP4 ≥ 1.2x bf16"] == "yes"


def test_rows_absent_without_inputs(tmp_path):
    lo, to = inputs(tmp_path)
    (tmp_path / "llama.json").write_text(json.dumps(llama_json(w4a8=False)))
    text = run(tmp_path, lo, to, "--llama", tmp_path / "llama.json")
    got = rows_of(text, NEW)
    assert "End to end prefill, W4A16 NVFP4 ≥ 1.0x bf16" in got
    assert not any("W4A8 MXFP4 ≥" in t for t in got)  # no W4A8 model in the file
    assert not any("host time" in t for t in got)  # no --host
    assert not any("M=1024 14336 x 4096" in t for t in got)  # no cuBLAS baseline at that shape
    assert not any("M=4096" in t for t in got)  # no W4A8 result at M = 4096
    assert not (tmp_path / "report.md").exists()
    # without --llama / --host and with no lofp results, no row and no table
    empty = jsonl(tmp_path / "empty.jsonl", [{"name": "device", "device": "Test GPU"}])
    text = run(tmp_path, empty, to)
    assert NEW not in text and "\n### Targets\n" not in text


def test_older_tables_kept(tmp_path):
    lo, to = inputs(tmp_path)
    text = run(tmp_path, lo, to)
    for header in ("| kernel | µs | bytes moved (MB) | TB/s | % of copy BW | target | met |",
                   "| weights | M | N x K | lofp µs | read floor µs | cuBLAS bf16 | int4 tinygemm | fp8 rowwise "
                   "`_scaled_mm` | vs cuBLAS | lofp TFLOP/s | weight TB/s |",
                   "| M | N x K | W4A8 GEMM µs | `_scaled_mm` µs | met (GEMM ≤ `_scaled_mm`) | W4A8 quant + GEMM µs | "
                   "route | quantize µs | torch quant + `_scaled_mm` µs | W4A16 MXFP4 µs | cuBLAS bf16 µs |",
                   "| kernel | µs | KV TB/s | vs SDPA bf16 | FP4 floor (bytes / copy BW) | target ≤ 90 µs |",
                   "| job | measured | target | met |",
                   "| target | measured | met |"):
        assert header + "\n" in text
    assert text.index("\n### Targets\n") < text.index(NEW)
