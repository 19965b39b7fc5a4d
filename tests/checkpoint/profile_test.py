#!/usr/bin/env python3
"""`lofp convert --profile P` (docs/CHECKPOINTS.md "Profiles on convert"): the files equal what the
producers' own tools write.

  * the golden fixtures of tests/quant/fixtures (written by ModelOpt's quantize expressions on a
    CUDA device, compressed-tensors 0.20.1 and gguf-py 0.19.0 themselves) put in model
    directories / a GGUF as weights: `convert --profile modelopt|compressed-tensors|ggml` writes
    their codes, block scales and per-tensor scales byte for byte;
  * fused groups: every member of q/k/v and gate/up (per expert too) carries the per-tensor scale,
    codes and block scales that the producer's numerics give the group's rows quantized together
    (`lofp quantize --profile P` of the concatenated rows), across shards; other tensors equal
    `lofp quantize --profile P` of themselves; activation scales in the producer's direction;
  * ggml NVFP4: one level, no .scale tensor, the blocks of `lofp quantize --profile ggml
    --one-level` (llama.cpp's own quantizer is compared by `make test-engines`);
  * refusals: a profile with another tool's format, torchao, compressed-tensors MXFP4, unknown
    names; nothing written.

usage: profile_test.py LOFP_BINARY [TEST ...]     prints 'N passed, M failed'
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402
import ckpt_test as ct  # noqa: E402

from ckpt_test import expect_failure, load_dir, run, st_raw  # noqa: E402

TESTS = []
FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "quant", "fixtures")


def test(fn):
    TESTS.append(fn)
    return fn


def tmp(name):
    return os.path.join(ct.TMP, name)


def raw(d, name):
    """(bytes as uint8, dtype, shape) of tensor `name` anywhere in model directory d."""
    e = load_dir(d)[name]
    return st_raw(e[2], name)


def fixture(name):
    """(metadata, {case: {codes, scales, global}}) of a fixture file, read with safetensors."""
    p = os.path.join(FIX, name + ".safetensors")
    h, _ = ct.st_header(p)
    t = load_file(p)
    cases = {}
    for k, v in t.items():
        case, part = k.rsplit(".", 1)
        cases.setdefault(case, {})[part] = v
    return h.get("__metadata__", {}), cases


def fixture_input(dtype, case):
    x = load_file(os.path.join(FIX, "inputs.safetensors"))[f"bf16/{case}" if dtype == "bf16" else case]
    if dtype == "bf16":
        x = x.view(ml_dtypes.bfloat16)
    return np.ascontiguousarray(x).reshape(8, -1)


def dense_dir(path, tensors, config=None):
    cfg = config or {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128}
    cm.write_dir(path, tensors, [("model.safetensors", lambda n: True)], cfg)
    return path


def quantize_ref(x, scheme, profile, extra=()):
    """`lofp quantize --profile P` of one tensor: (codes u8, scales u8, global f32 or None)."""
    src, dst = tmp("ref_in.safetensors"), tmp("ref_out.safetensors")
    for p in (src, dst):
        if os.path.exists(p):
            os.remove(p)
    save_file({"x": np.ascontiguousarray(x)}, src)
    run("quantize", "--scheme", scheme, "--profile", profile, *extra, src, dst)
    o = {k: st_raw(dst, k)[0] for k in ("x.codes", "x.scales")}
    g = None
    h, _ = ct.st_header(dst)
    if "x.global_scale" in h:
        g = st_raw(dst, "x.global_scale")[0].view(np.float32)[0]
    return o["x.codes"], o["x.scales"], g


def f32bits(v):
    return np.float32(v).view(np.uint32)


# ---- the producers' fixtures through convert ----------------------------------------------------

def fixture_through_convert(fix, to, profile, scheme, names):
    meta, cases = fixture(fix)
    dt = meta.get("input", "f32")
    cases = {c: v for c, v in cases.items() if c != "nonfinite"}
    order = sorted(cases)
    tensors = {f"model.layers.{i}.mlp.down_proj.weight": fixture_input(dt, c) for i, c in enumerate(order)}
    d = dense_dir(tmp(f"fix_{fix}"), tensors)
    out = tmp(f"fix_{fix}_out")
    run("convert", "--to", to, "--scheme", scheme, "--profile", profile, d, out, "--quiet")
    n = 0
    for i, c in enumerate(order):
        m = f"model.layers.{i}.mlp.down_proj"
        want = cases[c]
        codes = raw(out, m + names[0])[0]
        scales = raw(out, m + names[1])[0]
        assert np.array_equal(codes, want["codes"].reshape(-1)), f"{fix} {c}: codes differ from the producer's"
        assert np.array_equal(scales, want["scales"].reshape(-1)), f"{fix} {c}: block scales differ from the producer's"
        if "global" in want:
            g = raw(out, m + names[2])[0].view(np.float32)
            assert g.size == 1 and f32bits(g[0]) == f32bits(want["global"].reshape(-1)[0]), \
                f"{fix} {c}: per-tensor scale {g[0]!r} vs the producer's {want['global'].reshape(-1)[0]!r}"
        n += 1
    assert n == len(order) and n >= 10, n


@test
def fixtures_modelopt():
    for fix in ("modelopt__nvfp4_f32", "modelopt__nvfp4_bf16"):
        fixture_through_convert(fix, "modelopt", "modelopt", "nvfp4", (".weight", ".weight_scale", ".weight_scale_2"))
    fixture_through_convert("modelopt__mxfp8-e4m3", "modelopt", "modelopt", "mxfp8", (".weight", ".weight_scale"))


@test
def fixtures_compressed_tensors():
    for fix in ("compressed-tensors__nvfp4_f32", "compressed-tensors__nvfp4_bf16"):
        fixture_through_convert(fix, "compressed-tensors", "compressed-tensors", "nvfp4",
                                (".weight_packed", ".weight_scale", ".weight_global_scale"))


def gguf_blocks_to_lofp(data, rows, k):
    """GGUF MXFP4 blocks [scale][16 bytes: element j low, j+16 high] -> lofp codes (element 2i low
    nibble) and scales, with numpy."""
    b = np.asarray(data, np.uint8).reshape(rows, k // 32, 17)
    scales = b[:, :, 0].reshape(-1)
    qs = b[:, :, 1:]
    vals = np.concatenate([qs & 15, qs >> 4], axis=-1).reshape(rows, k)
    codes = (vals[:, 0::2] | (vals[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return codes, scales


@test
def fixtures_ggml_mxfp4():
    import gguf
    from gguf import GGMLQuantizationType as T
    meta, cases = fixture("ggml__mxfp4")
    order = sorted(c for c in cases if c != "nonfinite")
    src, out = tmp("ggml_fix.gguf"), tmp("ggml_fix_out.gguf")
    w = gguf.GGUFWriter(src, "llama")
    for i, c in enumerate(order):
        w.add_tensor(f"blk.{i}.ffn_down.weight", np.ascontiguousarray(fixture_input(meta.get("input", "f32"), c), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    run("convert", "--to", "gguf", "--scheme", "mxfp4", "--profile", "ggml", src, out, "--quiet")
    r = {t.name: t for t in gguf.GGUFReader(out).tensors}
    for i, c in enumerate(order):
        t = r[f"blk.{i}.ffn_down.weight"]
        assert t.tensor_type == T.MXFP4
        codes, scales = gguf_blocks_to_lofp(t.data, 8, int(t.shape[0]))
        assert np.array_equal(codes, cases[c]["codes"].reshape(-1)), f"ggml {c}: codes differ from gguf-py's"
        assert np.array_equal(scales, cases[c]["scales"].reshape(-1)), f"ggml {c}: scales differ from gguf-py's"


# ---- fused groups and the rest of a model ------------------------------------------------------

def check_model(profile, to, scheme, names, act=False):
    d, orig = ct.llama()
    out = tmp(f"llama_{profile}_{scheme}")
    args = ["convert", "--to", to, "--scheme", scheme, "--profile", profile, d, out, "--quiet"]
    amax = {}
    if act:
        rng = np.random.default_rng(1)
        for k in ct.quantized_linears(orig):
            amax[k[:-len(".weight")]] = float(rng.uniform(0.5, 40))
        p = tmp("act.json")
        json.dump(amax, open(p, "w"))
        args += ["--input-scales", p]
    run(*args)
    lin = ct.quantized_linears(orig)
    groups = ct.fused_groups(lin) if scheme == "nvfp4" else {}
    member = {n for g in groups.values() for n in g}
    units = list(groups.values()) + [[n] for n in lin if n not in member]
    nv = scheme == "nvfp4"
    for unit in units:
        x = np.concatenate([orig[n] for n in unit], axis=0)
        codes, scales, g = quantize_ref(x, "mxfp8-e4m3" if scheme == "mxfp8" else scheme, profile)
        k = x.shape[1]
        cb, sb = (k // 2 if scheme != "mxfp8" else k), k // (16 if nv else 32)
        r0 = 0
        for n in unit:
            m, rows = n[:-len(".weight")], orig[n].shape[0]
            got_c = raw(out, m + names[0])[0]
            got_s = raw(out, m + names[1])[0]
            assert np.array_equal(got_c, codes[r0 * cb:(r0 + rows) * cb]), f"{profile} {n}: codes differ from lofp quantize --profile"
            assert np.array_equal(got_s, scales[r0 * sb:(r0 + rows) * sb]), f"{profile} {n}: scales differ"
            if nv:
                gv = raw(out, m + names[2])[0].view(np.float32)
                assert f32bits(gv[0]) == f32bits(g), f"{profile} {n}: per-tensor scale {gv[0]!r} vs {g!r} of its group {unit}"
                if act:
                    a = max(amax[u[:-len(".weight")]] for u in unit)
                    _, _, ga = quantize_ref(np.array([[a] + [0.0] * 15], np.float32), "nvfp4", profile)
                    iv = raw(out, m + names[3])[0].view(np.float32)
                    assert f32bits(iv[0]) == f32bits(ga), f"{profile} {n}: activation scale {iv[0]!r} vs {ga!r}"
            r0 += rows
    # the groups really share one scale and differ from each member's own
    if nv:
        q = "model.layers.1.self_attn."
        gs = {raw(out, q + p + names[2])[0].view(np.float32)[0] for p in ("q_proj", "k_proj", "v_proj")}
        assert len(gs) == 1, gs
    return out


@test
def modelopt_model():
    out = check_model("modelopt", "modelopt", "nvfp4", (".weight", ".weight_scale", ".weight_scale_2", ".input_scale"), act=True)
    hq = json.load(open(os.path.join(out, "hf_quant_config.json")))
    assert hq["quantization"]["quant_algo"] == "NVFP4"
    check_model("modelopt", "modelopt", "mxfp8", (".weight", ".weight_scale"))


@test
def compressed_tensors_model():
    check_model("compressed-tensors", "compressed-tensors", "nvfp4",
                (".weight_packed", ".weight_scale", ".weight_global_scale", ".input_global_scale"), act=True)


@test
def lofp_profile_is_the_default():
    """--profile lofp writes the same bytes as no --profile."""
    d, _ = ct.llama()
    a, b = tmp("dflt_a"), tmp("dflt_b")
    run("convert", "--to", "modelopt", d, a, "--quiet")
    run("convert", "--to", "modelopt", "--profile", "lofp", d, b, "--quiet")
    for f in sorted(os.listdir(a)):
        assert open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read(), f


@test
def ggml_nvfp4_one_level():
    import gguf
    from gguf import GGMLQuantizationType as T
    src = tmp("ggml_nv_src.gguf")
    ct.make_gguf(src, [T.F32, T.F16])
    out = tmp("ggml_nv.gguf")
    run("convert", "--to", "gguf", "--scheme", "nvfp4", "--profile", "ggml", src, out, "--quiet")
    rs = {t.name: t for t in gguf.GGUFReader(src).tensors}
    ro = {t.name: t for t in gguf.GGUFReader(out).tensors}
    assert not [n for n in ro if n.endswith(".scale")], "one-level NVFP4 has no .scale tensor"
    nq = 0
    for n, t in ro.items():
        if t.tensor_type != T.NVFP4:
            continue
        nq += 1
        x = gguf.quants.dequantize(rs[n].data, rs[n].tensor_type).astype(np.float32)
        codes, scales, g = quantize_ref(x, "nvfp4", "ggml", ("--one-level",))
        assert g is None
        rows, k = x.shape
        b = np.asarray(t.data, np.uint8).reshape(rows, k // 64, 36)
        assert np.array_equal(b[:, :, :4].reshape(-1), scales), f"{n}: block scales"
        qs = b[:, :, 4:].reshape(rows, k // 64, 4, 8)
        vals = np.concatenate([qs & 15, qs >> 4], axis=-1).reshape(rows, k)
        assert np.array_equal((vals[:, 0::2] | (vals[:, 1::2] << 4)).astype(np.uint8).reshape(-1), codes), f"{n}: codes"
        # gguf-py decodes it as llama.cpp does: code * UE4M3 scale, nothing else
        dec = gguf.quants.dequantize(t.data, T.NVFP4).astype(np.float32)
        assert np.max(np.abs(dec - x)) <= np.max(np.abs(x)) / 4, n
    assert nq >= 5, nq


@test
def refusals():
    d, _ = ct.llama()
    cases = [
        (["--to", "compressed-tensors", "--profile", "modelopt"], ["--profile modelopt", "--to modelopt"]),
        (["--to", "modelopt", "--profile", "compressed-tensors"], ["--to compressed-tensors"]),
        (["--to", "modelopt", "--profile", "ggml"], ["--to gguf"]),
        (["--to", "modelopt", "--profile", "torchao"], ["torchao", "lofp quantize --profile torchao"]),
        (["--to", "compressed-tensors", "--scheme", "mxfp4", "--profile", "compressed-tensors"],
         ["NVFP4A16", "tensor_group", "--profile lofp"]),
        (["--to", "gpt-oss", "--profile", "modelopt"], ["--to modelopt"]),
        (["--to", "modelopt", "--profile", "nvidia"], ["unknown profile 'nvidia'"]),
    ]
    for i, (args, needles) in enumerate(cases):
        out = tmp(f"refused_{i}")
        expect_failure(["convert", *args, d, out], *needles, out=out)
    src = tmp("refuse_src.gguf")
    from gguf import GGMLQuantizationType as T
    ct.make_gguf(src, [T.F32])
    expect_failure(["convert", "--to", "gguf", "--profile", "modelopt", src, tmp("r.gguf")], "--to modelopt",
                   out=tmp("r.gguf"))


def main():
    ct.LOFP = os.path.abspath(sys.argv[1])
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    passed, failed = ct.run_tests(TESTS, only, "lofp_profile_")
    if passed + failed == 0:
        print("no test matched " + " ".join(only))
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
