#!/usr/bin/env python3
"""Hostile model directories against the `lofp` command line (inspect, import, convert to every
format, verify-checkpoint), as a careless and a hostile user would make them: configs that lie
about the format, the group size or the bit width; indexes that lie; shards that disagree;
hf_quant_config.json contradicting config.json; tensors whose dtype or shape contradicts their
role; scale tensors of the wrong shape or dtype for each format; gpt-oss blocks/scales mismatches;
huge dimensions and empty tensors. Every directory is built here with numpy and a hand-written
safetensors header (never lofp), so that each lie is exactly the one named.

Each command must end in a clean error: a non-zero exit status within the time limit, no
sanitizer report (the ASan build runs this too), a message naming the file and the tensor (or
config key) at fault, nothing left where the output would have gone, and the input unchanged.

Commands that do not do that today are listed in XFAIL below with the finding; they are run
and reported (XFAIL, or XPASS once fixed) but do not fail the suite. LOFP_STRICT_XFAIL=1 makes
an XPASS a failure (to prune the list).

usage: hostile_dirs_test.py LOFP_BINARY [CASE ...] [--table]
  --table prints every command's outcome instead of asserting (for a sweep).
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

# ---- findings: case -> (the commands that fail, what is wrong and where) ---------------------
# Every entry is an open finding; a third field "sanitizer" marks what only an ASan+UBSan build
# shows (elsewhere the command ends cleanly). Remove an entry when its fix lands;
# LOFP_STRICT_XFAIL=1 turns the resulting XPASS into a failure.
_ALL = "inspect import convert-modelopt convert-compressed-tensors convert-gpt-oss convert-lofp convert-gguf verify-checkpoint"
_IMC = "inspect import convert-modelopt convert-compressed-tensors convert-lofp"
XFAIL = {
    # (empty: every finding of this suite is fixed; a new one goes here with the commands that fail,
    # what is wrong and where)
}

LOFP = None
TIMEOUT = 30
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
H, I, V, KV, E = 32, 32, 16, 16, 2
rng = np.random.default_rng(5)

# ---- writing directories without lofp ---------------------------------------------------------

DT = {"U8": 1, "I8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "BF16": 2, "F16": 2, "I16": 2,
      "F32": 4, "I32": 4, "U32": 4, "F64": 8, "I64": 8}


def T(dtype, shape, data=None):
    """A tensor as (safetensors dtype, shape, bytes); data None: random bytes of the right size,
    a numpy array: its bytes."""
    n = int(np.prod(shape, dtype=object)) if len(shape) else 1
    if data is None:
        if dtype in ("BF16", "F16", "F32", "F64"):
            np_dt = {"BF16": BF16, "F16": np.float16, "F32": np.float32, "F64": np.float64}[dtype]
            data = (rng.standard_normal(n) * 0.05).astype(np.float32).astype(np_dt).tobytes()
        elif dtype == "F8_E4M3":
            data = rng.uniform(0.5, 300, n).astype(np.float32).astype(E4M3).tobytes()
        elif dtype == "F8_E8M0":
            data = rng.integers(118, 130, n, dtype=np.uint8).tobytes()
        else:
            data = rng.integers(0, 256, n * DT[dtype], dtype=np.uint8).tobytes()
    elif isinstance(data, np.ndarray):
        data = data.tobytes()
    return (dtype, list(shape), data)


def write_st(path, tensors, meta=None):
    hdr, blobs, off = {}, [], 0
    for k in sorted(tensors):
        dt, shape, data = tensors[k]
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hdr["__metadata__"] = meta if meta is not None else {"format": "pt"}
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_json(path, obj):
    with open(path, "w") as f:
        if isinstance(obj, (str, bytes)):
            f.write(obj if isinstance(obj, str) else obj.decode())
        else:
            json.dump(obj, f, indent=1)


LINEARS = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (KV, H), "self_attn.v_proj": (KV, H),
           "self_attn.o_proj": (H, H), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": I,
         "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": V,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
TOKENIZER = {"version": "1.0", "added_tokens": [],
             "model": {"type": "BPE", "vocab": {c: i for i, c in enumerate("abcdefghijklmnop")}, "merges": ["a b"]}}


def base_tensors():
    return {"model.embed_tokens.weight": T("BF16", [V, H]), "model.norm.weight": T("BF16", [H]),
            "lm_head.weight": T("BF16", [V, H]), "model.layers.0.input_layernorm.weight": T("BF16", [H]),
            "model.layers.0.post_attention_layernorm.weight": T("BF16", [H])}


def dense():
    t = base_tensors()
    for m, s in LINEARS.items():
        t[f"model.layers.0.{m}.weight"] = T("BF16", list(s))
    return t, dict(LLAMA), {}


def mo_configs(algo, group):
    hq = {"producer": {"name": "modelopt", "version": "0.37.0"},
          "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None, "group_size": group,
                           "exclude_modules": ["lm_head"]}}
    wq = {"dynamic": False, "num_bits": 4 if "NVFP4" in algo else 8, "type": "float", "group_size": group}
    cfg = dict(LLAMA, quantization_config={"config_groups": {"group_0": {"weights": wq, "targets": ["Linear"]}},
                                           "ignore": ["lm_head"], "quant_algo": algo, "quant_method": "modelopt"})
    return cfg, hq


def modelopt_nvfp4():
    t = base_tensors()
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight"] = T("U8", [n, k // 2])
        t[p + ".weight_scale"] = T("F8_E4M3", [n, k // 16])
        t[p + ".weight_scale_2"] = T("F32", [], np.array(0.25 / 2688, np.float32))
        t[p + ".input_scale"] = T("F32", [], np.array(3.0 / 2688, np.float32))
    cfg, hq = mo_configs("NVFP4", 16)
    return t, cfg, {"hf_quant_config.json": hq}


def modelopt_mxfp8():
    t = base_tensors()
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight"] = T("F8_E4M3", [n, k], (rng.standard_normal(n * k)).astype(np.float32).astype(E4M3))
        t[p + ".weight_scale"] = T("U8", [n, k // 32], rng.integers(118, 130, n * k // 32, dtype=np.uint8))
    cfg, hq = mo_configs("MXFP8", 32)
    return t, cfg, {"hf_quant_config.json": hq}


def ct_config(fmt, **over):
    nv = fmt.startswith("nvfp4")
    wq = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16 if nv else 32,
          "strategy": "tensor_group" if nv else "group", "dynamic": False,
          "scale_dtype": "torch.float8_e4m3fn" if nv else "torch.uint8"}
    wq.update(over)
    return dict(LLAMA, quantization_config={"quant_method": "compressed-tensors", "format": fmt,
                                            "quantization_status": "compressed",
                                            "config_groups": {"group_0": {"targets": ["Linear"], "weights": wq,
                                                                          "format": fmt}},
                                            "ignore": ["lm_head"]})


def ct_nvfp4():
    t = base_tensors()
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight_packed"] = T("U8", [n, k // 2])
        t[p + ".weight_scale"] = T("F8_E4M3", [n, k // 16])
        t[p + ".weight_global_scale"] = T("F32", [1], np.array([2688 / 0.25], np.float32))
    return t, ct_config("nvfp4-pack-quantized"), {}


def ct_mxfp4():
    t = base_tensors()
    for m, (n, k) in LINEARS.items():
        p = f"model.layers.0.{m}"
        t[p + ".weight_packed"] = T("U8", [n, k // 2])
        t[p + ".weight_scale"] = T("U8", [n, k // 32], rng.integers(118, 130, n * k // 32, dtype=np.uint8))
    return t, ct_config("mxfp4-pack-quantized"), {}


OSS_CONFIG = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": H,
              "intermediate_size": I, "num_local_experts": E, "num_hidden_layers": 1, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": V,
              "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
                  "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}


def gpt_oss():
    t = {"model.embed_tokens.weight": T("BF16", [V, H]), "model.norm.weight": T("BF16", [H]),
         "lm_head.weight": T("BF16", [V, H]), "model.layers.0.self_attn.q_proj.weight": T("BF16", [H, H]),
         "model.layers.0.mlp.router.weight": T("BF16", [E, H])}
    p = "model.layers.0.mlp.experts."
    t[p + "gate_up_proj_blocks"] = T("U8", [E, 2 * I, H // 32, 16])
    t[p + "gate_up_proj_scales"] = T("U8", [E, 2 * I, H // 32], rng.integers(118, 127, E * 2 * I * H // 32, dtype=np.uint8))
    t[p + "gate_up_proj_bias"] = T("BF16", [E, 2 * I])
    t[p + "down_proj_blocks"] = T("U8", [E, H, I // 32, 16])
    t[p + "down_proj_scales"] = T("U8", [E, H, I // 32], rng.integers(118, 127, E * H * I // 32, dtype=np.uint8))
    t[p + "down_proj_bias"] = T("BF16", [E, H])
    return t, json.loads(json.dumps(OSS_CONFIG)), {}


def dense_oss():
    t = {k: v for k, v in gpt_oss()[0].items() if not k.endswith(("_blocks", "_scales"))}
    p = "model.layers.0.mlp.experts."
    t[p + "gate_up_proj"] = T("BF16", [E, H, 2 * I])
    t[p + "down_proj"] = T("BF16", [E, I, H])
    cfg = {k: v for k, v in OSS_CONFIG.items() if k != "quantization_config"}
    return t, cfg, {}


# The version the metadata names is the VERSION file's (the one version source).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")) as _f:
    LOFP_VERSION = _f.read().strip()


def lofp_meta(shape, scheme="mxfp4", block=32, padded_k=None, two_level=0):
    rule = "ue4m3" if scheme == "nvfp4" else "floor"   # what `lofp quantize` writes for each scheme
    return (f"scheme={scheme};rounding=rne;scale_rule={rule};block={block};layout=linear;pad_byte=0;"
            f"shape=[{','.join(map(str, shape))}];padded_k={padded_k if padded_k is not None else shape[-1]};"
            f"two_level={two_level};c=0.156000003;rotate=0;hadamard=butterfly;seed=0;source_dtype=BF16;"
            f"lofp_version={LOFP_VERSION}")


def lofp_mxfp4():
    """lofp's own files (`lofp quantize` / `convert --to lofp`): <w>.codes, <w>.scales and the
    lofp:<w> metadata of docs/CLI.md; held in the module-level META for write_model."""
    t = base_tensors()
    meta = {"format": "pt"}
    for m, (n, k) in LINEARS.items():
        w = f"model.layers.0.{m}.weight"
        t[w + ".codes"] = T("U8", [n, k // 2])
        t[w + ".scales"] = T("F8_E8M0", [n, k // 32])
        meta["lofp:" + w] = lofp_meta([n, k])
    return t, dict(LLAMA), {"__meta__": meta}


def write_model(d, tensors, config, extra=None, shards=None, index=None):
    """shards: None (one model.safetensors) or {file: predicate}; index: None (written for shards
    from where the tensors went) or an object / text to write as the index."""
    os.makedirs(d)
    wm = {}
    extra = dict(extra or {})
    meta = extra.pop("__meta__", None)
    if shards is None:
        write_st(os.path.join(d, "model.safetensors"), tensors, meta)
    else:
        left = dict(tensors)
        for fname, pred in shards.items():
            part = {k: v for k, v in left.items() if pred(k)}
            for k in part:
                del left[k]
                wm[k] = fname
            write_st(os.path.join(d, fname), part)
        if index is None:
            index = {"metadata": {"total_size": 0}, "weight_map": dict(sorted(wm.items()))}
    if index is not None:
        write_json(os.path.join(d, "model.safetensors.index.json"), index)
    if config is not None:
        write_json(os.path.join(d, "config.json"), config)
    for fn, body in extra.items():
        write_json(os.path.join(d, fn), body)
    write_json(os.path.join(d, "tokenizer.json"), TOKENIZER)


SHARDS = {"model-00001-of-00002.safetensors": lambda n: "self_attn" in n or "embed" in n,
          "model-00002-of-00002.safetensors": lambda n: True}

# ---- the cases ----------------------------------------------------------------------------------
# Each case: (builder of (tensors, config, extra files), changes, dense twin for verify-checkpoint,
# words the error must contain). `changes(t, cfg, extra)` edits the model in place and may return
# write_model keyword arguments.

CASES = {}


def case(name, family, needles, dense_twin=dense, expect=None):
    """expect: command -> "error" (the default: a clean error naming `needles`) or "any" (exit 0
    allowed: the input is odd but consistent; only safety is checked, and a written output must
    read back with `lofp inspect`). verify-checkpoint is always "any": the dense twin is not the
    model's origin, so its verdict says nothing; it must only not crash or hang."""
    def deco(fn):
        CASES[name] = (family, fn, dense_twin, needles, dict(expect or {}))
        return fn
    return deco


