#!/usr/bin/env python3
"""`lofp convert` of already-quantized checkpoints: the exact casts (docs/CHECKPOINTS.md "Exact
casts"). The inputs are written here with numpy + safetensors / gguf-py (the MXFP4 and gpt-oss
ones never touch lofp) or by lofp's dense converter (the NVFP4 chain); every output is decoded
with numpy by the format consumer's own formula (ModelOpt e2m1 * (scale * weight_scale_2),
compressed-tensors e2m1 * (scale / weight_global_scale), lofp files (e2m1 * scale) / global_scale,
MX e2m1 * 2^(e - 127), gpt-oss's LUT + ldexp) or by gguf-py, and compared bit for bit:

  * ModelOpt -> compressed-tensors -> lofp -> ModelOpt: identical decoded values at every step,
    codes and block scales identical bytes, untouched tensors identical bytes, and the names,
    dtypes, shapes and configs of what lofp's dense converter writes for that target;
  * gpt-oss -> lofp -> gpt-oss: every tensor byte for byte;
  * MXFP4 (compressed-tensors, gpt-oss, GGUF) -> NVFP4 (ModelOpt, compressed-tensors, lofp, GGUF):
    identical decoded values on every block that fits; a planted block that does not fit is
    refused by name and index, or with --requantize-unfit requantized alone and reported;
  * pairs with no exact path are refused, naming the pair and `lofp import`, writing nothing.

usage: casts_test.py LOFP_BINARY [TEST ...]     prints 'N passed, M failed'
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402
import ckpt_test as ct  # noqa: E402  (its readers and decoders; it runs nothing on import)

from ckpt_test import E2M1, get, load_dir, run, same_bits, st_header, st_raw, unpack_fp4  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def tmp(name):
    return os.path.join(ct.TMP, name)


# ---- decoders (numpy, the consumers' formulas) --------------------------------------------------

def raw_tensor(entry, name):
    """Any tensor of a safetensors file as numpy, F8 types through ml_dtypes from the raw bytes."""
    dt, shape, path = entry
    if dt == "F8_E4M3":
        return st_raw(path, name)[0].view(ml_dtypes.float8_e4m3fn).reshape(shape)
    if dt == "F8_E8M0":
        return st_raw(path, name)[0].reshape(shape)
    return get(entry, name)


def raw_bytes(entry, name):
    return st_raw(entry[2], name)[0].tobytes()


def nv_decode(codes, scales, fn):
    """codes U8 [..., K/2], scales float [..., K/16]: fn(e2m1 values [..., K/16, 16], scale[..., None])."""
    v = unpack_fp4(codes)
    sh = v.shape
    v = v.reshape(*sh[:-1], sh[-1] // 16, 16)
    s = np.asarray(scales, np.float32)[..., None]
    return np.asarray(fn(v, s), np.float32).reshape(sh)


def decode_modelopt(d):
    t = load_dir(d)
    out = {}
    for n in t:
        if n.endswith(".weight_scale_2"):
            m = n[:-len("_scale_2")]
            p = np.float32(get(t[n], n))
            out[m] = nv_decode(get(t[m], m), f32(raw_tensor(t[m + "_scale"], m + "_scale")),
                               lambda v, s: v * (s * p))
    return out


def decode_ct(d):
    t = load_dir(d)
    out = {}
    for n in t:
        if n.endswith(".weight_global_scale"):
            m = n[:-len("_global_scale")]
            g = np.float32(get(t[n], n).reshape(-1)[0])
            out[m] = nv_decode(get(t[m + "_packed"], m + "_packed"), f32(raw_tensor(t[m + "_scale"], m + "_scale")),
                               lambda v, s: v * (s / g))
    return out


def decode_lofp(d, nvfp4=True):
    """lofp files: NVFP4 (e2m1 * scale) / global_scale per element, MXFP4 e2m1 * 2^(e-127)."""
    t = load_dir(d)
    out = {}
    for n in t:
        if not n.endswith(".codes"):
            continue
        m = n[:-len(".codes")]
        codes = get(t[n], n)
        if t[m + ".scales"][0] == "F8_E4M3":
            g = np.float32(raw_tensor(t[m + ".global_scale"], m + ".global_scale").reshape(-1)[0])
            out[m] = nv_decode(codes, f32(raw_tensor(t[m + ".scales"], m + ".scales")), lambda v, s: (v * s) / g)
        else:
            out[m] = mx_decode(codes, raw_tensor(t[m + ".scales"], m + ".scales"))
    return out


def f32(x):
    return np.asarray(x, np.float32) if x.dtype != ml_dtypes.bfloat16 else x.astype(np.float32)


def mx_decode(codes, e8):
    v = unpack_fp4(codes)
    sh = v.shape
    v = v.reshape(*sh[:-1], sh[-1] // 32, 32)
    e = np.asarray(e8, np.int32)[..., None] - 127
    return np.ldexp(v, e).astype(np.float32).reshape(sh)


def decode_ct_mx(d):
    t = load_dir(d)
    return {n[:-len("_packed")]: mx_decode(get(t[n], n), get(t[n[:-len("_packed")] + "_scale"], n[:-len("_packed")] + "_scale"))
            for n in t if n.endswith(".weight_packed")}


def meta_of(path):
    return st_header(path)[0].get("__metadata__", {})


def signature(d):
    """name -> (dtype, shape) over a directory: what an engine's loader matches."""
    return {k: v[:2] for k, v in load_dir(d).items()}


