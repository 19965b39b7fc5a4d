#!/usr/bin/env python3
"""Hostile and careless inputs to `lofp convert` / `import` / `inspect` (docs/CHECKPOINTS.md
"Limits"): shapes of every rank up to numpy's 64 and past it, quantized tensors of odd rank and
dtype, --include of tensors not named *.weight, --input-scales out of range, --merge-index over
slices that do not belong together or are missing, and NaN weights. Each input is built here with
numpy + safetensors (or, where numpy cannot make it, a safetensors header written by hand); each
case must either convert correctly -- checked against numpy's decoding of the output -- or fail
with a message naming the file and tensor, writing nothing.

usage: hostile_test.py LOFP_BINARY [TEST ...]     prints 'N passed, M failed'
"""
import json
import os
import struct
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402
import ckpt_test as ct  # noqa: E402  (its runner and readers; it runs nothing on import)

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def tmp(name):
    return os.path.join(ct.TMP, name)


def write_raw_safetensors(path, tensors):
    """tensors: list of (name, dtype string, shape, bytes), written with a header made here (numpy
    cannot make arrays of more than 64 dimensions, safetensors cannot save them)."""
    header, off, blobs = {}, 0, []
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def dense_dir(name, tensors, config=None):
    d = tmp(name)
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config or cm.LLAMA_CONFIG, f)
    return d


NP_DTYPES = {"U8": np.uint8, "I8": np.int8, "F32": np.float32, "F16": np.float16, "BF16": BF16,
             "F8_E4M3": E4M3, "I32": np.int32, "I64": np.int64}


def load(path):
    """name -> array, read from the header and the raw bytes (numpy has no FP8 of its own, so the
    safetensors package cannot hand those out; ml_dtypes views them)."""
    h, base = ct.st_header(path)
    raw = open(path, "rb").read()
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw[base + a:base + b], NP_DTYPES[v["dtype"]]).reshape(v["shape"])
    return out


def nvfp4_modelopt_decode(codes_u8, scale_e4m3, ws2):
    """ModelOpt's decoding: e2m1(code) * (e4m3(scale) * weight_scale_2), codes low nibble first."""
    lo, hi = codes_u8 & 0xF, codes_u8 >> 4
    q = np.stack([lo, hi], -1).reshape(*codes_u8.shape[:-1], codes_u8.shape[-1] * 2)
    v = ct.E2M1[q]
    s = scale_e4m3.astype(np.float32) * np.float32(ws2)
    return v * np.repeat(s, 16, axis=-1)


# ---- (a) (b) (c): shapes of any rank up to 64 ------------------------------------------------

@test
def shapes_41d_bias_inspect_and_65d_refused():
    """(a) a 41-D tensor in a model directory is listed (inspect crashed copying it into an
    8-entry shape); a 65-D one is refused naming the file and the tensor."""
    d = tmp("bias41")
    os.makedirs(d, exist_ok=True)
    w = np.zeros((32, 32), np.float32).astype(BF16)
    write_raw_safetensors(os.path.join(d, "model.safetensors"),
                          [("model.layers.0.mlp.down_proj.bias", "BF16", [1] * 40 + [2], b"\0" * 4),
                           ("model.layers.0.mlp.down_proj.weight", "BF16", [32, 32], w.tobytes())])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cm.LLAMA_CONFIG, f)
    p = ct.run("inspect", d)
    assert "down_proj.bias" in p.stdout, p.stdout
    out = tmp("bias41_mo")
    ct.run("convert", "--to", "modelopt", d, out, "--quiet")
    got = load(os.path.join(out, "model.safetensors"))
    assert got["model.layers.0.mlp.down_proj.bias"].shape == (1,) * 40 + (2,)
    d65 = tmp("bias65")
    os.makedirs(d65, exist_ok=True)
    write_raw_safetensors(os.path.join(d65, "model.safetensors"),
                          [("odd.bias", "BF16", [1] * 64 + [2], b"\0" * 4),
                           ("model.layers.0.mlp.down_proj.weight", "BF16", [32, 32], w.tobytes())])
    for args in (["inspect", d65], ["convert", "--to", "modelopt", d65, tmp("bias65_out")]):
        err = ct.expect_failure(args, "model.safetensors", "odd.bias", "65 dimensions", "64")
        assert "Sanitizer" not in err


