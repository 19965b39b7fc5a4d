#!/usr/bin/env python3
"""End-to-end tests of `lofp convert` / `lofp import` (docs/CHECKPOINTS.md) against decoders lofp
did not write and the facts of the reference page (names, dtypes, shapes, config keys, scale
directions):

  * every safetensors output is read with the safetensors package (U8/F32 tensors) or, for the FP8
    tensors numpy has no dtype for, the raw bytes at the offsets of the header, viewed with
    ml_dtypes; GGUF outputs are read with gguf-py's GGUFReader and decoded with gguf.quants;
  * each format is decoded here, in numpy, by the formula its consumers use (ModelOpt
    e2m1 * (scale * weight_scale_2); compressed-tensors e2m1 * (scale / weight_global_scale);
    gpt-oss's LUT + ldexp; MX e2m1/e4m3 * 2^(e-127)) and `lofp import --dtype f32` must give the
    same fp32 bits;
  * bad inputs must fail with a message naming the file and tensor, leaving nothing behind.

usage: ckpt_test.py LOFP_BINARY [--slow]     prints 'N passed, M failed'
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback

import ml_dtypes
import numpy as np
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402

LOFP = None
TMP = None
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def run(*args, ok=True):
    p = subprocess.run([LOFP, *args], capture_output=True, text=True)
    # under the ASan build a sanitizer report is a failure even where lofp was meant to fail
    if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
        raise AssertionError(f"lofp {' '.join(args)}: sanitizer report:\n{p.stderr}")
    if ok and p.returncode != 0:
        raise AssertionError(f"lofp {' '.join(args)} failed:\n{p.stderr}")
    if not ok and p.returncode == 0:
        raise AssertionError(f"lofp {' '.join(args)} succeeded but should have failed")
    return p


# ---- reading safetensors without lofp ---------------------------------------------------------

def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return h, 8 + n


def st_raw(path, name):
    h, base = st_header(path)
    e = h[name]
    a, b = e["data_offsets"]
    with open(path, "rb") as f:
        f.seek(base + a)
        return np.frombuffer(f.read(b - a), np.uint8), e["dtype"], tuple(e["shape"])


def load_dir(d):
    """name -> (dtype string, shape, getter) over every shard of a model directory."""
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        p = os.path.join(d, fn)
        h, _ = st_header(p)
        for k, e in h.items():
            if k != "__metadata__":
                out[k] = (e["dtype"], tuple(e["shape"]), p)
    return out


def get(entry, name):
    """A tensor as numpy: U8/F32/BF16/I64 through safetensors itself, FP8 from raw bytes."""
    dt, shape, path = entry
    if dt in ("F8_E4M3",):
        raw, _, _ = st_raw(path, name)
        return raw.view(ml_dtypes.float8_e4m3fn).reshape(shape)
    with safe_open(path, "numpy") as f:
        return f.get_tensor(name)


def f32(x):
    return np.asarray(x, np.float32) if x.dtype != ml_dtypes.bfloat16 else x.astype(np.float32)


def unpack_fp4(u8):
    """[..., K/2] bytes -> [..., K] E2M1 values, element 2i in the low nibble."""
    lo, hi = E2M1[u8 & 15], E2M1[u8 >> 4]
    return np.stack([lo, hi], -1).reshape(*u8.shape[:-1], u8.shape[-1] * 2)


def rel_err(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def same_bits(a, b, what):
    a = np.ascontiguousarray(a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    assert bad.size == 0, f"{what}: {bad.size} values differ, first at {bad[0]}: {a.flat[bad[0]]} vs {b.flat[bad[0]]}"


# ---- the tests --------------------------------------------------------------------------------

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def llama():
    d = os.path.join(TMP, "llama")
    if not os.path.isdir(d):
        cm.build_llama(d)
    return d, cm.llama_tensors()


def quantized_linears(orig):
    return [k for k, v in orig.items() if v.ndim == 2 and k.endswith(".weight") and not any(
        s in k for s in ("embed", "lm_head", "norm", "mlp.gate.weight"))]


def fused_groups(names):
    groups = {}
    for n in names:
        m = n[:-len(".weight")]
        prefix, leaf = m.rsplit(".", 1)
        g = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gu", "up_proj": "gu"}.get(leaf)
        if g:
            groups.setdefault((prefix, g), []).append(n)
    return groups


def check_copied_files(src, out):
    for f in ("tokenizer.json", "generation_config.json"):
        assert open(os.path.join(src, f), "rb").read() == open(os.path.join(out, f), "rb").read(), f"{f} not copied"
    idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    tensors = load_dir(out)
    assert set(idx["weight_map"]) == set(tensors), "index names differ from the shards' tensors"
    for k, shard in idx["weight_map"].items():
        assert os.path.basename(tensors[k][2]) == shard, f"index puts {k} in {shard}"
    assert set(idx["weight_map"].values()) == {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}


def check_imported(out_imp, expect):
    """The imported directory: same names/shapes as `expect` {name: (shape, array f32)}."""
    got = load_dir(out_imp)
    for k, (shape, ref) in expect.items():
        assert k in got, f"import lacks {k}"
        assert got[k][1] == shape, f"import {k}: shape {got[k][1]} vs {shape}"
        same_bits(f32(get(got[k], k)), ref, f"import {k}")
    cfg = json.load(open(os.path.join(out_imp, "config.json")))
    assert "quantization_config" not in cfg


@test
def modelopt_nvfp4():
    src, orig = llama()
    out = os.path.join(TMP, "mo_nvfp4")
    run("convert", "--to", "modelopt", "--jobs", "2", src, out, "--quiet")
    hq = json.load(open(os.path.join(out, "hf_quant_config.json")))
    q = hq["quantization"]
    # vLLM's ModelOptNvFp4Config._from_config needs all three keys (checkpoints.md 2.1)
    assert q["quant_algo"] == "W4A16_NVFP4" and q["group_size"] == 16 and q["kv_cache_quant_algo"] is None
    assert {"lm_head", "model.embed_tokens", "model.layers.*.mlp.gate"} <= set(q["exclude_modules"]), q["exclude_modules"]
    assert hq["producer"]["name"] == "modelopt"
    qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    assert qc["quant_method"] == "modelopt" and qc["quant_algo"] == "W4A16_NVFP4"
    assert qc["config_groups"]["group_0"]["weights"]["group_size"] == 16 and "input_activations" not in qc["config_groups"]["group_0"]
    assert json.load(open(os.path.join(out, "config.json")))["rms_norm_eps"] == 1e-05
    check_copied_files(src, out)
    t = load_dir(out)
    expect = {}
    lin = quantized_linears(orig)
    s2 = {}
    for n in lin:
        m = n[:-7]
        N, K = orig[n].shape
        assert t[n][0] == "U8" and t[n][1] == (N, K // 2), (n, t[n][:2])
        assert t[m + ".weight_scale"][0] == "F8_E4M3" and t[m + ".weight_scale"][1] == (N, K // 16)
        assert t[m + ".weight_scale_2"][0] == "F32" and t[m + ".weight_scale_2"][1] == ()  # 0-d
        assert m + ".input_scale" not in t
        codes = unpack_fp4(get(t[n], n))
        sc = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.float32)
        s2[n] = get(t[m + ".weight_scale_2"], m + ".weight_scale_2").astype(np.float32).reshape(())
        dec = codes * np.repeat(sc * s2[n], 16, axis=1)           # ModelOpt: e2m1 * (scale * s2)
        expect[n] = ((N, K), dec.astype(np.float32))
        assert rel_err(dec, f32(orig[n])) < 0.15, f"{n}: error {rel_err(dec, f32(orig[n]))}"
    for n in orig:
        if n not in lin:
            assert t[n][0] == "BF16" and t[n][1] == orig[n].shape, n
            expect[n] = (orig[n].shape, f32(orig[n]))
    # one per-tensor scale per fused group, in the decode direction: group amax / 2688
    for (prefix, g), members in fused_groups(lin).items():
        vals = {float(s2[n]) for n in members}
        assert len(vals) == 1, f"{prefix} {g}: weight_scale_2 differ: {vals}"
        amax = max(float(np.abs(f32(orig[n])).max()) for n in members)
        assert abs(vals.pop() - amax / 2688) <= 1e-6 * amax / 2688, f"{prefix}: weight_scale_2 is not amax/2688"
    assert len(fused_groups(lin)) == 2 + 1 + cm.E, "fused groups"  # l0 qkv, gate/up; l1 qkv; per expert gate/up
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    check_imported(imp, expect)
    assert not os.path.exists(os.path.join(imp, "hf_quant_config.json"))


@test
def modelopt_nvfp4_no_fuse_and_input_scales():
    src, orig = llama()
    out = os.path.join(TMP, "mo_nofuse")
    run("convert", "--to", "modelopt", "--no-fuse-scales", src, out, "--quiet")
    t = load_dir(out)
    a = float(get(t["model.layers.0.self_attn.q_proj.weight_scale_2"], "model.layers.0.self_attn.q_proj.weight_scale_2"))
    b = float(get(t["model.layers.0.self_attn.k_proj.weight_scale_2"], "model.layers.0.self_attn.k_proj.weight_scale_2"))
    assert a != b, "--no-fuse-scales kept one scale"
    lin = quantized_linears(orig)
    amax = {n[:-7]: 4.0 + i for i, n in enumerate(lin)}
    js = os.path.join(TMP, "act.json")
    json.dump(amax, open(js, "w"))
    out2 = os.path.join(TMP, "mo_w4a4")
    run("convert", "--to", "modelopt", "--input-scales", js, src, out2, "--quiet")
    hq = json.load(open(os.path.join(out2, "hf_quant_config.json")))
    assert hq["quantization"]["quant_algo"] == "NVFP4"
    qc = json.load(open(os.path.join(out2, "config.json")))["quantization_config"]
    assert "input_activations" in qc["config_groups"]["group_0"]
    t = load_dir(out2)
    for (prefix, g), members in fused_groups(lin).items():
        want = max(amax[n[:-7]] for n in members) / 2688
        for n in members:
            m = n[:-7]
            assert t[m + ".input_scale"][1] == ()
            v = float(get(t[m + ".input_scale"], m + ".input_scale"))
            assert abs(v - want) <= 1e-6 * want, (m, v, want)
    out3 = os.path.join(TMP, "ct_w4a4")
    run("convert", "--to", "compressed-tensors", "--input-scales", js, src, out3, "--quiet")
    t = load_dir(out3)
    m = "model.layers.0.self_attn.o_proj"
    v = float(get(t[m + ".input_global_scale"], m + ".input_global_scale")[0])
    assert abs(v - 2688 / amax[m]) <= 1e-6 * v, "input_global_scale is not 2688/amax"


@test
def modelopt_mxfp8():
    src, orig = llama()
    out = os.path.join(TMP, "mo_mxfp8")
    run("convert", "--to", "modelopt", "--scheme", "mxfp8", src, out, "--quiet")
    q = json.load(open(os.path.join(out, "hf_quant_config.json")))["quantization"]
    assert q["quant_algo"] == "MXFP8" and q["group_size"] == 32 and "exclude_modules" in q and "kv_cache_quant_algo" in q
    t = load_dir(out)
    expect = {}
    for n in quantized_linears(orig):
        m = n[:-7]
        N, K = orig[n].shape
        assert t[n][0] == "F8_E4M3" and t[n][1] == (N, K)
        assert t[m + ".weight_scale"][0] == "U8" and t[m + ".weight_scale"][1] == (N, K // 32)  # 2-D, linear
        e = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.int32)
        dec = get(t[n], n).astype(np.float32) * np.repeat(np.ldexp(np.float32(1), e - 127).astype(np.float32), 32, axis=1)
        expect[n] = ((N, K), dec)
        assert rel_err(dec, f32(orig[n])) < 0.05
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    check_imported(imp, expect)


@test
def compressed_tensors_nvfp4():
    src, orig = llama()
    out = os.path.join(TMP, "ct_nvfp4")
    run("convert", "--to", "compressed-tensors", src, out, "--quiet")
    qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "nvfp4-pack-quantized"
    assert qc["quantization_status"] == "compressed"
    g = next(iter(qc["config_groups"].values()))
    w = g["weights"]
    assert (w["num_bits"], w["type"], w["strategy"], w["group_size"], w["symmetric"], w["dynamic"], w["scale_dtype"]) == \
        (4, "float", "tensor_group", 16, True, False, "torch.float8_e4m3fn")
    assert g["input_activations"] is None and g["format"] == "nvfp4-pack-quantized" and g["targets"] == ["Linear"]
    assert "lm_head" in qc["ignore"]
    t = load_dir(out)
    expect = {}
    gs = {}
    lin = quantized_linears(orig)
    for n in lin:
        m = n[:-7]
        N, K = orig[n].shape
        assert t[m + ".weight_packed"][:2] == ("U8", (N, K // 2))
        assert t[m + ".weight_scale"][:2] == ("F8_E4M3", (N, K // 16))
        assert t[m + ".weight_global_scale"][:2] == ("F32", (1,))
        assert n not in t
        codes = unpack_fp4(get(t[m + ".weight_packed"], m + ".weight_packed"))
        sc = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.float32)
        gs[n] = get(t[m + ".weight_global_scale"], m + ".weight_global_scale").astype(np.float32)[0]
        dec = codes * np.repeat(sc / gs[n], 16, axis=1)            # compressed-tensors: e2m1 * (scale / global)
        expect[n] = ((N, K), dec.astype(np.float32))
        assert rel_err(dec, f32(orig[n])) < 0.15
    for (prefix, g_), members in fused_groups(lin).items():
        vals = {float(gs[n]) for n in members}
        assert len(vals) == 1, f"{prefix}: global scales differ"
        amax = max(float(np.abs(f32(orig[n])).max()) for n in members)
        v = vals.pop()
        assert abs(v - 2688 / amax) <= 1e-6 * v, "weight_global_scale is not the encode multiplier 2688/amax"
    for n in orig:
        if n not in lin:
            expect[n] = (orig[n].shape, f32(orig[n]))
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    check_imported(imp, expect)


@test
def compressed_tensors_mxfp4():
    src, orig = llama()
    out = os.path.join(TMP, "ct_mxfp4")
    run("convert", "--to", "compressed-tensors", "--scheme", "mxfp4", src, out, "--quiet")
    qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    assert qc["format"] == "mxfp4-pack-quantized"
    w = next(iter(qc["config_groups"].values()))["weights"]
    assert (w["strategy"], w["group_size"], w["scale_dtype"]) == ("group", 32, "torch.uint8")
    t = load_dir(out)
    expect = {}
    for n in quantized_linears(orig):
        m = n[:-7]
        N, K = orig[n].shape
        assert t[m + ".weight_scale"][:2] == ("U8", (N, K // 32))
        assert m + ".weight_global_scale" not in t
        codes = unpack_fp4(get(t[m + ".weight_packed"], m + ".weight_packed"))
        e = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.int32)
        dec = codes * np.repeat(np.ldexp(np.float32(1), e - 127).astype(np.float32), 32, axis=1)
        expect[n] = ((N, K), dec.astype(np.float32))
        assert rel_err(dec, f32(orig[n])) < 0.2
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    check_imported(imp, expect)


def oss_decode(blocks, scales):
    """gpt-oss weights.py: LUT by raw code, low nibble = element 2i, ldexp(value, scale - 127)."""
    lut = E2M1
    lo, hi = lut[blocks & 15], lut[blocks >> 4]
    v = np.stack([lo, hi], -1).reshape(*blocks.shape[:-1], 32)
    v = np.ldexp(v, (scales.astype(np.int32) - 127)[..., None]).astype(np.float32)
    return v.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


@test
def gpt_oss_mxfp4():
    src, orig = llama()
    out = os.path.join(TMP, "oss")
    run("convert", "--to", "gpt-oss", src, out, "--quiet")
    qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    assert qc["quant_method"] == "mxfp4" and isinstance(qc["modules_to_not_convert"], list)
    assert "lm_head" in qc["modules_to_not_convert"]
    t = load_dir(out)
    p = "model.layers.1.mlp.experts."
    for e in range(cm.E):
        assert f"{p}{e}.gate_proj.weight" not in t
    gb, gsc = get(t[p + "gate_up_proj_blocks"], p + "gate_up_proj_blocks"), get(t[p + "gate_up_proj_scales"], p + "gate_up_proj_scales")
    db, dsc = get(t[p + "down_proj_blocks"], p + "down_proj_blocks"), get(t[p + "down_proj_scales"], p + "down_proj_scales")
    assert gb.shape == (cm.E, 2 * cm.IE, cm.H // 32, 16) and gsc.shape == (cm.E, 2 * cm.IE, cm.H // 32)
    assert db.shape == (cm.E, cm.H, cm.IE // 32, 16) and dsc.shape == (cm.E, cm.H, cm.IE // 32)
    assert gb.dtype == np.uint8 and gsc.dtype == np.uint8
    gu = oss_decode(gb, gsc)
    dn = oss_decode(db, dsc)
    for e in range(cm.E):
        gate = f32(orig[f"{p}{e}.gate_proj.weight"])
        up = f32(orig[f"{p}{e}.up_proj.weight"])
        assert rel_err(gu[e, 0::2], gate) < 0.2 and rel_err(gu[e, 1::2], up) < 0.2, "gate/up rows not interleaved (even = gate)"
        assert rel_err(dn[e], f32(orig[f"{p}{e}.down_proj.weight"])) < 0.2
    assert t["model.layers.1.self_attn.q_proj.weight"][0] == "BF16"
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    # transformers' convert_moe_packed_tensors transposes to [E, in, out]
    check_imported(imp, {p + "gate_up_proj": ((cm.E, cm.H, 2 * cm.IE), gu.transpose(0, 2, 1)),
                         p + "down_proj": ((cm.E, cm.IE, cm.H), dn.transpose(0, 2, 1))})


@test
def shard_slices_and_merge_index():
    src, orig = llama()
    out = os.path.join(TMP, "sliced")
    run("convert", "--to", "compressed-tensors", "--shard", "2/2", src, out, "--quiet")
    assert sorted(os.listdir(out)) == [".lofp-slice-2-of-2.json", "model-00002-of-00002.safetensors"], os.listdir(out)
    p = run("convert", "--to", "compressed-tensors", "--merge-index", src, out, ok=False)
    assert "model-00001-of-00002.safetensors" in p.stderr, p.stderr
    run("convert", "--to", "compressed-tensors", "--shard", "1/2", src, out, "--quiet")
    run("convert", "--to", "compressed-tensors", "--merge-index", src, out, "--quiet")
    whole = os.path.join(TMP, "ct_nvfp4")
    if not os.path.isdir(whole):
        run("convert", "--to", "compressed-tensors", src, whole, "--quiet")
    for f in sorted(os.listdir(whole)):
        a, b = open(os.path.join(whole, f), "rb").read(), open(os.path.join(out, f), "rb").read()
        assert a == b, f"sliced conversion differs from the whole one in {f}"


def expect_failure(args, *needles, out=None):
    p = run(*args, ok=False)
    for n in needles:
        assert n in p.stderr, f"message lacks {n!r}: {p.stderr}"
    if out:
        assert not os.path.exists(out), f"{out} was written"
        parent = os.path.dirname(out)
        assert not [f for f in os.listdir(parent) if "lofp-tmp" in f or ".tmp-" in f], "a temporary was left behind"
    return p.stderr


@test
def bad_inputs():
    src, orig = llama()
    bad = os.path.join(TMP, "bad")
    os.makedirs(bad, exist_ok=True)
    # broken index
    d = os.path.join(bad, "broken_index")
    shutil.copytree(src, d)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write('{"weight_map": {"a": ')
    expect_failure(["convert", "--to", "modelopt", d, d + "_o"], "model.safetensors.index.json", "JSON", out=d + "_o")
    # a shard missing
    d = os.path.join(bad, "missing_shard")
    shutil.copytree(src, d)
    os.remove(os.path.join(d, "model-00002-of-00002.safetensors"))
    expect_failure(["convert", "--to", "modelopt", d, d + "_o"], "model-00002-of-00002.safetensors", "missing", out=d + "_o")
    # a tensor in the index that no shard holds
    d = os.path.join(bad, "ghost")
    shutil.copytree(src, d)
    ip = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(ip))
    idx["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors"
    json.dump(idx, open(ip, "w"))
    expect_failure(["import", d, d + "_o"], "model.layers.9.mlp.up_proj.weight", "model-00001-of-00002.safetensors", out=d + "_o")
    expect_failure(["convert", "--to", "gpt-oss", d, d + "_o"], "model.layers.9.mlp.up_proj.weight", out=d + "_o")
    # K not a multiple of the block: names the tensor and says what --pad does
    d = os.path.join(bad, "odd_k")
    t = dict(orig)
    t["model.layers.0.mlp.down_proj.weight"] = orig["model.layers.0.mlp.down_proj.weight"][:, :250]
    cm.write_dir(d, t, [("model.safetensors", lambda n: True)], cm.LLAMA_CONFIG)
    expect_failure(["convert", "--to", "modelopt", d, d + "_o"], "model.layers.0.mlp.down_proj.weight", "K = 250",
                   "--pad", "256", out=d + "_o")
    # output exists: never overwritten
    os.makedirs(d + "_full")
    open(os.path.join(d + "_full", "keep"), "w").write("x")
    expect_failure(["convert", "--to", "modelopt", "--pad", d, d + "_full"], "not empty")
    assert os.listdir(d + "_full") == ["keep"]
    # missing and inverted per-tensor scales
    mo = os.path.join(TMP, "mo_nvfp4")
    if not os.path.isdir(mo):
        run("convert", "--to", "modelopt", src, mo, "--quiet")
    name = "model.layers.0.self_attn.o_proj.weight_scale_2"
    shard = os.path.join(mo, "model-00001-of-00002.safetensors")
    from safetensors.numpy import save_file
    for case in ("missing", "inverted"):
        d = os.path.join(bad, "mo_" + case)
        shutil.copytree(mo, d)
        p = os.path.join(d, "model-00001-of-00002.safetensors")
        h, base = st_header(shard)
        tensors = {}
        for k, e in h.items():
            if k == "__metadata__":
                continue
            raw, dt, shape = st_raw(shard, k)
            tensors[k] = (raw, dt, shape)
        # rewrite the shard with raw bytes (FP8 as U8 of the same bytes would change the dtype, so
        # write the header by hand)
        if case == "missing":
            del tensors[name]
            idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
            del idx["weight_map"][name]
            json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
        else:
            v = np.frombuffer(tensors[name][0].tobytes(), np.float32)
            tensors[name] = (np.frombuffer((np.float32(1) / v).astype(np.float32).tobytes(), np.uint8), "F32", ())
        hdr, off, blobs = {}, 0, []
        for k, (raw, dt, shape) in tensors.items():
            hdr[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + raw.size]}
            off += raw.size
            blobs.append(raw.tobytes())
        hb = json.dumps(hdr).encode()
        hb += b" " * (-len(hb) % 8)
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
        err = expect_failure(["import", d, d + "_o"], "model-00001-of-00002.safetensors",
                             "model.layers.0.self_attn.o_proj", out=d + "_o")
        assert ("missing" in err) if case == "missing" else ("inverted" in err), err
    # compressed-tensors with the decode scale where the encode multiplier belongs
    ct = os.path.join(TMP, "ct_nvfp4")
    if not os.path.isdir(ct):
        run("convert", "--to", "compressed-tensors", src, ct, "--quiet")
    d = os.path.join(bad, "ct_inverted")
    shutil.copytree(ct, d)
    p = os.path.join(d, "model-00002-of-00002.safetensors")
    nm = "model.layers.1.self_attn.o_proj.weight_global_scale"
    h, base = st_header(p)
    a, b = h[nm]["data_offsets"]
    with open(p, "r+b") as f:
        f.seek(base + a)
        v = np.frombuffer(f.read(4), np.float32)[0]
        f.seek(base + a)
        f.write(np.float32(1 / v).tobytes())
    expect_failure(["import", d, d + "_o"], "inverted", nm, out=d + "_o")
    # an already quantized model with no exact path to the target (casts_test.py has the paths)
    expect_failure(["convert", "--to", "gpt-oss", ct, os.path.join(bad, "x")], "no exact path", "lofp import",
                   out=os.path.join(bad, "x"))


# ---- GGUF --------------------------------------------------------------------------------------

def make_gguf(path, types):
    import gguf
    from gguf import GGMLQuantizationType as T
    rng = np.random.default_rng(3)
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(128)
    w.add_feed_forward_length(256)
    w.add_head_count(4)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    w.add_string("general.name", "tiny")
    w.add_file_type(7)
    tensors = {}

    def add(name, shape, qt):
        x = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if qt == T.F32:
            w.add_tensor(name, x)
        elif qt == T.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qt), raw_dtype=qt)
        tensors[name] = qt
    add("token_embd.weight", (256, 128), T.Q8_0)
    add("blk.0.attn_norm.weight", (128,), T.F32)
    for i, nm in enumerate(("attn_q", "attn_k", "attn_v", "attn_output")):
        add(f"blk.0.{nm}.weight", (128, 128), types[i % len(types)])
    add("blk.0.ffn_gate.weight", (256, 128), types[0])
    add("blk.0.ffn_up.weight", (256, 128), types[-1])
    add("blk.0.ffn_down.weight", (128, 256), T.F16)
    add("output_norm.weight", (128,), T.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


def check_requant(src, out, scheme):
    """gguf-py reads OUT: every KV kept (file type updated), untouched tensors byte-identical,
    the rest type 39/40 with a .scale for NVFP4; its dequantization (x .scale) equals lofp
    import's bit for bit and stays close to the source."""
    import gguf
    from gguf import GGMLQuantizationType as T
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    for k, f in a.fields.items():
        if k.startswith("GGUF."):
            continue
        assert k in b.fields, f"KV {k} lost"
        if k == "general.file_type":
            assert int(b.fields[k].contents()) == (39 if scheme == "nvfp4" else 38)
            continue
        assert f.contents() == b.fields[k].contents(), f"KV {k} changed"
    bt = {t.name: t for t in b.tensors}
    target = T.NVFP4 if scheme == "nvfp4" else T.MXFP4
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    dense = load_dir(imp)
    nq = 0
    for t in a.tensors:
        o = bt[t.name]
        assert list(o.shape) == list(t.shape), t.name
        quant = t.name.endswith(".weight") and len(t.shape) >= 2 and not t.name.startswith(("token_embd", "output."))
        if not quant:
            assert o.tensor_type == t.tensor_type and bytes(o.data) == bytes(t.data), f"{t.name} changed"
            continue
        nq += 1
        assert o.tensor_type == target, f"{t.name}: type {o.tensor_type}"
        dec = gguf.quants.dequantize(o.data, o.tensor_type).astype(np.float32)
        if scheme == "nvfp4":
            st = bt[t.name[:-len(".weight")] + ".scale"]
            assert st.tensor_type == T.F32 and list(st.shape) == [1]
            dec = dec * np.float32(st.data[0])
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        assert rel_err(dec, ref) < 0.2, f"{t.name}: error {rel_err(dec, ref)}"
        same_bits(f32(get(dense[t.name], t.name)), dec.reshape(dense[t.name][1]), f"import {t.name}")
    assert nq > 0
    return nq