ANY = {c: "any" for c in ("inspect", "import", "convert-modelopt", "convert-compressed-tensors", "convert-gpt-oss",
                          "convert-lofp", "convert-gguf")}


Q = "model.layers.0.self_attn.q_proj"
D_ = "model.layers.0.mlp.down_proj"
GU = "model.layers.0.mlp.experts.gate_up_proj"
DN = "model.layers.0.mlp.experts.down_proj"


# lying configs
@case("mo_claims_nvfp4_holds_mxfp8", modelopt_mxfp8, ["model.safetensors", "weight_scale"])
def _(t, cfg, ex):
    # both configs tell the same lie (NVFP4, groups of 16), so only the tensors can expose it
    c, h = mo_configs("NVFP4", 16)
    cfg["quantization_config"], ex["hf_quant_config.json"] = c["quantization_config"], h


@case("mo_claims_mxfp8_holds_nvfp4", modelopt_nvfp4, ["model.safetensors", "weight_scale"])
def _(t, cfg, ex):
    c, h = mo_configs("MXFP8", 32)
    cfg["quantization_config"], ex["hf_quant_config.json"] = c["quantization_config"], h


@case("ct_claims_nvfp4_holds_mxfp4", ct_mxfp4, ["model.safetensors", "weight_scale"])
def _(t, cfg, ex):
    cfg.update(ct_config("nvfp4-pack-quantized"))