@test
def modelopt_codes_of_odd_rank():
    """(a) ModelOpt NVFP4 codes with 0, 9 or 12 dimensions: 0-D refused by name; 9-D and 12-D
    imported as numpy decodes them (lofp_ckpt_get indexed an 8-entry shape)."""
    rng = np.random.default_rng(5)
    for nd in (0, 9, 12):
        d = tmp(f"mo_rank{nd}")
        os.makedirs(d, exist_ok=True)
        if nd == 0:
            codes = np.array(17, np.uint8)
            scale = np.array(1.0, np.float32).astype(E4M3)
        else:
            shape = (1,) * (nd - 2) + (2, 16)
            codes = rng.integers(0, 256, shape, dtype=np.uint8)
            scale = (rng.integers(1, 8, shape[:-1] + (2,)).astype(np.float32) / 4).astype(E4M3)
        ws2 = np.array(0.5, np.float32)
        save_file({"m.weight": codes, "m.weight_scale": scale, "m.weight_scale_2": ws2},
                  os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
            json.dump({"quantization": {"quant_algo": "NVFP4", "group_size": 16}}, f)
        out = tmp(f"mo_rank{nd}_imp")
        if nd == 0:
            ct.expect_failure(["import", "--dtype", "f32", d, out], "model.safetensors", "m.weight", "0 dimensions", out=out)
            ct.expect_failure(["inspect", d], "m.weight", "0 dimensions")
            continue
        ct.run("inspect", d)
        ct.run("import", "--dtype", "f32", d, out, "--quiet")
        got = load(os.path.join(out, "model.safetensors"))["m.weight"]
        want = nvfp4_modelopt_decode(codes, scale, ws2)
        assert got.shape == want.shape, (got.shape, want.shape)
        ct.same_bits(got, want, f"{nd}-D ModelOpt codes")


@test
def quantize_12d_weight_and_copy_41d_tensor():
    """(b) a 12-D *.weight is quantized with its shape kept (plan_quant_outputs copied it into a
    6-entry array); (c) a 41-D copied tensor is copied byte for byte (set_out overflowed)."""
    rng = np.random.default_rng(6)
    w12 = (rng.standard_normal((1,) * 10 + (4, 32)).astype(np.float32) * 0.02).astype(BF16)
    big = rng.standard_normal((1,) * 39 + (2, 3)).astype(np.float32).astype(BF16)
    d = dense_dir("rank12", {"model.layers.0.mlp.up_proj.weight": w12, "model.layers.0.mlp.up_proj.bias": big})
    out = tmp("rank12_mo")
    ct.run("convert", "--to", "modelopt", d, out, "--quiet")
    got = load(os.path.join(out, "model.safetensors"))
    assert got["model.layers.0.mlp.up_proj.weight"].shape == (1,) * 10 + (4, 16)
    assert got["model.layers.0.mlp.up_proj.weight_scale"].shape == (1,) * 10 + (4, 2)
    assert got["model.layers.0.mlp.up_proj.bias"].tobytes() == big.tobytes()
    assert got["model.layers.0.mlp.up_proj.bias"].shape == big.shape
    # the 12-D weight decodes (numpy, ModelOpt's formula) as lofp import says
    scale = got["model.layers.0.mlp.up_proj.weight_scale"]
    ws2 = got["model.layers.0.mlp.up_proj.weight_scale_2"]
    want = nvfp4_modelopt_decode(got["model.layers.0.mlp.up_proj.weight"], scale, ws2)
    imp = tmp("rank12_imp")
    ct.run("import", "--dtype", "f32", out, imp, "--quiet")
    back = load(os.path.join(imp, "model.safetensors"))["model.layers.0.mlp.up_proj.weight"]
    ct.same_bits(back, want, "12-D weight")
    # and it is NVFP4 of the input: within the format's error
    assert ct.rel_err(back, w12.astype(np.float32)) < 0.2


# ---- (j): output names of --include'd tensors not named *.weight ------------------------------

def gguf_with(path, tensors):
    """A GGUF of F16 tensors (name -> fp32 array, numpy shape), written by gguf-py."""
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_string("general.name", "tiny")
    for n, x in tensors.items():
        w.add_tensor(n, x.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@test
def include_tensor_not_named_weight():
    """(j) convert --to gguf --scheme nvfp4 --include of a 2-D tensor not named *.weight: its
    per-tensor scale is '<name>.scale' (it was 'blk..scale'-style, duplicated or lost, and the
    tensor decoded with scale 1), gguf-py's dequantization times that scale gives the tensor back;
    two tensors whose scales would share a name are refused, naming it."""
    import gguf
    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 64)).astype(np.float32) * 3e-4
    q = rng.standard_normal((8, 64)).astype(np.float32) * 0.02
    src = tmp("incl.gguf")
    gguf_with(src, {"blk.0.attn_q.weight": q, "blk.0.extra": a})
    out = tmp("incl_nv.gguf")
    ct.run("convert", "--to", "gguf", "--scheme", "nvfp4", "--include", "blk.0.extra", src, out, "--quiet")
    r = gguf.GGUFReader(out)
    names = [t.name for t in r.tensors]
    assert len(names) == len(set(names)), f"duplicate tensor names: {names}"
    assert not [n for n in names if ".." in n], names
    assert sorted(names) == ["blk.0.attn_q.scale", "blk.0.attn_q.weight", "blk.0.extra", "blk.0.extra.scale"], names
    by = {t.name: t for t in r.tensors}
    for n, x in (("blk.0.extra", a), ("blk.0.attn_q.weight", q)):
        assert by[n].tensor_type == gguf.GGMLQuantizationType.NVFP4, (n, by[n].tensor_type)
        sname = (n[:-len(".weight")] if n.endswith(".weight") else n) + ".scale"
        dec = gguf.quants.dequantize(by[n].data, by[n].tensor_type).astype(np.float32).reshape(x.shape)
        dec = dec * np.asarray(by[sname].data, np.float32).reshape(())
        err = ct.rel_err(dec, x.astype(np.float16).astype(np.float32))
        assert err < 0.2, f"{n}: relative error {err} against the input (its scale is not applied)"
    imp = tmp("incl_imp")
    ct.run("import", "--dtype", "f32", out, imp, "--quiet")
    back = load(os.path.join(imp, "model.safetensors"))
    assert ct.rel_err(back["blk.0.extra"].reshape(a.shape), a.astype(np.float16).astype(np.float32)) < 0.2
    # 'm.weight' and 'm' would both get 'm.scale': refused by name, nothing written
    src2 = tmp("clash.gguf")
    gguf_with(src2, {"m.weight": q, "m": a})
    out2 = tmp("clash_nv.gguf")
    ct.expect_failure(["convert", "--to", "gguf", "--scheme", "nvfp4", "--include", "m*", src2, out2],
                      "clash.gguf", "'m.scale'", "'m.weight'", "'m'", out=out2)
    # the safetensors formats: an --include'd tensor not named <m>.weight is refused by name (it was
    # ignored), not written under names made up for it
    d = dense_dir("incl_st", {"model.layers.0.mlp.up_proj.weight": q.astype(BF16), "blk.0.extra": a.astype(BF16)})
    for to in ("modelopt", "compressed-tensors"):
        o = tmp(f"incl_st_{to}")
        ct.expect_failure(["convert", "--to", to, "--include", "blk.*", d, o], "model.safetensors", "'blk.0.extra'",
                          "--include", out=o)