@test
def gguf_requantize():
    from gguf import GGMLQuantizationType as T
    src = os.path.join(TMP, "tiny.gguf")
    make_gguf(src, [T.Q4_1, T.Q4_0, T.Q8_0, T.F16, T.Q5_0, T.Q5_1, T.BF16, T.F32])
    for scheme in ("mxfp4", "nvfp4"):
        out = os.path.join(TMP, f"tiny-{scheme}.gguf")
        run("convert", "--to", "gguf", "--scheme", scheme, src, out, "--quiet")
        check_requant(src, out, scheme)
        # requantizing the requantized file (MXFP4/NVFP4 sources, .scale applied) works too
        out2 = out + ".again.gguf"
        run("convert", "--to", "gguf", "--scheme", "nvfp4", out, out2, "--quiet")


@test
def gguf_bad_inputs():
    from gguf import GGMLQuantizationType as T
    src = os.path.join(TMP, "tiny2.gguf")
    make_gguf(src, [T.F16])
    data = bytearray(open(src, "rb").read())
    # the type word of blk.0.attn_q.weight: after its name and 2 dims
    name = b"blk.0.attn_q.weight"
    i = data.index(name) + len(name)
    n_dims = struct.unpack_from("<I", data, i)[0]
    ti = i + 4 + 8 * n_dims
    struct.pack_into("<I", data, ti, 99)
    bad = os.path.join(TMP, "unknown_type.gguf")
    open(bad, "wb").write(bytes(data))
    expect_failure(["convert", "--to", "gguf", bad, bad + ".o.gguf"], "unknown_type.gguf", "blk.0.attn_q.weight", "99",
                   out=bad + ".o.gguf")
    expect_failure(["import", bad, bad + "_o"], "blk.0.attn_q.weight", out=bad + "_o")
    trunc = os.path.join(TMP, "trunc.gguf")
    open(trunc, "wb").write(bytes(data[:200]))
    expect_failure(["convert", "--to", "gguf", trunc, trunc + ".o.gguf"], "trunc.gguf", out=trunc + ".o.gguf")
    d, _ = llama()   # has a MoE layer: no llama.cpp llama names for its experts
    expect_failure(["convert", "--to", "gguf", d, os.path.join(TMP, "dir.gguf")], "model.layers.1.mlp", "convert_hf_to_gguf",
                   out=os.path.join(TMP, "dir.gguf"))
    m = cm.minilm_dir()
    expect_failure(["convert", "--to", "gguf", m, os.path.join(TMP, "bert.gguf")], "bert", "convert_hf_to_gguf",
                   out=os.path.join(TMP, "bert.gguf"))


