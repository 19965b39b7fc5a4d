#!/usr/bin/env python3
"""Regenerates the seed corpus fuzz/corpus/ckpt_dir/ of fuzz/fuzz_ckpt_dir.c (deterministic):
small model directories in the layouts the producers write (dense bf16/f16/f32, one file or two
shards with an index; ModelOpt NVFP4 / W4A16_NVFP4 / MXFP8; compressed-tensors NVFP4 / MXFP4;
gpt-oss MXFP4; lofp files), packed into the harness's container (see the harness's comment):

    CONTROL ( b"\\xffLFP" TAG BYTES )*

The layouts are written here with numpy + safetensors (docs/CHECKPOINTS.md,
../shared/reference/checkpoints.md); lofp files come from `lofp convert --to lofp` of those, when
the lofp binary is given. Needs the .venv:

    .venv/bin/python fuzz/make_ckpt_dir_corpus.py [build/lofp]
    .venv/bin/python fuzz/make_ckpt_dir_corpus.py --unpack INPUT DIR   (an input as a directory,
                                                                        to run lofp on a finding)

Files named crash-* / regress-* are fuzzer findings kept as regressions; this script leaves them
alone."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np
from safetensors.numpy import save

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ckpt_dir")
SEP = b"\xffLFP"
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
H, I, V, KV = 32, 32, 16, 16

# control byte 0: target (0 modelopt, 1 ct, 2 gpt-oss, 3 gguf, 4 lofp) | scheme << 3
# (0 default, 1 nvfp4, 2 mxfp4, 3 mxfp8) | 32 no_fuse | 64 pad | 128 requantize_unfit
MO, CT, OSS, GGUF, LOFP = 0, 1, 2, 3, 4
NV, MX4, MX8 = 1 << 3, 2 << 3, 3 << 3

rng = np.random.default_rng(23)


def pack(ctl, files):
    """files: tag -> bytes (or a dict / list, dumped as JSON)."""
    out = bytes(ctl)
    for tag, body in files.items():
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body, indent=1).encode()
        assert SEP not in body, f"section {tag} contains the separator"
        out += SEP + tag.encode() + body
    return out


def put(name, data):
    os.makedirs(ROOT, exist_ok=True)
    with open(os.path.join(ROOT, name), "wb") as f:
        f.write(data)


def st(tensors, meta=None):
    """safetensors bytes; arrays of dtypes safetensors-numpy lacks (E4M3) go in as raw headers."""
    plain, raw = {}, {}
    for k, v in tensors.items():
        (raw if v.dtype == E4M3 else plain)[k] = v
    if not raw:
        return save(plain, metadata=meta or {"format": "pt"})
    # write by hand: header in name order, data back to back
    names = sorted(tensors)
    header, blobs, off = {}, [], 0
    dt = {np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32", np.dtype(BF16): "BF16", np.dtype(E4M3): "F8_E4M3",
          np.dtype(np.float16): "F16"}
    for k in names:
        b = np.ascontiguousarray(tensors[k]).tobytes()
        header[k] = {"dtype": dt[tensors[k].dtype], "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = meta or {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + b"".join(blobs)


def w(shape, scale=0.05, dt=BF16):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dt)


LINEARS = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (KV, H), "self_attn.v_proj": (KV, H),
           "self_attn.o_proj": (H, H), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}


def dense_tensors(dt=BF16, layers=1, linears=None, h=H, v=V):
    t = {"model.embed_tokens.weight": w((v, h), dt=dt), "model.norm.weight": np.ones(h, dt),
         "lm_head.weight": w((v, h), dt=dt)}
    for l in range(layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = np.ones(h, dt)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, dt)
        for m, s in (linears or LINEARS).items():
            t[p + m + ".weight"] = w(s, dt=dt)
    return t


# rows of 64 for GGUF NVFP4 (its block): hidden 64, a narrow MLP that stays unquantized
WIDE = {"self_attn.q_proj": (64, 64), "self_attn.k_proj": (32, 64), "self_attn.v_proj": (32, 64),
        "self_attn.o_proj": (64, 64), "mlp.gate_proj": (16, 64), "mlp.up_proj": (16, 64), "mlp.down_proj": (64, 16)}


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": I,
         "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": V,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 64, "torch_dtype": "bfloat16",
         "tie_word_embeddings": False}

TOKENIZER = {"version": "1.0", "added_tokens": [{"id": 14, "content": "<s>", "special": True},
                                                {"id": 15, "content": "</s>", "special": True}],
             "model": {"type": "BPE", "byte_fallback": False,
                       "vocab": {c: i for i, c in enumerate("abcdefghĠ")} | {"ab": 9, "Ġa": 10, "cd": 11, "ef": 12, "gh": 13},
                       "merges": ["a b", "Ġ a", "c d", ["e", "f"], "g h"]}}


def split2(tensors, first):
    """Two shards and their index: names for which first(name) holds go to shard 1."""
    a = {k: v for k, v in tensors.items() if first(k)}
    b = {k: v for k, v in tensors.items() if not first(k)}
    wm = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
    total = sum(v.nbytes for v in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))}
    return a, b, index


def layer0(n):
    return "layers.0.self_attn" in n or "embed" in n


# ---- quantized layouts (codes random, scales in a plausible range) ------------------------------

def nv_codes(n, k):
    return rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8), \
        rng.uniform(0.5, 400, size=(n, k // 16)).astype(np.float32).astype(E4M3)


def mx_scales(n, k, lo=118, hi=130):
    return rng.integers(lo, hi, size=(n, k // 32), dtype=np.uint8)


def modelopt_nvfp4(inputs=True):
    t = {k: v for k, v in dense_tensors().items() if not k.endswith("proj.weight")}
    for l in range(1):
        for m, (n, k) in LINEARS.items():
            p = f"model.layers.{l}.{m}"
            c, s = nv_codes(n, k)
            t[p + ".weight"], t[p + ".weight_scale"] = c, s
            t[p + ".weight_scale_2"] = np.array(0.25 / 2688, np.float32)  # 0-d
            if inputs:
                t[p + ".input_scale"] = np.array(3.0 / 2688, np.float32)
    return t


def modelopt_mxfp8():
    t = {k: v for k, v in dense_tensors().items() if not k.endswith("proj.weight")}
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight"] = w((n, k), 1.0, E4M3)
        t[p + ".weight_scale"] = mx_scales(n, k)
    return t


def mo_configs(algo, group):
    hq = {"producer": {"name": "modelopt", "version": "0.37.0"},
          "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None, "group_size": group,
                           "exclude_modules": ["lm_head"]}}
    wq = {"dynamic": False, "num_bits": 4 if "NVFP4" in algo else 8, "type": "float", "group_size": group}
    groups = {"group_0": {"weights": wq, "targets": ["Linear"]}}
    if algo == "NVFP4":
        groups["group_0"]["input_activations"] = dict(wq)
    cfg = dict(LLAMA, quantization_config={"config_groups": groups, "ignore": ["lm_head"], "quant_algo": algo,
                                           "kv_cache_scheme": None, "producer": hq["producer"],
                                           "quant_method": "modelopt"})
    return cfg, hq


def ct_nvfp4():
    t = {k: v for k, v in dense_tensors().items() if not k.endswith("proj.weight")}
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        c, s = nv_codes(n, k)
        t[p + ".weight_packed"], t[p + ".weight_scale"] = c, s
        t[p + ".weight_global_scale"] = np.array([2688 / 0.25], np.float32)
        t[p + ".input_global_scale"] = np.array([2688 / 3.0], np.float32)
    return t


def ct_mxfp4():
    t = {k: v for k, v in dense_tensors().items() if not k.endswith("proj.weight")}
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight_packed"] = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
        t[p + ".weight_scale"] = mx_scales(n, k)
    return t


def ct_config(fmt):
    nv = fmt.startswith("nvfp4")
    wq = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16 if nv else 32,
          "strategy": "tensor_group" if nv else "group", "dynamic": False,
          "scale_dtype": "torch.float8_e4m3fn" if nv else "torch.uint8", "zp_dtype": None}
    g = {"targets": ["Linear"], "weights": wq, "input_activations": None, "output_activations": None, "format": fmt}
    return dict(LLAMA, quantization_config={"quant_method": "compressed-tensors", "format": fmt,
                                            "quantization_status": "compressed", "version": "0.20.1",
                                            "config_groups": {"group_0": g}, "ignore": ["lm_head"],
                                            "kv_cache_scheme": None})


OSS_CONFIG = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": H, "intermediate_size": I,
       "num_local_experts": 2, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
       "vocab_size": V, "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
           "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}


def gpt_oss():
    E = 2
    t = {"model.embed_tokens.weight": w((V, H)), "model.norm.weight": np.ones(H, BF16), "lm_head.weight": w((V, H))}
    for l in range(2):
        p = f"model.layers.{l}."
        t[p + "self_attn.q_proj.weight"] = w((H, H))
        t[p + "self_attn.sinks"] = np.zeros(4, BF16)
        t[p + "mlp.router.weight"] = w((E, H))
        t[p + "mlp.router.bias"] = np.zeros(E, BF16)
        t[p + "mlp.experts.gate_up_proj_blocks"] = rng.integers(0, 256, (E, 2 * I, H // 32, 16), dtype=np.uint8)
        t[p + "mlp.experts.gate_up_proj_scales"] = rng.integers(117, 127, (E, 2 * I, H // 32), dtype=np.uint8)
        t[p + "mlp.experts.gate_up_proj_bias"] = np.zeros((E, 2 * I), BF16)
        t[p + "mlp.experts.down_proj_blocks"] = rng.integers(0, 256, (E, H, I // 32, 16), dtype=np.uint8)
        t[p + "mlp.experts.down_proj_scales"] = rng.integers(117, 127, (E, H, I // 32), dtype=np.uint8)
        t[p + "mlp.experts.down_proj_bias"] = np.zeros((E, H), BF16)
    return t


def single(ctl, name, tensors, config, extra=None):
    files = {"c": config, "s": st(tensors)}
    files.update(extra or {})
    put(name, pack(ctl, files))


def sharded(ctl, name, tensors, config, first=layer0, extra=None):
    a, b, index = split2(tensors, first)
    files = {"c": config, "i": index, "1": st(a), "2": st(b)}
    files.update(extra or {})
    put(name, pack(ctl, files))
    return files


FILES = {"c": "config.json", "q": "hf_quant_config.json", "i": "model.safetensors.index.json",
         "s": "model.safetensors", "1": "model-00001-of-00002.safetensors",
         "2": "model-00002-of-00002.safetensors", "t": "tokenizer.json"}


def unpack(src, dst):
    """Writes the model directory the harness would build from input `src` (the control byte,
    which picks the convert target, and the glob sections are printed)."""
    data = open(src, "rb").read()
    parts = data.split(SEP)
    os.makedirs(dst, exist_ok=True)
    print("control:", parts[0][:2].hex())
    for p in parts[1:]:
        if not p:
            continue
        tag, body = chr(p[0]), p[1:]
        if tag in FILES:
            with open(os.path.join(dst, FILES[tag]), "wb") as f:
                f.write(body)
        elif tag in "IX":
            print("--include" if tag == "I" else "--exclude", body.split(b"\n"))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--unpack":
        unpack(sys.argv[2], sys.argv[3])
        return
    lofp = sys.argv[1] if len(sys.argv) > 1 else None
    for f in os.listdir(ROOT) if os.path.isdir(ROOT) else []:
        if f.startswith("seed-"):
            os.remove(os.path.join(ROOT, f))

    # dense, each asked to become another format
    d = dense_tensors()
    single([MO | NV, 0], "seed-dense-to-modelopt-nvfp4", d, LLAMA)
    single([MO | MX8, 2], "seed-dense-to-modelopt-mxfp8", d, LLAMA)
    single([CT | NV | 32, 1], "seed-dense-to-ct-nvfp4-nofuse", d, LLAMA)
    single([CT | MX4, 0], "seed-dense-to-ct-mxfp4", d, LLAMA)
    single([GGUF | MX4, 0], "seed-dense-to-gguf-mxfp4", d, LLAMA, {"t": TOKENIZER})
    single([GGUF | NV, 2], "seed-dense-to-gguf-nvfp4", dense_tensors(linears=WIDE, h=64, v=8),
           dict(LLAMA, hidden_size=64, intermediate_size=16, vocab_size=8),
           {"t": TOKENIZER, "X": b"*.down_proj.weight"})
    single([MO | NV, 4], "seed-dense-file-open", d, LLAMA)   # opens model.safetensors itself
    single([MO | NV | 64, 0], "seed-dense-f32-pad", dense_tensors(np.float32), dict(LLAMA, torch_dtype="float32"),
           {"I": b"lm_head.weight\nmodel.embed_tokens.weight", "X": b"*.k_proj.weight"})
    single([CT | NV, 1], "seed-dense-f16", dense_tensors(np.float16), dict(LLAMA, torch_dtype="float16"))
    sharded([MO | NV, 0], "seed-dense-sharded", d, LLAMA)
    sharded([GGUF | MX4, 0], "seed-dense-sharded-to-gguf", d, LLAMA, extra={"t": TOKENIZER})
    # a dense model whose config claims quantization
    single([MO, 0], "seed-dense-claims-ct", d, ct_config("nvfp4-pack-quantized"))

    # ModelOpt
    cfg, hq = mo_configs("NVFP4", 16)
    mo = modelopt_nvfp4()
    single([CT, 0], "seed-modelopt-nvfp4-to-ct", mo, cfg, {"q": hq})
    single([GGUF, 2], "seed-modelopt-nvfp4-to-gguf", mo, cfg, {"q": hq, "t": TOKENIZER})  # refused
    single([MO, 1], "seed-modelopt-nvfp4-to-modelopt", mo, cfg, {"q": hq})
    single([LOFP, 1], "seed-modelopt-nvfp4-to-lofp", mo, cfg, {"q": hq})
    cfg16, hq16 = mo_configs("W4A16_NVFP4", 16)
    sharded([CT, 2], "seed-modelopt-w4a16-sharded", modelopt_nvfp4(inputs=False), cfg16, extra={"q": hq16})
    single([MO, 0], "seed-modelopt-nvfp4-config-only", mo, cfg)   # no hf_quant_config.json
    cfg8, hq8 = mo_configs("MXFP8", 32)
    single([LOFP, 2], "seed-modelopt-mxfp8", modelopt_mxfp8(), cfg8, {"q": hq8})

    # compressed-tensors
    ctn = ct_nvfp4()
    single([MO, 0], "seed-ct-nvfp4-to-modelopt", ctn, ct_config("nvfp4-pack-quantized"))
    single([LOFP | NV, 1], "seed-ct-nvfp4-to-lofp", ctn, ct_config("nvfp4-pack-quantized"), {"t": TOKENIZER})
    ctm = ct_mxfp4()
    sharded([MO | NV | 128, 0], "seed-ct-mxfp4-sharded-to-modelopt", ctm, ct_config("mxfp4-pack-quantized"))
    single([OSS, 2], "seed-ct-mxfp4-to-gpt-oss", ctm, ct_config("mxfp4-pack-quantized"))

    # gpt-oss
    oss = gpt_oss()
    sharded([CT | MX4, 2], "seed-gpt-oss-sharded", oss, OSS_CONFIG, first=lambda n: "layers.0." in n or "embed" in n)
    single([MO | NV, 0], "seed-gpt-oss-to-modelopt", oss, OSS_CONFIG)  # refused
    single([LOFP, 0], "seed-gpt-oss-to-lofp", oss, OSS_CONFIG)
    single([OSS | MX4, 1], "seed-gpt-oss-to-gpt-oss", oss, OSS_CONFIG)
    dense_oss = {k: v for k, v in oss.items() if not k.endswith(("_blocks", "_scales"))}
    for l in range(2):
        p = f"model.layers.{l}.mlp.experts."
        dense_oss[p + "gate_up_proj"] = w((2, H, 2 * I))   # transformers' [E, in, out]
        dense_oss[p + "down_proj"] = w((2, I, H))
    cfg_dense_oss = {k: v for k, v in OSS_CONFIG.items() if k != "quantization_config"}
    single([OSS, 2], "seed-dense-gpt-oss-to-gpt-oss", dense_oss, cfg_dense_oss)
    single([CT | NV, 0], "seed-dense-gpt-oss-to-ct", dense_oss, cfg_dense_oss)

    # lofp files: what `lofp convert --to lofp` writes from the layouts above
    if lofp:
        tmp = tempfile.mkdtemp()
        try:
            for name, tensors, config, extra, ctl in (
                    ("nvfp4", ctn, ct_config("nvfp4-pack-quantized"), {}, [CT, 0]),
                    ("mxfp4", ctm, ct_config("mxfp4-pack-quantized"), {}, [MO | NV, 2]),
                    ("mxfp8", modelopt_mxfp8(), cfg8, {"hf_quant_config.json": hq8}, [MO, 1])):
                src, dst = os.path.join(tmp, name), os.path.join(tmp, name + "_lofp")
                os.makedirs(src)
                with open(os.path.join(src, "model.safetensors"), "wb") as f:
                    f.write(st(tensors))
                with open(os.path.join(src, "config.json"), "w") as f:
                    json.dump(config, f)
                for fn, body in extra.items():
                    with open(os.path.join(src, fn), "w") as f:
                        json.dump(body, f)
                subprocess.run([lofp, "convert", "--quiet", "--to", "lofp", src, dst], check=True)
                files = {"c": open(os.path.join(dst, "config.json"), "rb").read(),
                         "s": open(os.path.join(dst, "model.safetensors"), "rb").read()}
                put(f"seed-lofp-{name}", pack(ctl, files))
        finally:
            shutil.rmtree(tmp)

    # broken directories a careless user makes
    a, b, index = split2(d, layer0)
    put("seed-bad-missing-shard", pack([MO | NV, 0], {"c": LLAMA, "i": index, "1": st(a)}))
    lying = dict(index, weight_map=dict(index["weight_map"], **{"model.norm.weight": "model-00001-of-00002.safetensors"}))
    put("seed-bad-index-lies", pack([MO | NV, 0], {"c": LLAMA, "i": lying, "1": st(a), "2": st(b)}))
    put("seed-bad-config-not-json", pack([MO | NV, 0], {"c": b"{\"model_type\": \"llama\",", "s": st(d)}))
    put("seed-bad-empty", pack([MO, 0], {"c": b"", "s": b""}))
    mo_bad = dict(mo)
    mo_bad["model.layers.0.self_attn.q_proj.weight_scale"] = mo_bad["model.layers.0.self_attn.q_proj.weight_scale"][:, :1]
    single([CT, 0], "seed-bad-modelopt-scale-shape", mo_bad, cfg, {"q": hq})
    oss_bad = dict(oss)
    oss_bad["model.layers.0.mlp.experts.down_proj_scales"] = oss_bad["model.layers.0.mlp.experts.down_proj_scales"][:1]
    single([CT | MX4, 0], "seed-bad-gpt-oss-scales", oss_bad, OSS_CONFIG)
    print(f"{len([f for f in os.listdir(ROOT) if f.startswith('seed-')])} seeds in {ROOT}")


if __name__ == "__main__":
    main()