@case("ct_claims_mxfp4_holds_nvfp4", ct_nvfp4, ["model.safetensors", "weight_scale"])
def _(t, cfg, ex):
    cfg.update(ct_config("mxfp4-pack-quantized"))


for _g in (0, -1, 1 << 40, 32):
    @case(f"mo_group_size_{_g}", modelopt_nvfp4, ["group_size", "hf_quant_config.json"])
    def _(t, cfg, ex, g=_g):
        ex["hf_quant_config.json"]["quantization"]["group_size"] = g

    @case(f"ct_group_size_{_g}", ct_nvfp4, ["group_size", "config.json"])
    def _(t, cfg, ex, g=_g):
        cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = g


@case("ct_num_bits_8", ct_nvfp4, ["num_bits", "config.json"])
def _(t, cfg, ex):
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8


@case("ct_weights_type_int", ct_nvfp4, ["weights.type", "config.json", "'int'"])
def _(t, cfg, ex):
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["type"] = "int"


@case("ct_config_groups_array", ct_nvfp4, ["config_groups", "config.json", "array"])
def _(t, cfg, ex):
    q = cfg["quantization_config"]
    q["config_groups"] = list(q["config_groups"].values())


@case("mo_flat_group_size_32", modelopt_nvfp4, ["quantization_config.group_size", "config.json", "32"])
def _(t, cfg, ex):
    # ModelOpt's flat config.json form states the group size beside quant_algo
    cfg["quantization_config"]["group_size"] = 32