@test
def gguf_from_llama_dir():
    """A dense llama directory to a whole GGUF model: llama.* keys from config.json, the BPE
    tokenizer, llama.cpp tensor names and shapes, q/k rows permuted to ggml's RoPE pair order."""
    import gguf
    from gguf import GGMLQuantizationType as T
    t = {k: v for k, v in cm.llama_tensors(5).items() if not k.startswith("model.layers.1.")}
    d = os.path.join(TMP, "llama_dense")
    cfg = dict(cm.LLAMA_CONFIG, num_hidden_layers=1, bos_token_id=1, eos_token_id=2, max_position_embeddings=512)
    cm.write_dir(d, t, [("model.safetensors", lambda n: True)], cfg, extra_files=False)
    vocab = {f"t{i}": i for i in range(cm.V - 2)}
    tok = {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1", ["t1", "t2"]]},
           "added_tokens": [{"id": cm.V - 2, "content": "<s>", "special": True}, {"id": cm.V - 1, "content": "</s>", "special": True}]}
    json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w"))
    for scheme in ("mxfp4", "nvfp4"):
        out = os.path.join(TMP, f"llama-{scheme}.gguf")
        run("convert", "--to", "gguf", "--scheme", scheme, d, out, "--quiet")
        r = gguf.GGUFReader(out)
        f = {k: v.contents() for k, v in r.fields.items()}
        assert f["general.architecture"] == "llama" and f["llama.block_count"] == 1
        assert f["llama.embedding_length"] == cm.H and f["llama.feed_forward_length"] == cm.I
        assert f["llama.attention.head_count"] == 4 and f["llama.attention.head_count_kv"] == 2
        assert abs(f["llama.attention.layer_norm_rms_epsilon"] - 1e-5) < 1e-12 and f["llama.rope.dimension_count"] == cm.H // 4
        assert f["tokenizer.ggml.model"] == "gpt2" and len(f["tokenizer.ggml.tokens"]) == cm.V
        assert f["tokenizer.ggml.tokens"][cm.V - 1] == "</s>" and f["tokenizer.ggml.token_type"][cm.V - 1] == 3
        assert f["tokenizer.ggml.merges"] == ["t t1", "t1 t2"] and f["tokenizer.ggml.eos_token_id"] == 2
        tt = {x.name: x for x in r.tensors}
        assert tt["token_embd.weight"].tensor_type == T.BF16 and tt["blk.0.attn_norm.weight"].tensor_type == T.F32
        assert tt["output.weight"].tensor_type == T.BF16 and "output_norm.weight" in tt
        target = T.NVFP4 if scheme == "nvfp4" else T.MXFP4
        for hf, gg, heads in (("self_attn.q_proj", "attn_q", 4), ("self_attn.k_proj", "attn_k", 2), ("self_attn.v_proj", "attn_v", 0),
                              ("mlp.down_proj", "ffn_down", 0)):
            x = tt[f"blk.0.{gg}.weight"]
            assert x.tensor_type == target, gg
            dec = gguf.quants.dequantize(x.data, x.tensor_type).astype(np.float32)
            if scheme == "nvfp4":
                dec = dec * np.float32(tt[f"blk.0.{gg}.scale"].data[0])
            w = f32(t[f"model.layers.0.{hf}.weight"])
            if heads:  # llama.cpp's permute: (heads, 2, hd/2, K) -> (heads, hd/2, 2, K)
                w = w.reshape(heads, 2, w.shape[0] // heads // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
            assert dec.shape == w.shape and rel_err(dec, w) < 0.2, (gg, rel_err(dec, w))
    d2 = os.path.join(TMP, "llama_spm")
    shutil.copytree(d, d2)
    tok["model"]["byte_fallback"] = True
    json.dump(tok, open(os.path.join(d2, "tokenizer.json"), "w"))
    expect_failure(["convert", "--to", "gguf", d2, d2 + ".gguf"], "tokenizer.json", "byte_fallback", out=d2 + ".gguf")


# ---- real models -------------------------------------------------------------------------------

@test
def glassllm_real():
    d = os.path.join(TMP, "glass")
    orig = cm.build_glassllm(d)
    k = "model.layers.0.mlp.down_proj.weight"
    assert orig[k].shape == (128, 341)
    expect_failure(["convert", "--to", "compressed-tensors", d, d + "_ct"], k, "K = 341", "--pad", out=d + "_ct")
    run("convert", "--to", "compressed-tensors", "--pad", d, d + "_ct", "--quiet")
    run("import", "--dtype", "f32", d + "_ct", d + "_imp", "--quiet")
    imp = load_dir(d + "_imp")
    t = load_dir(d + "_ct")
    for n, v in orig.items():
        assert imp[n][1] == v.shape, f"{n}: {imp[n][1]} vs {v.shape}"
        got = f32(get(imp[n], n))
        if n.endswith("proj.weight"):
            m = n[:-7]
            K = v.shape[1]
            codes = unpack_fp4(get(t[m + ".weight_packed"], m + ".weight_packed"))
            sc = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.float32)
            g = get(t[m + ".weight_global_scale"], m + ".weight_global_scale").astype(np.float32)[0]
            dec = (codes * np.repeat(sc / g, 16, axis=1)).astype(np.float32)[:, :K]
            same_bits(got, dec, n)
            assert rel_err(got, f32(v)) < 0.15, (n, rel_err(got, f32(v)))
        else:
            same_bits(got, f32(v), n)
    # without padding: leave the odd tensors unquantized
    run("convert", "--to", "modelopt", "--exclude", "*down_proj*", d, d + "_mo", "--quiet")
    q = json.load(open(os.path.join(d + "_mo", "hf_quant_config.json")))["quantization"]
    assert "model.layers.*.mlp.down_proj" in q["exclude_modules"], q["exclude_modules"]
    run("import", d + "_mo", d + "_mo_imp", "--quiet")


