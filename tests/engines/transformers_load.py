#!/usr/bin/env python3
"""transformers (and compressed-tensors) load what `lofp convert` writes, and decode it bit for bit
as `lofp import --dtype bf16` does.

usage: transformers_load.py LOFP_BINARY WORK_DIR

Needs torch, transformers and compressed-tensors (the GPU machine has the first two; the
compressed-tensors wheel and its pure-Python needs travel with the run, docs/TESTING.md). Builds
two tiny models with transformers itself (random weights, fixed seed): a Llama, converted to
compressed-tensors NVFP4 and MXFP4, and a gpt-oss, converted to gpt-oss MXFP4. Each output is
loaded by transformers with its own decoder:
  - compressed-tensors: CompressedTensorsConfig(run_compressed=False), the package decompresses
    every quantized Linear to a dense weight;
  - gpt-oss: Mxfp4Config(dequantize=True), transformers' MXFP4 dequantizer (LUT + ldexp);
and every parameter is compared with the same tensor of `lofp import --dtype bf16` (gpt-oss
experts: import writes the transformers layout, so the names line up). Exits 1 on any
difference, printing the first differing index; prints one line per model.
"""
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file


def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(argv)}\n{r.stdout}{r.stderr}")
    return r.stdout


def dense_tensors(dirpath):
    out = {}
    for f in sorted(os.listdir(dirpath)):
        if f.endswith(".safetensors"):
            out.update(load_file(os.path.join(dirpath, f)))
    return out


def compare(label, model, ref):
    """Every parameter of `model` whose name is in `ref` must equal it bit for bit."""
    sd = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    checked = bad = 0
    for name, want in sorted(ref.items()):
        if name not in sd:
            continue
        got = sd[name]
        if got.shape != want.shape:
            print(f"  {label}: {name}: shape {tuple(got.shape)} vs import {tuple(want.shape)}")
            bad += 1
            continue
        g = got.to(torch.bfloat16).contiguous().view(torch.int16)
        w = want.to(torch.bfloat16).contiguous().view(torch.int16)
        checked += 1
        diff = (g != w).flatten().nonzero()
        if diff.numel():
            i = int(diff[0])
            print(f"  {label}: {name}: {diff.numel()} of {g.numel()} elements differ, first at flat "
                  f"index {i}: transformers {got.flatten()[i].item()!r}, lofp import {want.flatten()[i].item()!r}")
            bad += 1
    missing = sorted(set(ref) - set(sd))
    return checked, bad, missing


def llama_case(lofp, work, scheme):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig, LlamaConfig, LlamaForCausalLM

    src = os.path.join(work, "llama")
    if not os.path.isdir(src):
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
        LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(src)
    out = os.path.join(work, f"llama-ct-{scheme}")
    imp = out + "-import"
    run(lofp, "convert", "--quiet", "--to", "compressed-tensors", "--scheme", scheme, src, out)
    run(lofp, "import", "--quiet", "--dtype", "bf16", out, imp)
    model = AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.bfloat16, device_map="cuda",
        quantization_config=CompressedTensorsConfig(run_compressed=False))
    ref = dense_tensors(imp)
    checked, bad, missing = compare(f"compressed-tensors {scheme}", model, ref)
    quantized = [n for n in ref if n.endswith("proj.weight")]
    return f"compressed-tensors {scheme}", checked, bad, missing, len(quantized)


def gpt_oss_case(lofp, work):
    from transformers import AutoModelForCausalLM, GptOssConfig, GptOssForCausalLM, Mxfp4Config

    src = os.path.join(work, "gptoss")
    torch.manual_seed(1)
    cfg = GptOssConfig(vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                       num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
                       layer_types=["sliding_attention", "full_attention"], sliding_window=64)
    GptOssForCausalLM(cfg).to(torch.bfloat16).save_pretrained(src)
    out = os.path.join(work, "gptoss-mxfp4")
    imp = out + "-import"
    run(lofp, "convert", "--quiet", "--to", "gpt-oss", src, out)
    run(lofp, "import", "--quiet", "--dtype", "bf16", out, imp)
    model = AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.bfloat16, device_map="cuda", quantization_config=Mxfp4Config(dequantize=True))
    ref = dense_tensors(imp)
    checked, bad, missing = compare("gpt-oss mxfp4", model, ref)
    experts = [n for n in ref if ".experts." in n and n.endswith("_proj")]
    return "gpt-oss mxfp4", checked, bad, missing, len(experts)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lofp, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(work, exist_ok=True)
    import transformers
    try:
        import compressed_tensors
        ctv = compressed_tensors.__version__
    except ImportError:
        ctv = None
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, compressed-tensors {ctv}")
    results = []
    if ctv:
        for scheme in ("nvfp4", "mxfp4"):
            results.append(llama_case(lofp, work, scheme))
    else:
        print("compressed-tensors is not installed: its cases are skipped")
    results.append(gpt_oss_case(lofp, work))
    failed = 0
    for label, checked, bad, missing, nq in results:
        ok = bad == 0 and checked > 0 and nq > 0
        failed += not ok
        print(f"{label}: {checked} tensors compared ({nq} quantized), {bad} differ, "
              f"{len(missing)} not in the transformers model{': ' + ', '.join(missing[:4]) if missing else ''}"
              f" -> {'PASS' if ok else 'FAIL'}")
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