@case("mo_consistent_configs_null_keys", modelopt_nvfp4, [], expect=ANY)
def _(t, cfg, ex):
    # what real producers write and must keep reading: a null group_size (not stated), the flat
    # form's group_size 16, and activations stated with their own settings
    cfg["quantization_config"]["group_size"] = 16
    cfg["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {"num_bits": 4, "type": "float",
                                                                                   "group_size": 16, "dynamic": False}
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = None


@case("mo_num_bits_8", modelopt_nvfp4, ["num_bits", "config.json"])
def _(t, cfg, ex):
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8


@case("hf_quant_vs_config_ct", modelopt_nvfp4, ["hf_quant_config.json", "config.json"])
def _(t, cfg, ex):
    cfg["quantization_config"] = ct_config("nvfp4-pack-quantized")["quantization_config"]


@case("hf_quant_nvfp4_config_mxfp8", modelopt_nvfp4, ["hf_quant_config.json", "config.json"])
def _(t, cfg, ex):
    cfg["quantization_config"]["quant_algo"] = "MXFP8"


@case("quantization_config_is_string", ct_nvfp4, ["config.json", "quantization_config"])
def _(t, cfg, ex):
    cfg["quantization_config"] = "compressed-tensors"


@case("quant_algo_is_number", modelopt_nvfp4, ["hf_quant_config.json", "quant_algo"])
def _(t, cfg, ex):
    ex["hf_quant_config.json"]["quantization"]["quant_algo"] = 4


@case("gpt_oss_config_dense_tensors", dense, ["config.json", "mxfp4"])
def _(t, cfg, ex):
    cfg["quantization_config"] = {"quant_method": "mxfp4"}


@case("gpt_oss_config_over_ct_tensors", ct_nvfp4, ["config.json", "mxfp4"])
def _(t, cfg, ex):
    # found by fuzz/fuzz_ckpt_dir.c: a gpt-oss quantization_config over compressed-tensors NVFP4
    # tensors
    cfg["quantization_config"] = {"quant_method": "mxfp4"}


@case("ct_config_over_gpt_oss_tensors", gpt_oss, ["config.json", "compressed-tensors"], dense_twin=dense_oss)
def _(t, cfg, ex):
    # found by fuzz/fuzz_ckpt_dir.c: the mirror of gpt_oss_config_over_ct_tensors
    cfg["quantization_config"] = ct_config("nvfp4-pack-quantized")["quantization_config"]


@case("config_duplicate_quantization_config", modelopt_nvfp4, ["config.json", "quantization_config"])
def _(t, cfg, ex):
    # found by fuzz/fuzz_ckpt_dir.c: the key twice; import deletes one and keeps the other
    text = json.dumps(cfg)
    return {"config": text[:-1] + ', "quantization_config": ' + json.dumps(cfg["quantization_config"]) + "}"}


@case("config_is_array", dense, ["config.json"])
def _(t, cfg, ex):
    return {"config": [1, 2, 3]}


# lying indexes
@case("index_weight_map_array", dense, ["model.safetensors.index.json", "weight_map"])
def _(t, cfg, ex):
    return {"shards": SHARDS, "index": {"weight_map": ["model-00001-of-00002.safetensors"]}}


@case("index_traversal", dense, ["model.safetensors.index.json", "../"])
def _(t, cfg, ex):
    idx = {"weight_map": {k: ("model-00001-of-00002.safetensors" if SHARDS["model-00001-of-00002.safetensors"](k)
                              else "../outside/model-00002-of-00002.safetensors") for k in t}}
    return {"shards": SHARDS, "index": idx, "outside": True}


@case("index_absolute_path", dense, ["model.safetensors.index.json", "/"])
def _(t, cfg, ex):
    idx = {"weight_map": {k: ("model-00001-of-00002.safetensors" if SHARDS["model-00001-of-00002.safetensors"](k)
                              else "/etc/hostname") for k in t}}
    return {"shards": SHARDS, "index": idx}


@case("index_names_itself", dense, ["model.safetensors.index.json"])
def _(t, cfg, ex):
    idx = {"weight_map": {k: ("model-00001-of-00002.safetensors" if SHARDS["model-00001-of-00002.safetensors"](k)
                              else "model.safetensors.index.json") for k in t}}
    return {"shards": SHARDS, "index": idx}