@test
def minilm_real():
    src = cm.minilm_dir()
    out = os.path.join(TMP, "minilm_mo")
    run("convert", "--to", "modelopt", src, out, "--quiet")
    assert os.path.isfile(os.path.join(out, "1_Pooling", "config.json")), "sub-folders are copied"
    t = load_dir(out)
    # BERT's query/key/value share one scale (vLLM fuses them into a QKV linear)
    p = "encoder.layer.0.attention.self."
    pre = next((k[:-len(p + "query.weight")] for k in t if k.endswith(p + "query.weight")), "")
    vals = {float(get(t[pre + p + x + ".weight_scale_2"], pre + p + x + ".weight_scale_2")) for x in ("query", "key", "value")}
    assert len(vals) == 1, vals
    imp = out + "_imp"
    run("import", "--dtype", "f32", out, imp, "--quiet")
    orig = load_dir(src)
    got = load_dir(imp)
    worst = 0
    for n, e in orig.items():
        assert got[n][1] == e[1], n
        a, b = f32(get(got[n], n)), get(e, n)
        if e[0] != "F32":
            assert np.array_equal(a, b), n
            continue
        b = f32(b)
        if n.endswith(".weight") and len(e[1]) == 2 and "embeddings" not in n:
            worst = max(worst, rel_err(a, b))
        else:
            same_bits(a, b, n)
    assert 0 < worst < 0.15, worst
    run("convert", "--to", "compressed-tensors", "--scheme", "mxfp4", src, os.path.join(TMP, "minilm_ct4"), "--quiet")
    run("import", os.path.join(TMP, "minilm_ct4"), os.path.join(TMP, "minilm_ct4_imp"), "--quiet")