# ---- (l) (w): --merge-index ----------------------------------------------------------------------

@test
def merge_index_checks_slices():
    """(l) --merge-index refuses slices made with another --to, --scheme, option or N, and shard
    files no slice of OUT wrote; (w) with a slice missing it fails before writing anything into
    OUT. Slices that belong together still merge into what a whole conversion writes."""
    src, _ = ct.llama()
    out = tmp("merge_w")
    ct.run("convert", "--to", "modelopt", "--shard", "2/2", src, out, "--quiet")
    before = sorted(os.listdir(out))
    ct.expect_failure(["convert", "--to", "modelopt", "--merge-index", src, out], "model-00001-of-00002.safetensors")
    assert sorted(os.listdir(out)) == before, f"--merge-index wrote {set(os.listdir(out)) - set(before)} before failing"
    # slices of different runs
    for i, extra in enumerate((["--to", "compressed-tensors"], ["--to", "modelopt", "--scheme", "mxfp8"])):
        o = tmp(f"merge_l{i}")
        ct.run("convert", "--to", "modelopt", "--shard", "1/2", src, o, "--quiet")
        ct.run("convert", *extra, "--shard", "2/2", src, o, "--quiet")
        before = sorted(os.listdir(o))
        err = ct.expect_failure(["convert", "--to", "modelopt", "--merge-index", src, o], "model-00002-of-00002.safetensors")
        assert "slice" in err, err
        assert sorted(os.listdir(o)) == before
    # slices of two splits in one OUT: 1/2, then 1/1 over it (both shards present, two N)
    o = tmp("merge_n")
    ct.run("convert", "--to", "modelopt", "--shard", "1/2", src, o, "--quiet")
    ct.run("convert", "--to", "modelopt", "--shard", "1/1", src, o, "--quiet")
    before = sorted(os.listdir(o))
    ct.expect_failure(["convert", "--to", "modelopt", "--merge-index", src, o], "1/2", "1/1")
    assert sorted(os.listdir(o)) == before
    # a shard file no slice of this directory wrote (copied in from elsewhere)
    o = tmp("merge_foreign")
    ct.run("convert", "--to", "modelopt", "--shard", "1/2", src, o, "--quiet")
    o1 = tmp("merge_foreign1")
    ct.run("convert", "--to", "modelopt", "--shard", "2/2", src, o1, "--quiet")
    os.replace(os.path.join(o1, "model-00002-of-00002.safetensors"), os.path.join(o, "model-00002-of-00002.safetensors"))
    ct.expect_failure(["convert", "--to", "modelopt", "--merge-index", src, o], "model-00002-of-00002.safetensors",
                      "no slice record")
    # other options than the merge's
    o = tmp("merge_opts")
    ct.run("convert", "--to", "modelopt", "--no-fuse-scales", "--shard", "1/2", src, o, "--quiet")
    ct.run("convert", "--to", "modelopt", "--no-fuse-scales", "--shard", "2/2", src, o, "--quiet")
    ct.expect_failure(["convert", "--to", "modelopt", "--merge-index", src, o], "no_fuse_scales=1")
    # and the right slices still merge, equal to the whole conversion
    o = tmp("merge_ok")
    ct.run("convert", "--to", "modelopt", "--shard", "1/2", src, o, "--quiet")
    ct.run("convert", "--to", "modelopt", "--shard", "2/2", src, o, "--quiet")
    ct.run("convert", "--to", "modelopt", "--merge-index", src, o, "--quiet")
    whole = tmp("merge_whole")
    ct.run("convert", "--to", "modelopt", src, whole, "--quiet")
    assert sorted(os.listdir(whole)) == sorted(os.listdir(o))
    for f in os.listdir(whole):
        a, b = open(os.path.join(whole, f), "rb").read(), open(os.path.join(o, f), "rb").read()
        assert a == b, f"merged slices differ from the whole conversion in {f}"
    assert not [f for f in os.listdir(o) if f.startswith(".lofp-slice")], "slice records left after the merge"