@case("index_shard_is_directory", dense, ["model-00002-of-00002.safetensors"])
def _(t, cfg, ex):
    return {"shards": SHARDS, "shard_dir": "model-00002-of-00002.safetensors"}


@case("index_duplicate_key", dense, ["model.safetensors.index.json", "model.norm.weight"])
def _(t, cfg, ex):
    wm = ",".join(f'"{k}": "{"model-00001-of-00002.safetensors" if SHARDS["model-00001-of-00002.safetensors"](k) else "model-00002-of-00002.safetensors"}"' for k in sorted(t))
    wm += ', "model.norm.weight": "model-00001-of-00002.safetensors"'
    return {"shards": SHARDS, "index": '{"weight_map": {' + wm + '}}'}


@case("index_empty_weight_map", dense, ["model.safetensors.index.json"])
def _(t, cfg, ex):
    return {"shards": SHARDS, "index": {"metadata": {"total_size": 1}, "weight_map": {}}}


@case("index_total_size_negative", dense, [], expect=ANY)  # total_size is informational
def _(t, cfg, ex):
    return {"shards": SHARDS, "index_total_size": -5}


@case("index_wrong_shard", dense, ["model.safetensors.index.json", "model.norm.weight"])
def _(t, cfg, ex):
    idx = {"weight_map": {k: "model-00001-of-00002.safetensors" if SHARDS["model-00001-of-00002.safetensors"](k)
                          else "model-00002-of-00002.safetensors" for k in t}}
    idx["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"
    return {"shards": SHARDS, "index": idx}


@case("hf_quant_not_json", modelopt_nvfp4, ["hf_quant_config.json"])
def _(t, cfg, ex):
    ex["hf_quant_config.json"] = '{"quantization": {"quant_algo": "NVFP4",'


@case("hf_quant_is_array", modelopt_nvfp4, ["hf_quant_config.json"])
def _(t, cfg, ex):
    ex["hf_quant_config.json"] = [{"quantization": {"quant_algo": "NVFP4"}}]


# per-tensor activation scales that cannot be carried over
# import and --to lofp drop activation scales: only the conversions that carry them must refuse
_DROPS_INPUT = {"inspect": "any", "import": "any", "convert-lofp": "any"}


@case("mo_input_scale_nan", modelopt_nvfp4, [Q + ".input_scale"], expect=_DROPS_INPUT)
def _(t, cfg, ex):
    t[Q + ".input_scale"] = T("F32", [], np.array(np.nan, np.float32))


@case("ct_input_global_scale_zero", ct_nvfp4, [Q + ".input_global_scale"], expect=_DROPS_INPUT)
def _(t, cfg, ex):
    for m in LINEARS:
        t[f"model.layers.0.{m}.input_global_scale"] = T("F32", [1], np.array([2688 / 3.0], np.float32))
    t[Q + ".input_global_scale"] = T("F32", [1], np.array([0.0], np.float32))


# shards that disagree
@case("tensor_in_both_shards", dense, ["model.norm.weight", "model-0000"])
def _(t, cfg, ex):
    return {"shards": SHARDS, "dup_into_first": "model.norm.weight"}


@case("codes_and_scales_split_disagree", modelopt_nvfp4, [Q, "weight_scale"])
def _(t, cfg, ex):
    # shard 1 holds q_proj's codes, shard 2 a weight_scale for another K
    t[Q + ".weight_scale"] = T("F8_E4M3", [H, 1])
    return {"shards": {"model-00001-of-00002.safetensors": lambda n: n == Q + ".weight",
                       "model-00002-of-00002.safetensors": lambda n: True}}


@case("lofp_meta_in_one_shard_only", lofp_mxfp4, ["model-00002-of-00002.safetensors", D_ + ".weight.codes"])
def _(t, cfg, ex):
    # shard 1 (attention) carries the lofp: metadata of its tensors, shard 2 (MLP) has codes and
    # scales but no metadata
    meta = {k: v for k, v in ex["__meta__"].items() if "self_attn" in k}
    return {"shards": SHARDS, "meta_first": meta}


# tensors lying about their dtype / shape
@case("mo_weight_scale_u8", modelopt_nvfp4, [Q + ".weight_scale", "U8"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("U8", [H, H // 16])


@case("mo_weight_scale_1d", modelopt_nvfp4, [Q + ".weight_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("F8_E4M3", [H * H // 16])


@case("mo_weight_scale_2_two_values", modelopt_nvfp4, [Q + ".weight_scale_2"])
def _(t, cfg, ex):
    t[Q + ".weight_scale_2"] = T("F32", [2], np.array([1e-4, 2e-4], np.float32))


@case("mo_weight_scale_2_i32", modelopt_nvfp4, [Q + ".weight_scale_2"])
def _(t, cfg, ex):
    t[Q + ".weight_scale_2"] = T("I32", [], np.array(7, np.int32))


for _v in ("nan", "0", "-1", "inf"):
    @case(f"mo_weight_scale_2_{_v}", modelopt_nvfp4, [Q + ".weight_scale_2"])
    def _(t, cfg, ex, v=_v):
        t[Q + ".weight_scale_2"] = T("F32", [], np.array(float(v), np.float32))


@case("mo_weight_i8", modelopt_nvfp4, [Q + ".weight", "I8"])
def _(t, cfg, ex):
    t[Q + ".weight"] = T("I8", [H, H // 2])


@case("mo_mxfp8_scale_e4m3", modelopt_mxfp8, [Q + ".weight_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("F8_E4M3", [H, H // 32])


@case("mo_mxfp8_weight_bf16", modelopt_mxfp8, [Q + ".weight"])
def _(t, cfg, ex):
    t[Q + ".weight"] = T("BF16", [H, H])


@case("mo_mxfp8_scale_per16", modelopt_mxfp8, [Q + ".weight_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("U8", [H, H // 16])


@case("ct_global_scale_2x2", ct_nvfp4, [Q + ".weight_global_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_global_scale"] = T("F32", [2, 2], np.full(4, 2688 / 0.25, np.float32))


@case("ct_global_scale_f16_inf", ct_nvfp4, [Q + ".weight_global_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_global_scale"] = T("F16", [1], np.array([np.inf], np.float16))


@case("ct_mxfp4_scale_f32", ct_mxfp4, [Q + ".weight_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("F32", [H, H // 32])


@case("ct_mxfp4_scale_per16", ct_mxfp4, [Q + ".weight_scale"])
def _(t, cfg, ex):
    t[Q + ".weight_scale"] = T("U8", [H, H // 16])


@case("ct_weight_packed_f32", ct_nvfp4, [Q + ".weight_packed"])
def _(t, cfg, ex):
    t[Q + ".weight_packed"] = T("F32", [H, H // 8])


@case("ct_weight_packed_3d", ct_mxfp4, [Q + ".weight_packed"])
def _(t, cfg, ex):
    t[Q + ".weight_packed"] = T("U8", [2, H // 2, H // 2])
    t[Q + ".weight_scale"] = T("U8", [2, H // 2, H // 32])


# gpt-oss blocks / scales
@case("oss_blocks_last_15", gpt_oss, [DN + "_blocks"], dense_twin=dense_oss)
def _(t, cfg, ex):
    t[DN + "_blocks"] = T("U8", [E, H, I // 32, 15])


@case("oss_scales_one_group_more", gpt_oss, [DN + "_scales"], dense_twin=dense_oss)
def _(t, cfg, ex):
    t[DN + "_scales"] = T("U8", [E, H, I // 32 + 1], rng.integers(118, 127, E * H * (I // 32 + 1), dtype=np.uint8))


@case("oss_scales_f32", gpt_oss, [DN + "_scales"], dense_twin=dense_oss)
def _(t, cfg, ex):
    t[DN + "_scales"] = T("F32", [E, H, I // 32])


@case("oss_scales_missing", gpt_oss, [DN + "_blocks", "_scales"], dense_twin=dense_oss)
def _(t, cfg, ex):
    del t[DN + "_scales"]


@case("oss_blocks_missing", gpt_oss, [DN + "_scales", "_blocks"], dense_twin=dense_oss)
def _(t, cfg, ex):
    del t[DN + "_blocks"]


@case("oss_blocks_2d", gpt_oss, [DN], dense_twin=dense_oss)
def _(t, cfg, ex):
    t[DN + "_blocks"] = T("U8", [E * H, 16])
    t[DN + "_scales"] = T("U8", [E * H], rng.integers(118, 127, E * H, dtype=np.uint8))


@case("oss_blocks_i8", gpt_oss, [DN + "_blocks", "I8"], dense_twin=dense_oss)
def _(t, cfg, ex):
    t[DN + "_blocks"] = T("I8", [E, H, I // 32, 16])


@case("oss_experts_disagree", gpt_oss, [], dense_twin=dense_oss, expect=ANY)  # each tensor consistent
def _(t, cfg, ex):
    # down_proj with 3 experts where gate_up has 2
    t[DN + "_blocks"] = T("U8", [3, H, I // 32, 16])
    t[DN + "_scales"] = T("U8", [3, H, I // 32], rng.integers(118, 127, 3 * H * I // 32, dtype=np.uint8))


# huge dimensions and empty tensors
@case("mo_empty_rows", modelopt_nvfp4, [Q], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("U8", [0, H // 2])
    t[Q + ".weight_scale"] = T("F8_E4M3", [0, H // 16])


@case("mo_k_zero", modelopt_nvfp4, [Q], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("U8", [H, 0])
    t[Q + ".weight_scale"] = T("F8_E4M3", [H, 0])


@case("mo_huge_rows_zero_k", modelopt_nvfp4, [Q], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("U8", [1 << 62, 0])
    t[Q + ".weight_scale"] = T("F8_E4M3", [1 << 62, 0])


@case("oss_zero_experts", gpt_oss, [DN], dense_twin=dense_oss, expect=ANY)
def _(t, cfg, ex):
    t[DN + "_blocks"] = T("U8", [0, H, I // 32, 16])
    t[DN + "_scales"] = T("U8", [0, H, I // 32])


@case("dense_huge_zero_weight", dense, [Q + ".weight"], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("BF16", [1 << 40, 0])


@case("dense_empty_weight", dense, [Q + ".weight"], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("BF16", [0, H])


@case("dense_scalar_weight", dense, [Q + ".weight"], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("BF16", [])


@case("dense_weight_i32", dense, [Q + ".weight", "I32"], expect=ANY)
def _(t, cfg, ex):
    t[Q + ".weight"] = T("I32", [H, H])


@case("empty_directory", dense, ["no .safetensors"])
def _(t, cfg, ex):
    return {"empty": True}


# lofp files whose metadata lies
@case("lofp_block_64_over_padded_k_32", lofp_mxfp4, ["model.safetensors", Q, "block"])
def _(t, cfg, ex):
    ex["__meta__"]["lofp:" + Q + ".weight"] = lofp_meta([H, H], block=64)


@case("lofp_padded_k_below_k", lofp_mxfp4, ["model.safetensors", Q, "padded_k"])
def _(t, cfg, ex):
    ex["__meta__"]["lofp:" + Q + ".weight"] = lofp_meta([H, H], padded_k=16)


@case("lofp_global_scale_vector", lofp_mxfp4, ["model.safetensors", Q, "global_scale"])
def _(t, cfg, ex):
    ex["__meta__"]["lofp:" + Q + ".weight"] = lofp_meta([H, H], scheme="nvfp4", block=16, two_level=1)
    t[Q + ".weight.scales"] = T("F8_E4M3", [H, H // 16])
    t[Q + ".weight.global_scale"] = T("F32", [3], np.array([10.0, 20.0, 30.0], np.float32))


@case("lofp_meta_without_codes", lofp_mxfp4, ["model.safetensors", "model.layers.0.self_attn.o_proj.weight"])
def _(t, cfg, ex):
    # found by fuzz/fuzz_ckpt_dir.c: lofp:T metadata whose T.codes is absent
    del t["model.layers.0.self_attn.o_proj.weight.codes"]


@case("lofp_scales_wrong_dtype", lofp_mxfp4, ["model.safetensors", Q, "scales"])
def _(t, cfg, ex):
    t[Q + ".weight.scales"] = T("F32", [H, H // 32])


# ---- running -----------------------------------------------------------------------------------

def dir_digest(d):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(d)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, d).encode())
            if os.path.isfile(p):
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def build(tmp, name):
    family, change, twin, needles, _expect = CASES[name]
    t, cfg, ex = family()
    kw = change(t, cfg, ex) or {}
    d = os.path.join(tmp, name, "model")
    os.makedirs(os.path.join(tmp, name))
    if kw.get("empty"):
        os.makedirs(d)
    else:
        cfg = kw.get("config", cfg)
        idx = kw.get("index")
        shards = kw.get("shards")
        write_model(d, t, cfg, ex, shards=shards, index=idx)
        if kw.get("index_total_size") is not None:
            ip = os.path.join(d, "model.safetensors.index.json")
            j = json.load(open(ip))
            j["metadata"]["total_size"] = kw["index_total_size"]
            write_json(ip, j)
        if kw.get("outside"):
            # the shard the index points at, outside the model directory
            o = os.path.join(tmp, name, "outside")
            os.makedirs(o)
            shutil.move(os.path.join(d, "model-00002-of-00002.safetensors"), o)
        if kw.get("shard_dir"):
            p = os.path.join(d, kw["shard_dir"])
            os.remove(p)
            os.makedirs(p)
        if kw.get("dup_into_first"):
            # the tensor also in shard 1 (with other bytes), the index still naming shard 2
            p1 = os.path.join(d, "model-00001-of-00002.safetensors")
            part = {k: v for k, v in t.items() if SHARDS["model-00001-of-00002.safetensors"](k)}
            part[kw["dup_into_first"]] = T("BF16", [H])
            write_st(p1, part)
        if kw.get("meta_first"):
            p1 = os.path.join(d, "model-00001-of-00002.safetensors")
            part = {k: v for k, v in t.items() if SHARDS["model-00001-of-00002.safetensors"](k)}
            write_st(p1, part, dict({"format": "pt"}, **kw["meta_first"]))
    tw = os.path.join(tmp, name, "dense")
    tt, tc, _ = twin()
    write_model(tw, tt, tc)
    return d, tw, needles


COMMANDS = ["inspect", "import", "convert-modelopt", "convert-compressed-tensors", "convert-gpt-oss",
            "convert-lofp", "convert-gguf", "verify-checkpoint"]


def argv(cmd, d, out, twin):
    if cmd == "inspect":
        return ["inspect", d]
    if cmd == "import":
        return ["import", d, out]
    if cmd == "verify-checkpoint":
        return ["verify-checkpoint", twin, d]
    fmt = cmd[len("convert-"):]
    return ["convert", "--quiet", "--to", fmt, d, out + (".gguf" if fmt == "gguf" else "")]


# A refusal of the format pair (no exact path from this input's format to the target, a target
# that cannot hold the tensors) is a clean answer to a convert whatever else is wrong.
PAIR_REFUSALS = ("no exact path", "has no place", "not one this format holds", "no tensor to quantize",
                 "holds no quantized tensors", "no layout pinned", "dense llama directory",
                 "nothing to import", "takes an already-quantized checkpoint", "for the llama architecture only",
                 "do not fit NVFP4 exactly")


def judge(cmd, p, needles, d, out, before, timed_out, expect="error"):
    """'' when clean, else the symptom."""
    if timed_out:
        return "hang (no exit within %ds)" % TIMEOUT
    err = p.stderr
    if "Sanitizer" in err or "runtime error:" in err or "AddressSanitizer" in err:
        line = next((ln for ln in err.splitlines() if "ERROR:" in ln or "runtime error:" in ln), err[:200])
        return "sanitizer report: " + line.strip()
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}"
    if dir_digest(d) != before:
        return "input directory changed"
    outs = [out, out + ".gguf"]
    parent = os.path.dirname(out)
    left = [f for f in os.listdir(parent) if f not in ("model", "dense", "outside")]
    if p.returncode == 0:
        if expect == "any":
            for o in outs:
                if os.path.exists(o):
                    q = subprocess.run([LOFP, "inspect", o], capture_output=True, text=True, timeout=TIMEOUT,
                                       errors="replace")
                    if q.returncode != 0:
                        return f"exit 0 but lofp inspect cannot read what it wrote: {q.stderr.strip()[:300]}"
            return ""
        if cmd in ("inspect", "verify-checkpoint"):
            return f"exit 0 ({cmd} accepted the lie)"
        return "exit 0, wrote " + ", ".join(sorted(left)) if left else "exit 0"
    if left:
        return "failed but left " + ", ".join(sorted(left))
    if expect == "any" or cmd == "verify-checkpoint":
        return ""
    if cmd.startswith("convert") or cmd == "import":
        if any(r in err for r in PAIR_REFUSALS):
            return ""
    missing = [n for n in needles if not any(alt in err for alt in n.split("|"))]
    if missing:
        return f"message lacks {missing}: {err.strip()[:300]}"
    return ""


def run_case(tmp, name):
    d, twin, needles = build(tmp, name)
    expect = CASES[name][4]
    out = os.path.join(tmp, name, "out")
    results = {}
    for cmd in COMMANDS:
        before = dir_digest(d)
        args = argv(cmd, d, out, twin)
        timed_out = False
        try:
            p = subprocess.run([LOFP, *args], capture_output=True, text=True, timeout=TIMEOUT, errors="replace")
        except subprocess.TimeoutExpired as e:
            timed_out = True
            p = subprocess.CompletedProcess(e.cmd, -9, "", "")
        exp = "any" if cmd == "verify-checkpoint" else expect.get(cmd, "error")
        sym = judge(cmd, p, needles, d, out, before, timed_out, exp)
        results[cmd] = (sym, args, p)
        for f in os.listdir(os.path.dirname(out)):
            if f not in ("model", "dense", "outside"):
                q = os.path.join(os.path.dirname(out), f)
                shutil.rmtree(q) if os.path.isdir(q) and not os.path.islink(q) else os.remove(q)
    return results


def main():
    global LOFP
    LOFP = os.path.abspath(sys.argv[1])
    table = "--table" in sys.argv
    strict = os.environ.get("LOFP_STRICT_XFAIL") == "1"
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    with open(LOFP, "rb") as f:
        image = f.read()
    sanitized = b"__asan_init" in image or b"__ubsan_handle" in image
    tmp = tempfile.mkdtemp(prefix="lofp_hostile_")
    failed = xfail = xpass = passed = 0
    try:
        for name in CASES:
            if only and name not in only:
                continue
            res = run_case(tmp, name)
            for cmd, (sym, args, p) in res.items():
                key = f"{name}/{cmd}"
                listed = any(n in XFAIL and cmd in XFAIL[n][0].split() and (len(XFAIL[n]) < 3 or sanitized)
                             for n in (name, f"{name}_{cmd}"))
                if table:
                    print(f"{key:60s} rc={p.returncode:4d} {sym or 'clean'}", flush=True)
                    if sym:
                        print("    lofp " + " ".join(a.replace(tmp, "$T") for a in args))
                    continue
                if sym and listed:
                    xfail += 1
                    print(f"XFAIL {key}: {sym[:200]}", flush=True)
                elif sym:
                    failed += 1
                    print(f"FAIL {key}: {sym}\n    lofp {' '.join(args)}\n{p.stderr[-2000:]}", flush=True)
                elif listed:
                    xpass += 1
                    print(f"XPASS {key} (fixed? remove it from XFAIL)", flush=True)
                else:
                    passed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not table:
        print(f"{passed} passed, {failed} failed, {xfail} expected failures, {xpass} unexpected passes")
    return 1 if failed or (strict and xpass) else 0


if __name__ == "__main__":
    sys.exit(main())