def expect_failure(args, *needles, out=None):
    return ct.expect_failure(args, *needles, out=out)


# ---- inputs written without lofp ----------------------------------------------------------------

RNG = np.random.default_rng(7)


def mx_tensor(rows, k, lo=118, hi=131):
    """MXFP4 codes [rows, k/2] and E8M0 scales [rows, k/32] as a producer stores them: random codes,
    random exponents 2^(lo-127) .. 2^(hi-128)."""
    codes = RNG.integers(0, 256, size=(rows, k // 2), dtype=np.uint8)
    scales = RNG.integers(lo, hi, size=(rows, k // 32), dtype=np.uint8)
    return codes, scales


CT_MX_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128,
                "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
                                        "quantization_status": "compressed",
                                        "config_groups": {"group_0": {"targets": ["Linear"], "format": "mxfp4-pack-quantized",
                                                                      "weights": {"num_bits": 4, "type": "float", "group_size": 32,
                                                                                  "strategy": "group", "scale_dtype": "torch.uint8"}}},
                                        "ignore": ["lm_head"]}}

PLANT = ("model.layers.0.mlp.down_proj.weight", 5, 3)   # tensor, row, block in the row


def build_ct_mxfp4(path, plant):
    """A compressed-tensors MXFP4 directory in two shards: layer 0's q/k/v/o and gate/up/down, norms,
    embeddings and lm_head in bf16. With `plant`, one block of down_proj gets a scale 40 binades below
    the rest while its codes stay non-zero: it cannot be carried into NVFP4 exactly."""
    H, I = 128, 256
    t = {"model.embed_tokens.weight": (RNG.standard_normal((64, H)) * 0.02).astype(ml_dtypes.bfloat16),
         "model.norm.weight": np.ones(H, ml_dtypes.bfloat16),
         "lm_head.weight": (RNG.standard_normal((64, H)) * 0.02).astype(ml_dtypes.bfloat16),
         "model.layers.0.input_layernorm.weight": np.ones(H, ml_dtypes.bfloat16)}
    shapes = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (64, H), "self_attn.v_proj": (64, H),
              "self_attn.o_proj": (H, H), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
    for i, (m, (n, k)) in enumerate(shapes.items()):
        # k_proj's exponents run higher than q's and v's: the fused group must take k's
        codes, scales = mx_tensor(n, k, 118 + (4 if m.endswith("k_proj") else 0), 128 + (4 if m.endswith("k_proj") else 0))
        # an all-zero block far down fits (zeros carry no exponent)
        codes[0, :16] = 0
        scales[0, 0] = 3
        p = f"model.layers.0.{m}"
        t[p + ".weight_packed"] = codes
        t[p + ".weight_scale"] = scales
    if plant:
        name, r, b = PLANT
        m = name[:-len(".weight")]
        t[m + ".weight_scale"][r, b] = 127 - 40
        t[m + ".weight_packed"][r, b * 16:(b + 1) * 16] |= 0x11   # non-zero codes
    cm.write_dir(path, t, [("model-00001-of-00002.safetensors",
                            lambda n: ("self_attn" in n and "k_proj" not in n) or "embed" in n),
                           ("model-00002-of-00002.safetensors", lambda n: True)], CT_MX_CONFIG)
    return t


OSS_CONFIG = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": 64,
              "intermediate_size": 64, "num_local_experts": 4, "num_hidden_layers": 2,
              "quantization_config": {"quant_method": "mxfp4",
                                      "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                 "model.embed_tokens", "lm_head"]}}


def build_gpt_oss(path):
    """A gpt-oss MXFP4 directory as transformers' converter writes it (blocks [E, N, K/32, 16],
    scales [E, N, K/32], U8), two layers in two shards, biases / router / attention in bf16."""
    E, H, I = 4, 64, 64
    t = {"model.embed_tokens.weight": (RNG.standard_normal((32, H)) * 0.02).astype(ml_dtypes.bfloat16),
         "model.norm.weight": np.ones(H, ml_dtypes.bfloat16),
         "lm_head.weight": (RNG.standard_normal((32, H)) * 0.02).astype(ml_dtypes.bfloat16)}
    for l in range(2):
        p = f"model.layers.{l}."
        t[p + "self_attn.q_proj.weight"] = (RNG.standard_normal((H, H)) * 0.02).astype(ml_dtypes.bfloat16)
        t[p + "self_attn.sinks"] = np.zeros(4, ml_dtypes.bfloat16)
        t[p + "mlp.router.weight"] = (RNG.standard_normal((E, H)) * 0.02).astype(ml_dtypes.bfloat16)
        t[p + "mlp.router.bias"] = np.zeros(E, ml_dtypes.bfloat16)
        c, s = mx_tensor(E * 2 * I, H, 117, 127)
        t[p + "mlp.experts.gate_up_proj_blocks"] = c.reshape(E, 2 * I, H // 32, 16)
        t[p + "mlp.experts.gate_up_proj_scales"] = s.reshape(E, 2 * I, H // 32)
        t[p + "mlp.experts.gate_up_proj_bias"] = np.zeros((E, 2 * I), ml_dtypes.bfloat16)
        c, s = mx_tensor(E * H, I, 117, 127)
        t[p + "mlp.experts.down_proj_blocks"] = c.reshape(E, H, I // 32, 16)
        t[p + "mlp.experts.down_proj_scales"] = s.reshape(E, H, I // 32)
        t[p + "mlp.experts.down_proj_bias"] = np.zeros((E, H), ml_dtypes.bfloat16)
    cm.write_dir(path, t, [("model-00001-of-00002.safetensors", lambda n: "layers.0." in n or "embed" in n),
                           ("model-00002-of-00002.safetensors", lambda n: True)], OSS_CONFIG)
    return t


# ---- the tests ------------------------------------------------------------------------------------

def dense_llama():
    d = tmp("llama")
    if not os.path.isdir(d):
        cm.build_llama(d)
    return d


def same_bytes_except(a, b, skip_suffixes=(), skip_names=()):
    """Every tensor of directory a that is not quantized is in b with the same bytes."""
    ta, tb = load_dir(a), load_dir(b)
    n = 0
    for k, e in ta.items():
        if k.endswith(skip_suffixes) or k in skip_names:
            continue
        assert k in tb, f"{k} lost"
        assert tb[k][:2] == e[:2] and raw_bytes(tb[k], k) == raw_bytes(e, k), f"{k} changed"
        n += 1
    return n


def mismatch_notes(stderr):
    """tensor name -> (in, out, count) from the converter's per-tensor scale notes."""
    out = {}
    for line in stderr.splitlines():
        if "block-scale value(s) decode differently" in line:
            body = line.split("lofp convert: ", 1)[-1] if "lofp convert: " in line else line
            name, rest = body.split(": per-tensor scale ", 1)
            a, rest = rest.split(" -> ", 1)
            b, rest = rest.split(": ", 1)
            out[name.strip()] = (np.float32(a), np.float32(b), int(rest.split()[0]))
    return out


def ulps_apart(a, b):
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    return np.abs(ia - ib)


@test
def nvfp4_round_trip_modelopt_ct_lofp():
    src = dense_llama()
    mo = tmp("rt_mo")
    run("convert", "--to", "modelopt", src, mo, "--quiet")
    ctd, lf, mo2 = tmp("rt_ct"), tmp("rt_lofp"), tmp("rt_mo2")
    p1 = run("convert", "--to", "compressed-tensors", mo, ctd)
    assert "codes and block scales unchanged" in p1.stderr, p1.stderr
    p2 = run("convert", "--to", "lofp", ctd, lf)
    run("convert", "--to", "modelopt", lf, mo2, "--quiet")
    a, b, c, d = decode_modelopt(mo), decode_ct(ctd), decode_lofp(lf), decode_modelopt(mo2)
    assert len(a) > 10 and set(a) == set(b) == set(c) == set(d), (len(a), set(a) ^ set(b), set(a) ^ set(c))
    # the round trip ends where it began: identical decoded values
    for n in a:
        same_bits(d[n], a[n], f"modelopt -> ct -> lofp -> modelopt {n}")
    # each hop: the formulas round differently (ModelOpt code*(s*P), compressed-tensors code*(s/G),
    # lofp (code*s)/G), so a hop keeps every decoded value only where some per-tensor value makes
    # the formulas agree on every block scale in use; the converter names the other tensors with
    # the count of block-scale values that decode one rounding apart. Checked here against numpy.
    for hop, notes, x, y, fa, fb in (("modelopt -> ct", mismatch_notes(p1.stderr), a, b, "mo", "ct"),
                                     ("ct -> lofp", mismatch_notes(p2.stderr), b, c, "ct", "lofp")):
        for n in a:
            if n not in notes:
                same_bits(y[n], x[n], f"{hop} {n} (no mismatch reported)")
            else:
                u = ulps_apart(y[n], x[n])
                assert u.max() <= 2, f"{hop} {n}: {u.max()} ulps apart at {np.argmax(u)}: {y[n].flat[np.argmax(u)]} vs {x[n].flat[np.argmax(u)]}"
        assert all(k in a for k in notes), set(notes) - set(a)
    # the reported count, recomputed: block-scale values (of every tensor holding the same input
    # value) whose decoded values differ between the input's formula and the output's
    tm, tc = load_dir(mo), load_dir(ctd)
    notes = mismatch_notes(p1.stderr)
    vals = {}
    for n in a:
        m = n[:-len(".weight")]
        vals.setdefault(float(get(tm[m + ".weight_scale_2"], m + ".weight_scale_2")), []).append(m)
    E2 = np.array([0.5, 1, 1.5, 2, 3, 4, 6], np.float32)
    for pv, mods in vals.items():
        used = set()
        for m in mods:
            used |= set(np.unique(raw_tensor(tm[m + ".weight_scale"], m + ".weight_scale").view(np.uint8) & 0x7F).tolist())
        used.discard(0)
        used.discard(0x7F)
        sv = np.array(sorted(used), np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
        P = np.float32(pv)
        G = np.float32(get(tc[mods[0] + ".weight_global_scale"], mods[0] + ".weight_global_scale").reshape(-1)[0])
        dm = E2[None, :] * (sv[:, None] * P)
        dc = E2[None, :] * (sv[:, None] / G)
        count = int(np.sum(np.any(dm.view(np.uint32) != dc.view(np.uint32), axis=1)))
        for m in mods:
            got = notes.get(m + ".weight", (None, None, 0))[2]
            assert got == count, f"{m}: the converter reports {got} mismatched scale values, numpy counts {count}"
    # codes and block scales are the same bytes under the target's names
    tl = load_dir(lf)
    for n in a:
        m = n[:-len(".weight")]
        assert raw_bytes(tm[n], n) == raw_bytes(tc[m + ".weight_packed"], m + ".weight_packed") == raw_bytes(tl[n + ".codes"], n + ".codes")
        assert raw_bytes(tm[m + ".weight_scale"], m + ".weight_scale") == raw_bytes(tc[m + ".weight_scale"], m + ".weight_scale") \
            == raw_bytes(tl[n + ".scales"], n + ".scales")
    # norms, embeddings, lm_head, the router: unchanged through every step
    assert same_bytes_except(mo, mo2) > 10
    assert same_bytes_except(mo, ctd, (".weight_scale", ".weight_scale_2"), set(a)) > 4
    # fused siblings keep one per-tensor scale in every format
    for (prefix, _), names in ct.fused_groups(list(a)).items():
        vals = {float(get(tc[nm[:-7] + ".weight_global_scale"], nm[:-7] + ".weight_global_scale").reshape(-1)[0]) for nm in names}
        assert len(vals) == 1, f"{prefix}: fused group split {vals}"
    # what the engines load: the dense converter's names, dtypes, shapes, configs and index
    direct = tmp("rt_ct_direct")
    run("convert", "--to", "compressed-tensors", src, direct, "--quiet")
    assert signature(ctd) == signature(direct)
    qa = json.load(open(os.path.join(ctd, "config.json")))
    qb = json.load(open(os.path.join(direct, "config.json")))
    assert qa == qb, "config.json differs from the dense converter's"
    assert not os.path.exists(os.path.join(ctd, "hf_quant_config.json"))
    assert json.load(open(os.path.join(ctd, "model.safetensors.index.json")))["weight_map"] == \
        json.load(open(os.path.join(direct, "model.safetensors.index.json")))["weight_map"]
    assert signature(mo2) == signature(mo)
    for f in ("config.json", "hf_quant_config.json", "model.safetensors.index.json", "tokenizer.json"):
        assert json.load(open(os.path.join(mo2, f))) == json.load(open(os.path.join(mo, f))), f
    # a lofp directory: lofp metadata per tensor, no quantization_config, read back by lofp import
    assert "quantization_config" not in json.load(open(os.path.join(lf, "config.json")))
    meta = {}
    for fn in os.listdir(lf):
        if fn.endswith(".safetensors"):
            meta.update(meta_of(os.path.join(lf, fn)))
    assert all(f"lofp:{n}" in meta and "scheme=nvfp4" in meta[f"lofp:{n}"] for n in a)
    # each shard is a file `lofp dequantize` reads (its strict parser of the lofp:T metadata)
    from safetensors.numpy import load_file
    seen = 0
    for fn in sorted(os.listdir(lf)):
        if fn.endswith(".safetensors"):
            dq = tmp("dq_" + fn)
            run("dequantize", os.path.join(lf, fn), dq)
            for k, v in load_file(dq).items():
                if k in c:
                    same_bits(v, c[k], f"lofp dequantize {k}")
                    seen += 1
    assert seen == len(c), (seen, len(c))
    imp = lf + "_imp"
    run("import", "--dtype", "f32", lf, imp, "--quiet")
    ti = load_dir(imp)
    for n in a:
        same_bits(f32(get(ti[n], n)), c[n], f"lofp import {n}")


@test
def nvfp4_activation_scales():
    src = dense_llama()
    amax = {}
    for n, v in cm.llama_tensors().items():
        if v.ndim == 2 and n.endswith(".weight"):
            amax[n[:-7]] = 3.0 + len(n) / 7.0
    js = tmp("act.json")
    json.dump(amax, open(js, "w"))
    mo, ctd, mo2 = tmp("act_mo"), tmp("act_ct"), tmp("act_mo2")
    run("convert", "--to", "modelopt", "--input-scales", js, src, mo, "--quiet")
    run("convert", "--to", "compressed-tensors", mo, ctd, "--quiet")
    run("convert", "--to", "modelopt", ctd, mo2, "--quiet")
    tm, tc, t2 = load_dir(mo), load_dir(ctd), load_dir(mo2)
    qc = json.load(open(os.path.join(ctd, "config.json")))["quantization_config"]
    assert qc["config_groups"]["config_group_0"]["input_activations"] is not None
    assert json.load(open(os.path.join(mo2, "hf_quant_config.json")))["quantization"]["quant_algo"] == "NVFP4"
    n = 0
    for k in tm:
        if k.endswith(".input_scale"):
            m = k[:-len(".input_scale")]
            x = np.float32(get(tm[k], k))
            g = np.float32(get(tc[m + ".input_global_scale"], m + ".input_global_scale").reshape(-1)[0])
            assert g == np.float32(1) / x, (k, x, g)
            back = np.float32(get(t2[k], k))
            assert abs(int(back.view(np.uint32)) - int(x.view(np.uint32))) <= 1, (k, x, back)
            n += 1
    assert n > 10


@test
def mxfp4_to_nvfp4_fitting():
    src = tmp("ctmx_clean")
    orig = build_ct_mxfp4(src, plant=False)
    ref = decode_ct_mx(src)
    outs = {}
    for to, scheme, dec in (("modelopt", None, decode_modelopt), ("compressed-tensors", "nvfp4", decode_ct),
                            ("lofp", "nvfp4", decode_lofp)):
        out = tmp(f"mx2nv_{to}")
        args = ["convert", "--to", to, src, out, "--quiet"] + (["--scheme", scheme] if scheme else [])
        run(*args)
        got = dec(out)
        assert set(got) == set(ref), (to, set(got) ^ set(ref))
        for n in ref:
            same_bits(got[n], ref[n], f"{to} {n}")
        outs[to] = out
        assert same_bytes_except(src, out, (".weight_packed", ".weight_scale")) >= 4
    # codes copied unchanged; q/k/v and gate/up share one power-of-two per-tensor scale
    tmo = load_dir(outs["modelopt"])
    for n in ref:
        m = n[:-7]
        assert raw_bytes(tmo[n], n) == orig[m + ".weight_packed"].tobytes(), f"{n}: codes changed"
        v = float(get(tmo[m + ".weight_scale_2"], m + ".weight_scale_2"))
        assert np.log2(v) == round(np.log2(v)), f"{n}: weight_scale_2 {v} is not a power of two"
    for group in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
        vals = set()
        for leaf in group:
            sub = "self_attn" if leaf.endswith(("q_proj", "k_proj", "v_proj")) else "mlp"
            k = f"model.layers.0.{sub}.{leaf}.weight_scale_2"
            vals.add(float(get(tmo[k], k)))
        assert len(vals) == 1, f"{group}: {vals}"
    hq = json.load(open(os.path.join(outs["modelopt"], "hf_quant_config.json")))
    assert hq["quantization"]["quant_algo"] == "W4A16_NVFP4" and hq["quantization"]["group_size"] == 16
    # the same scheme: compressed-tensors MXFP4 -> lofp -> compressed-tensors, byte for byte
    lf, back = tmp("ctmx_lofp"), tmp("ctmx_back")
    run("convert", "--to", "lofp", src, lf, "--quiet")
    run("convert", "--to", "compressed-tensors", "--scheme", "mxfp4", lf, back, "--quiet")
    dl = decode_lofp(lf)
    for n in ref:
        same_bits(dl[n], ref[n], f"lofp mxfp4 {n}")
    assert same_bytes_except(src, back) == len(load_dir(src))


@test
def mxfp4_to_nvfp4_unfit_block():
    src = tmp("ctmx_planted")
    build_ct_mxfp4(src, plant=True)
    name, r, b = PLANT
    nb = 256 // 32
    idx = r * nb + b
    out = tmp("planted_mo")
    err = expect_failure(["convert", "--to", "modelopt", src, out], name, f"block {idx}", "binades", "--requantize-unfit", out=out)
    assert "2^-40" in err, err
    p = run("convert", "--to", "modelopt", "--requantize-unfit", src, out)
    assert name in p.stderr and f"block {idx} (row {r}, columns {b * 32}..{b * 32 + 31})" in p.stderr, p.stderr
    ref, got = decode_ct_mx(src), decode_modelopt(out)
    for n in ref:
        if n != name:
            same_bits(got[n], ref[n], n)
            continue
        a, g = ref[n].reshape(-1, 32), got[n].reshape(-1, 32)
        for blk in range(a.shape[0]):
            if blk != idx:
                same_bits(g[blk], a[blk], f"{n} block {blk}")
        assert not np.array_equal(g[idx].view(np.uint32), a[idx].view(np.uint32)), "the unfit block decodes the same?"


@test
def gpt_oss_lofp_byte_for_byte():
    src = tmp("oss")
    build_gpt_oss(src)
    lf, back = tmp("oss_lofp"), tmp("oss_back")
    run("convert", "--to", "lofp", src, lf, "--quiet")
    run("convert", "--to", "gpt-oss", lf, back, "--quiet")
    ta, tb = load_dir(src), load_dir(back)
    assert set(ta) == set(tb), set(ta) ^ set(tb)
    for k, e in ta.items():
        assert tb[k][:2] == e[:2] and raw_bytes(tb[k], k) == raw_bytes(e, k), f"{k} differs"
        assert os.path.basename(tb[k][2]) == os.path.basename(e[2]), f"{k} moved shard"
    qc = json.load(open(os.path.join(back, "config.json")))["quantization_config"]
    assert qc["quant_method"] == "mxfp4"
    assert json.load(open(os.path.join(back, "model.safetensors.index.json")))["weight_map"] == \
        json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
    # gpt-oss's own decode (LUT + ldexp) == the lofp file's MX decode == lofp nvfp4 after the cast
    nv = tmp("oss_lofp_nv")
    run("convert", "--to", "lofp", "--scheme", "nvfp4", src, nv, "--quiet")
    dl, dn = decode_lofp(lf), decode_lofp(nv)
    for l in range(2):
        for part in ("gate_up_proj", "down_proj"):
            m = f"model.layers.{l}.mlp.experts.{part}"
            o = ct.oss_decode(get(ta[m + "_blocks"], m + "_blocks"), get(ta[m + "_scales"], m + "_scales"))
            same_bits(dl[m], o, m)
            same_bits(dn[m], o, m + " (nvfp4)")


@test
def gguf_mxfp4_to_nvfp4():
    import gguf
    from gguf import GGMLQuantizationType as T
    src = tmp("mx.gguf")
    ct.make_gguf(src, [T.MXFP4])
    out = tmp("mx-nv.gguf")
    p = run("convert", "--to", "gguf", "--scheme", "nvfp4", src, out)
    assert "cast to it exactly" in p.stderr, p.stderr
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    bt = {t.name: t for t in b.tensors}
    n = 0
    for t in a.tensors:
        if t.tensor_type != T.MXFP4:
            continue
        o = bt[t.name]
        assert o.tensor_type == T.NVFP4, t.name
        s = bt[t.name[:-len(".weight")] + ".scale"]
        dec = gguf.quants.dequantize(o.data, T.NVFP4).astype(np.float32) * np.float32(s.data[0])
        ref = gguf.quants.dequantize(t.data, T.MXFP4).astype(np.float32)
        same_bits(dec, ref, t.name)
        n += 1
    assert n >= 4
    # MXFP4 -> MXFP4 keeps the tensors byte for byte
    same = tmp("mx-mx.gguf")
    run("convert", "--to", "gguf", "--scheme", "mxfp4", src, same, "--quiet")
    ct_ = {t.name: t for t in gguf.GGUFReader(same).tensors}
    for t in a.tensors:
        if t.tensor_type == T.MXFP4:
            assert bytes(ct_[t.name].data) == bytes(t.data) and ct_[t.name].tensor_type == t.tensor_type, t.name
    # a planted block 40 binades down: refused by tensor and block
    data = bytearray(open(src, "rb").read())
    tq = next(t for t in a.tensors if t.name == "blk.0.attn_k.weight")
    off = int(tq.data_offset) + 17 * 9
    data[off] = (int(data[off]) - 40) & 0xFF
    data[off + 1] |= 0x11
    bad = tmp("mx-planted.gguf")
    open(bad, "wb").write(bytes(data))
    expect_failure(["convert", "--to", "gguf", "--scheme", "nvfp4", bad, bad + ".o.gguf"], "blk.0.attn_k.weight",
                   "block 9", "--requantize-unfit", out=bad + ".o.gguf")
    p = run("convert", "--to", "gguf", "--scheme", "nvfp4", "--requantize-unfit", bad, bad + ".o.gguf")
    assert "block 9: its scale" in p.stderr, p.stderr


@test
def mxfp8_modelopt_lofp_byte_for_byte():
    """ModelOpt MXFP8 -> lofp -> ModelOpt: renames only, every tensor and config the same; the lofp
    files decode (e4m3 code * 2^(e - 127), numpy + ml_dtypes) to what the ModelOpt files hold."""
    src = dense_llama()
    mo, lf, back = tmp("mx8_mo"), tmp("mx8_lofp"), tmp("mx8_back")
    run("convert", "--to", "modelopt", "--scheme", "mxfp8", src, mo, "--quiet")
    run("convert", "--to", "lofp", mo, lf, "--quiet")
    run("convert", "--to", "modelopt", lf, back, "--quiet")
    assert same_bytes_except(mo, back) == len(load_dir(mo))
    for f in ("config.json", "hf_quant_config.json", "model.safetensors.index.json"):
        assert json.load(open(os.path.join(back, f))) == json.load(open(os.path.join(mo, f))), f
    tm, tl = load_dir(mo), load_dir(lf)
    n = 0
    for k in tm:
        if k.endswith(".weight_scale"):
            w = k[:-len("_scale")]
            assert tl[w + ".codes"][0] == "F8_E4M3" and tl[w + ".scales"][0] == "F8_E8M0"
            a = f32(raw_tensor(tm[w], w))
            sc = raw_tensor(tm[k], k).astype(np.int32) - 127
            ref = np.ldexp(a.reshape(*a.shape[:-1], -1, 32), sc[..., None]).reshape(a.shape)
            codes = f32(raw_tensor(tl[w + ".codes"], w + ".codes"))
            e = raw_tensor(tl[w + ".scales"], w + ".scales").astype(np.int32) - 127
            got = np.ldexp(codes.reshape(*codes.shape[:-1], -1, 32), e[..., None]).reshape(codes.shape)
            same_bits(got.astype(np.float32), ref.astype(np.float32), w)
            n += 1
    assert n > 10


@test
def slices_and_jobs():
    """--shard I/N + --merge-index and --jobs 2 give the whole conversion's files, for an MXFP4 ->
    NVFP4 cast whose q/k/v group spans both shards (k, with the larger exponents that set the
    group's scale, sits in shard 2)."""
    src = tmp("ctmx_slices")
    build_ct_mxfp4(src, plant=False)
    whole, sliced, jobs = tmp("sl_whole"), tmp("sl_sliced"), tmp("sl_jobs")
    run("convert", "--to", "modelopt", src, whole, "--quiet")
    run("convert", "--to", "modelopt", "--shard", "2/2", src, sliced, "--quiet")
    run("convert", "--to", "modelopt", "--shard", "1/2", src, sliced, "--quiet")
    run("convert", "--to", "modelopt", "--merge-index", src, sliced, "--quiet")
    run("convert", "--to", "modelopt", "--jobs", "2", src, jobs, "--quiet")
    for f in sorted(os.listdir(whole)):
        w = open(os.path.join(whole, f), "rb").read()
        assert w == open(os.path.join(sliced, f), "rb").read(), f"--shard slices differ in {f}"
        assert w == open(os.path.join(jobs, f), "rb").read(), f"--jobs 2 differs in {f}"


@test
def refusals():
    src = dense_llama()
    mo = tmp("rt_mo")
    if not os.path.isdir(mo):
        run("convert", "--to", "modelopt", src, mo, "--quiet")
    oss = tmp("oss")
    if not os.path.isdir(oss):
        build_gpt_oss(oss)
    x = tmp("refused")
    expect_failure(["convert", "--to", "gpt-oss", mo, x], "modelopt", "no exact path", "lofp import", out=x)
    expect_failure(["convert", "--to", "compressed-tensors", "--scheme", "mxfp4", mo, x], "nvfp4 -> compressed-tensors mxfp4",
                   "no exact path", "lofp import", out=x)
    expect_failure(["convert", "--to", "modelopt", "--scheme", "mxfp8", mo, x], "no exact path", out=x)
    expect_failure(["convert", "--to", "gguf", mo, x + ".gguf"], "modelopt -> gguf has no exact path", "lofp import", out=x + ".gguf")
    expect_failure(["convert", "--to", "modelopt", oss, x], "experts", "convert to lofp", out=x)
    expect_failure(["convert", "--to", "gguf", oss, x + ".gguf"], "gpt-oss -> gguf has no exact path", out=x + ".gguf")
    expect_failure(["convert", "--to", "lofp", src, x], "dense", "lofp quantize", out=x)
    g = tmp("mx.gguf")
    if os.path.exists(g):
        expect_failure(["convert", "--to", "modelopt", g, x], "GGUF", "lofp import", out=x)
    # inputs are never modified
    before = {f: open(os.path.join(mo, f), "rb").read() for f in os.listdir(mo)}
    run("convert", "--to", "compressed-tensors", mo, tmp("ro_ct"), "--quiet")
    assert before == {f: open(os.path.join(mo, f), "rb").read() for f in os.listdir(mo)}


def main():
    ct.LOFP = os.path.abspath(sys.argv[1])
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    passed, failed = ct.run_tests(TESTS, only, "lofp_casts_")
    if passed + failed == 0:
        print("no test matched " + " ".join(only))
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