# ---- (m): --input-scales values ------------------------------------------------------------------

@test
def input_scales_out_of_range():
    """(m) an amax above FLT_MAX, infinite, NaN, negative, zero, so small that 2688/amax overflows, or
    not a number is refused naming
    the module; nothing is written."""
    src, orig = ct.llama()
    mods = sorted(k[:-7] for k in ct.quantized_linears(orig))
    bad_values = ["1e39", "3.5e38", "Infinity", "NaN", "-1.0", "0", "1e-40", "\"3\""]
    for i, v in enumerate(bad_values):
        scales = {m: 1.0 for m in mods}
        text = json.dumps(scales)
        victim = mods[3]
        text = text.replace(f"\"{victim}\": 1.0", f"\"{victim}\": {v}")
        p = tmp(f"amax{i}.json")
        with open(p, "w") as f:
            f.write(text)
        out = tmp(f"amax{i}_out")
        ct.expect_failure(["convert", "--to", "modelopt", "--input-scales", p, src, out], p, victim, out=out)
    # the largest finite float32 is fine
    scales = {m: 1.0 for m in mods}
    scales[mods[3]] = float(np.finfo(np.float32).max)
    p = tmp("amax_ok.json")
    with open(p, "w") as f:
        json.dump(scales, f)
    ct.run("convert", "--to", "modelopt", "--input-scales", p, src, tmp("amax_ok_out"), "--quiet")


# ---- (n): ModelOpt scales and codes of the wrong dtype ---------------------------------------

@test
def modelopt_wrong_dtypes():
    """(n) a weight_scale stored as F32 or BF16 is refused naming its dtype (it was read as E4M3
    bytes); I8 codes beside a weight_scale are refused by name (they were taken as a dense weight
    and the scale dropped)."""
    rng = np.random.default_rng(8)
    codes = rng.integers(0, 256, (4, 16), dtype=np.uint8)
    for sdt, arr in (("F32", np.full((4, 2), 0.5, np.float32)), ("BF16", np.full((4, 2), 0.5, np.float32).astype(BF16))):
        d = tmp(f"mo_scale_{sdt}")
        os.makedirs(d, exist_ok=True)
        save_file({"m.weight": codes, "m.weight_scale": arr, "m.weight_scale_2": np.array(1.0, np.float32)},
                  os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
            json.dump({"quantization": {"quant_algo": "NVFP4"}}, f)
        out = tmp(f"mo_scale_{sdt}_imp")
        ct.expect_failure(["import", d, out], "model.safetensors", "m.weight_scale", sdt, "F8_E4M3", out=out)
    d = tmp("mo_i8")
    os.makedirs(d, exist_ok=True)
    save_file({"m.weight": codes.view(np.int8), "m.weight_scale": np.full((4, 2), 0.5, np.float32).astype(E4M3),
               "m.weight_scale_2": np.array(1.0, np.float32)}, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
        json.dump({"quantization": {"quant_algo": "NVFP4"}}, f)
    out = tmp("mo_i8_imp")
    ct.expect_failure(["import", d, out], "model.safetensors", "m.weight", "I8", "m.weight_scale", out=out)
    ct.expect_failure(["inspect", d], "m.weight", "I8")
    # compressed-tensors: the same rule for its block scales
    d = tmp("ct_scale_f32")
    os.makedirs(d, exist_ok=True)
    save_file({"m.weight_packed": codes[:, :8], "m.weight_scale": np.full((4, 1), 0.5, np.float32),
               "m.weight_global_scale": np.array([1.0], np.float32)}, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}}, f)
    out = tmp("ct_scale_f32_imp")
    ct.expect_failure(["import", d, out], "model.safetensors", "m.weight_scale", "F32", "F8_E4M3", out=out)