@test
def import_lofp_files():
    """A file of `lofp quantize` (NVFP4 two-level and MXFP4) imports to what `lofp dequantize` gives."""
    src, orig = llama()
    shard = os.path.join(src, "model-00001-of-00002.safetensors")
    for scheme in ("nvfp4", "mxfp4"):
        q = os.path.join(TMP, f"lofpq-{scheme}.safetensors")
        run("quantize", "--scheme", scheme, "--include", "*proj.weight", shard, q)
        dq = os.path.join(TMP, f"lofpq-{scheme}-dq.safetensors")
        run("dequantize", "--dtype", "f32", q, dq)
        imp = os.path.join(TMP, f"lofpq-{scheme}-imp")
        run("import", "--dtype", "f32", q, imp, "--quiet")
        a, b = load_dir(imp), {}
        h, _ = st_header(dq)
        for k in h:
            if k != "__metadata__":
                b[k] = (h[k]["dtype"], tuple(h[k]["shape"]), dq)
        assert set(a) == set(b), set(a) ^ set(b)
        for k in a:
            same_bits(f32(get(a[k], k)), f32(get(b[k], k)), f"{scheme} {k}")


@test
def inspect_formats():
    src, _ = llama()
    for d, needle in (("mo_nvfp4", "modelopt"), ("ct_nvfp4", "compressed-tensors"), ("oss", "gpt-oss")):
        p = os.path.join(TMP, d)
        if not os.path.isdir(p):
            continue
        r = run("inspect", p, "--against", src)
        assert needle in r.stdout and "bits/value" in r.stdout, r.stdout[:2000]
        if needle != "gpt-oss":  # the experts' dense names differ from the source's per-expert ones
            assert "SNR" in r.stdout and "decode" in r.stdout or "encode" in r.stdout, r.stdout[:2000]
    r = run("inspect", os.path.join(TMP, "tiny-nvfp4.gguf"))
    assert "gguf" in r.stdout and "nvfp4" in r.stdout