# ---- a NaN weight: its flat index, row and column ----------------------------------------------

@test
def nan_weight_message():
    """A NaN in a weight names the tensor and the element: flat index, row and column (it said
    "rows 0..127")."""
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((128, 64)).astype(np.float32) * 0.02)
    w[77, 13] = np.nan
    d = dense_dir("nanw", {"model.layers.0.mlp.up_proj.weight": w.astype(BF16)})
    for to in ("modelopt", "compressed-tensors"):
        out = tmp(f"nanw_{to}")
        ct.expect_failure(["convert", "--to", to, d, out], "model.safetensors", "model.layers.0.mlp.up_proj.weight",
                          f"flat index {77 * 64 + 13}", "row 77", "column 13", out=out)
    # gpt-oss's fused experts [E, K, N] are quantized transposed: the index is still the stored one
    x = (rng.standard_normal((2, 32, 64)).astype(np.float32) * 0.02)
    x[1, 5, 7] = np.inf
    d = dense_dir("nanw_oss", {"model.layers.0.mlp.experts.gate_up_proj": x.astype(BF16)})
    out = tmp("nanw_oss_out")
    ct.expect_failure(["convert", "--to", "gpt-oss", d, out], "model.layers.0.mlp.experts.gate_up_proj", "+Inf",
                      f"flat index {(1 * 32 + 5) * 64 + 7}", f"row {1 * 32 + 5}", "column 7", out=out)
    # a GGUF requantized: the same flat index, row and column (numpy's order of the ggml tensor)
    g = (rng.standard_normal((8, 64)).astype(np.float32) * 0.02)
    g[3, 5] = np.nan
    src = tmp("nanw.gguf")
    gguf_with(src, {"blk.0.attn_q.weight": g})
    out = tmp("nanw_out.gguf")
    ct.expect_failure(["convert", "--to", "gguf", src, out], "blk.0.attn_q.weight", f"flat index {3 * 64 + 5}", "row 3",
                      "column 5", out=out)



@test
def nan_in_permuted_q_proj_gguf():
    """A NaN in q_proj of a llama directory converted to GGUF is reported where the input holds it:
    the q/k head permutation is undone (it reported the permuted row)."""
    import json as _json
    t = {k: v for k, v in cm.llama_tensors(5).items() if not k.startswith("model.layers.1.")}
    q = t["model.layers.0.self_attn.q_proj.weight"].astype(np.float32)
    q[5, 7] = np.nan          # head 0, first half, j = 5: GGUF row 2 * 5 = 10
    t["model.layers.0.self_attn.q_proj.weight"] = q
    d = tmp("nan_q_llama")
    cfg = dict(cm.LLAMA_CONFIG, num_hidden_layers=1, bos_token_id=1, eos_token_id=2, max_position_embeddings=512)
    cm.write_dir(d, t, [("model.safetensors", lambda n: True)], cfg, extra_files=False)
    vocab = {f"t{i}": i for i in range(cm.V - 2)}
    tok = {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1"]},
           "added_tokens": [{"id": cm.V - 2, "content": "<s>", "special": True},
                            {"id": cm.V - 1, "content": "</s>", "special": True}]}
    _json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w"))
    out = tmp("nan_q_llama.gguf")
    K = q.shape[1]
    ct.expect_failure(["convert", "--to", "gguf", d, out], "model.layers.0.self_attn.q_proj.weight", "NaN",
                      f"flat index {5 * K + 7}", "row 5", "column 7", out=out)


def main():
    ct.LOFP = os.path.abspath(sys.argv[1])
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    _, failed = ct.run_tests(TESTS, only, "lofp_hostile_")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