def slow_smollm2():
    src = cm.smollm2_gguf()
    for scheme in ("mxfp4", "nvfp4"):
        out = os.path.join(TMP, f"smollm2-{scheme}.gguf")
        run("convert", "--to", "gguf", "--scheme", scheme, src, out, "--quiet")
        n = check_requant(src, out, scheme)
        print(f"  smollm2 {scheme}: {n} tensors requantized, all decoded by gguf-py", flush=True)


def run_tests(tests, only, prefix):
    """Runs the tests whose names are in `only` (all when empty) in a fresh TMP (this module's,
    which casts_test.py shares), printing PASS/FAIL per test; returns (passed, failed)."""
    global TMP
    TMP = tempfile.mkdtemp(prefix=prefix)
    passed = failed = 0
    try:
        for t in tests:
            if only and t.__name__ not in only:
                continue
            try:
                t()
                passed += 1
                print(f"PASS {t.__name__}", flush=True)
            except Exception:
                failed += 1
                print(f"FAIL {t.__name__}", flush=True)
                traceback.print_exc()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return passed, failed


def main():
    global LOFP
    LOFP = os.path.abspath(sys.argv[1])
    if "--slow" in sys.argv:
        TESTS.append(slow_smollm2)
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    _, failed = run_tests(TESTS, only, "lofp_ckpt_")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
