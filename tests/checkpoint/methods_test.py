#!/usr/bin/env python3
"""`lofp convert --method mse|gptq` with a calibration file (docs/QUALITY.md), end to end, against
checks lofp did not write:

  * the calibration files are written here with numpy + safetensors (lofp's format: Σ xᵀx per
    weight and the token count), and llama.cpp's imatrix GGUF with gguf-py;
  * outputs are read with safetensors / raw bytes + ml_dtypes and gguf-py, and decoded here by the
    format's formula;
  * GPTQ: two tensors of the converted model are recomputed bit for bit by the independent numpy
    GPTQ of tests/quant/gptq_oracle.py from the mean Hessian (sum / tokens, rounded once) and the
    fused group's per-tensor scale as the file stores it; every tensor's Hessian-weighted error
    tr((W-Q) H (W-Q)^T) is below round-to-nearest's;
  * MSE: every block's importance-weighted squared error is at most round-to-nearest's;
  * bad inputs (a missing layer, a file of another model, a diagonal-only file for gptq, NaN
    statistics, a producer profile, options of another method) fail naming the file and tensor
    and leave nothing behind.

usage: methods_test.py LOFP_BINARY       prints 'N passed, M failed'
"""
import json
import os
import shutil
import sys
import tempfile
import traceback

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
import ckpt_models as cm  # noqa: E402
import gptq_oracle as oracle  # noqa: E402
import ckpt_test  # noqa: E402
from ckpt_test import E2M1, get, load_dir, unpack_fp4  # noqa: E402

LOFP = None
TMP = None
F32 = np.float32
TOKENS = 384
LINEARS = {"self_attn.q_proj": (cm.H, cm.H), "self_attn.k_proj": (cm.KV, cm.H),
           "self_attn.v_proj": (cm.KV, cm.H), "self_attn.o_proj": (cm.H, cm.H),
           "mlp.gate_proj": (cm.I, cm.H), "mlp.up_proj": (cm.I, cm.H), "mlp.down_proj": (cm.H, cm.I)}


def run(*args, ok=True):
    """ckpt_test's runner of the lofp command (sanitizer reports fail the test)."""
    ckpt_test.LOFP = LOFP
    return ckpt_test.run(*args, ok=ok)


def dense_model(path):
    """One dense llama layer (bf16) in one shard; returns name -> fp32 weight."""
    rng = np.random.default_rng(11)
    t = {"model.embed_tokens.weight": cm._w(rng, (cm.V, cm.H)), "model.norm.weight": np.ones(cm.H, cm.BF16),
         "lm_head.weight": cm._w(rng, (cm.V, cm.H))}
    p = "model.layers.0."
    for n, shape in LINEARS.items():
        t[p + n + ".weight"] = cm._w(rng, shape)
    t[p + "input_layernorm.weight"] = np.ones(cm.H, cm.BF16)
    t[p + "post_attention_layernorm.weight"] = np.ones(cm.H, cm.BF16)
    cm.write_dir(path, t, [("model.safetensors", lambda n: True)], dict(cm.LLAMA_CONFIG, num_hidden_layers=1))
    return {k: v.astype(F32) for k, v in t.items() if k.startswith(p) and k.endswith("proj.weight")}


def sums(weights, seed=5):
    """weight name -> Σ xᵀx (fp32, summed in float64) over TOKENS correlated inputs of width k, a
    different input distribution per layer (channel scales spanning 100x, mixed channels)."""
    rng = np.random.default_rng(seed)
    out = {}
    for n, w in sorted(weights.items()):
        k = w.shape[1]
        z = rng.standard_normal((TOKENS, k))
        mix = np.eye(k) + 0.4 * rng.standard_normal((k, k)) / np.sqrt(k)
        x = (z @ mix) * np.exp(rng.uniform(-2.3, 2.3, k))
        out[n] = (x.T @ x).astype(F32)
    return out


def write_calib(path, stats, diag=False, tamper=None):
    t = {}
    for n, xtx in stats.items():
        if diag:
            t[n + ".x2"] = np.ascontiguousarray(np.diag(xtx), F32)
        else:
            t[n + ".xtx"] = xtx
        t[n + ".tokens"] = np.array([TOKENS], np.int64)
    if tamper:
        tamper(t)
    save_file(t, path, metadata={"format": "lofp-calibration", "version": "1",
                                 "statistic": "diag" if diag else "hessian", "model": "methods_test"})


def mean_hessian(xtx):
    """What lofp_calib_find hands out: the sum divided by the token count in double, rounded once."""
    return (xtx.astype(np.float64) / TOKENS).astype(F32)


def decode_ct(out, weights, scheme):
    """name -> (decoded fp32, codes [N, K], scales, per-tensor scale) of a compressed-tensors dir."""
    t = load_dir(out)
    res = {}
    for n in weights:
        m = n[:-7]
        codes = get(t[m + ".weight_packed"], m + ".weight_packed")
        vals = unpack_fp4(codes)
        cidx = np.stack([codes & 15, codes >> 4], -1).reshape(vals.shape)
        if scheme == "nvfp4":
            raw = get(t[m + ".weight_scale"], m + ".weight_scale")
            sc = raw.astype(F32)
            g = get(t[m + ".weight_global_scale"], m + ".weight_global_scale").astype(F32)[0]
            dec = vals * np.repeat(sc / g, 16, axis=1)
            res[n] = (dec, cidx, raw.view(np.uint8), g)
        else:
            e = get(t[m + ".weight_scale"], m + ".weight_scale").astype(np.int32)
            dec = vals * np.repeat(np.ldexp(F32(1), e - 127).astype(F32), 32, axis=1)
            res[n] = (dec, cidx, e.astype(np.uint8), F32(1))
    return res


def hloss(w, q, h):
    d = (w - q).astype(np.float64)
    return float(np.einsum("ij,jk,ik->", d, h.astype(np.float64), d))


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


_MODEL = {}


def model_and_stats():
    """The dense model directory, its linear weights (fp32) and their Σ xᵀx, made once."""
    if not _MODEL:
        src = os.path.join(TMP, "dense")
        weights = dense_model(src)
        _MODEL.update(src=src, weights=weights, stats=sums(weights))
    return _MODEL["src"], _MODEL["weights"], _MODEL["stats"]


@test
def gptq_compressed_tensors():
    src, weights, stats = model_and_stats()
    calib = os.path.join(TMP, "h.safetensors")
    write_calib(calib, stats)
    for scheme in ("nvfp4", "mxfp4"):
        rtn, gq = os.path.join(TMP, f"rtn_{scheme}"), os.path.join(TMP, f"gptq_{scheme}")
        run("convert", "--to", "compressed-tensors", "--scheme", scheme, src, rtn, "--quiet")
        run("convert", "--to", "compressed-tensors", "--scheme", scheme, "--method", "gptq", "--calibration", calib,
            "--threads", "2", src, gq, "--quiet")
        a, b = decode_ct(rtn, weights, scheme), decode_ct(gq, weights, scheme)
        for n, w in weights.items():
            h = mean_hessian(stats[n])
            lr, lg = hloss(w, a[n][0], h), hloss(w, b[n][0], h)
            assert lg < 0.9 * lr, f"{scheme} {n}: GPTQ loss {lg:.4g} not below RTN's {lr:.4g}"
            if scheme == "nvfp4":
                assert a[n][3] == b[n][3], f"{n}: the per-tensor scale changed with the method"
        # bit for bit against the independent numpy GPTQ, on the smallest tensors
        for n in ("model.layers.0.self_attn.k_proj.weight", "model.layers.0.mlp.down_proj.weight"):
            u, perm, dead = oracle.prepare(mean_hessian(stats[n]), 0.01, False)
            codes, scales = oracle.sweep(scheme, weights[n], u.astype(F32), perm, dead, b[n][3], 128)
            assert np.array_equal(codes, b[n][1]), f"{scheme} {n}: {int(np.sum(codes != b[n][1]))} codes differ from the oracle"
            assert np.array_equal(scales, b[n][2]), f"{scheme} {n}: {int(np.sum(scales != b[n][2]))} scales differ"
    # --act-order and --damp reach the library: the oracle with the same options agrees
    ao = os.path.join(TMP, "gptq_act_order")
    run("convert", "--to", "compressed-tensors", "--scheme", "mxfp4", "--method", "gptq", "--act-order", "--damp",
        "0.05", "--calibration", calib, src, ao, "--quiet")
    c = decode_ct(ao, weights, "mxfp4")
    n = "model.layers.0.self_attn.v_proj.weight"
    u, perm, dead = oracle.prepare(mean_hessian(stats[n]), 0.05, True)
    codes, scales = oracle.sweep("mxfp4", weights[n], u.astype(F32), perm, dead, F32(1), 128)
    assert np.array_equal(codes, c[n][1]) and np.array_equal(scales, c[n][2]), f"act-order {n}: differs from the oracle"


@test
def mse_imatrix_both_files():
    """MSE weighted by lofp's diagonal file and by an equivalent llama.cpp imatrix: same bytes, and
    every block's weighted error at most RTN's."""
    import gguf
    src, weights, stats = model_and_stats()
    diag = os.path.join(TMP, "d.safetensors")
    write_calib(diag, stats, diag=True)
    imx = os.path.join(TMP, "imatrix.gguf")
    w = gguf.GGUFWriter(imx, "imatrix")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["methods_test"])
    w.add_uint32("imatrix.chunk_count", 1)
    w.add_uint32("imatrix.chunk_size", TOKENS)
    for n, xtx in sorted(stats.items()):
        w.add_tensor(n + ".in_sum2", np.ascontiguousarray(np.diag(xtx), F32))
        w.add_tensor(n + ".counts", np.array([TOKENS], F32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rtn = os.path.join(TMP, "rtn_nvfp4")
    if not os.path.isdir(rtn):
        run("convert", "--to", "compressed-tensors", src, rtn, "--quiet")
    outs = []
    for f, flag in ((diag, "--calibration"), (imx, "--imatrix")):
        o = os.path.join(TMP, "mse_" + os.path.basename(f).replace(".", "_"))
        run("convert", "--to", "compressed-tensors", "--method", "mse", flag, f, src, o, "--quiet")
        outs.append(decode_ct(o, weights, "nvfp4"))
    a = decode_ct(rtn, weights, "nvfp4")
    for n, wt in weights.items():
        assert np.array_equal(outs[0][n][1], outs[1][n][1]) and np.array_equal(outs[0][n][2], outs[1][n][2]), \
            f"{n}: the imatrix and lofp's diagonal file give different bytes"
        imp = np.diag(stats[n]).astype(np.float64) / TOKENS
        er = ((wt - a[n][0]).astype(np.float64) ** 2 * imp).reshape(wt.shape[0], -1, 16).sum(-1)
        em = ((wt - outs[0][n][0]).astype(np.float64) ** 2 * imp).reshape(wt.shape[0], -1, 16).sum(-1)
        assert np.all(em <= er * (1 + 1e-9) + 1e-30), f"{n}: a block's weighted error rose above RTN's"
        assert em.sum() < er.sum(), f"{n}: MSE did not lower the weighted error at all"
    # unweighted MSE needs no file
    run("convert", "--to", "compressed-tensors", "--scheme", "mxfp4", "--method", "mse", src,
        os.path.join(TMP, "mse_plain"), "--quiet")


@test
def gguf_gptq_decoded_by_gguf_py():
    """GGUF -> GGUF MXFP4 with GPTQ: gguf-py decodes it, the loss is below RTN's, and the bytes are
    the numpy oracle's for one tensor."""
    import gguf
    from gguf import GGMLQuantizationType as T
    src = os.path.join(TMP, "tiny.gguf")
    rng = np.random.default_rng(8)
    w = gguf.GGUFWriter(src, "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(2)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    w.add_file_type(0)
    ws = {}
    for n, shape in (("blk.0.attn_q.weight", (64, 64)), ("blk.0.ffn_up.weight", (128, 64)),
                     ("blk.0.ffn_down.weight", (64, 128))):
        x = (rng.standard_normal(shape) * 0.02).astype(F32)
        ws[n] = x
        w.add_tensor(n, x)
    w.add_tensor("token_embd.weight", (rng.standard_normal((32, 64)) * 0.02).astype(F32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    stats = sums(ws, seed=9)
    calib = os.path.join(TMP, "gguf_h.safetensors")
    write_calib(calib, stats)
    rtn, gq = os.path.join(TMP, "rtn.gguf"), os.path.join(TMP, "gptq.gguf")
    run("convert", "--to", "gguf", src, rtn, "--quiet")
    run("convert", "--to", "gguf", "--method", "gptq", "--calibration", calib, src, gq, "--quiet")
    dec = {}
    for path in (rtn, gq):
        r = gguf.GGUFReader(path)
        dec[path] = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(ws[t.name].shape)
                     for t in r.tensors if t.name in ws and t.tensor_type == T.MXFP4}
    for n, x in ws.items():
        h = mean_hessian(stats[n])
        lr, lg = hloss(x, dec[rtn][n], h), hloss(x, dec[gq][n], h)
        assert lg < 0.9 * lr, f"{n}: GPTQ loss {lg:.4g} not below RTN's {lr:.4g}"
    n = "blk.0.attn_q.weight"
    u, perm, dead = oracle.prepare(mean_hessian(stats[n]), 0.01, False)
    codes, scales = oracle.sweep("mxfp4", ws[n], u.astype(F32), perm, dead, F32(1), 128)
    want = E2M1[codes] * np.repeat(np.ldexp(F32(1), scales.astype(np.int32) - 127).astype(F32), 32, axis=1)
    # values, not bits: ggml's MXFP4 table decodes code 8 (-0) as +0
    assert np.array_equal(want, dec[gq][n].astype(F32)), \
        f"{n}: gguf-py's decode of lofp's GPTQ differs from the numpy oracle's"


@test
def quantize_command_gptq():
    """lofp quantize --method gptq on a safetensors file of two weights: the .codes / .scales the
    lofp file holds are the numpy oracle's."""
    rng = np.random.default_rng(21)
    ws = {"a.weight": (rng.standard_normal((48, 96)) * 0.05).astype(F32),
          "b.weight": (rng.standard_normal((32, 64)) * 0.05).astype(F32)}
    src = os.path.join(TMP, "two.safetensors")
    save_file(ws, src)
    stats = sums(ws, seed=4)
    calib = os.path.join(TMP, "two_h.safetensors")
    write_calib(calib, stats)
    out = os.path.join(TMP, "two_q.safetensors")
    run("quantize", "--scheme", "mxfp4", "--method", "gptq", "--calibration", calib, src, out)
    for n, w in ws.items():
        raw_c, _, cshape = ckpt_test.st_raw(out, n + ".codes")
        raw_s, _, _ = ckpt_test.st_raw(out, n + ".scales")
        codes = np.stack([raw_c & 15, raw_c >> 4], -1).reshape(w.shape)
        u, perm, dead = oracle.prepare(mean_hessian(stats[n]), 0.01, False)
        want_c, want_s = oracle.sweep("mxfp4", w, u.astype(F32), perm, dead, F32(1), 128)
        assert np.array_equal(codes, want_c), f"{n}: codes differ from the oracle"
        assert np.array_equal(raw_s.reshape(want_s.shape), want_s), f"{n}: scales differ from the oracle"
    expect_failure(["quantize", "--scheme", "mxfp4", "--method", "gptq", src, out + "2.safetensors"], "--calibration",
                   out=out + "2.safetensors")
    assert "--method" in run("quantize", "--help").stdout


def expect_failure(args, *needles, out=None):
    p = run(*args, ok=False)
    for s in needles:
        assert s in p.stderr, f"lofp {' '.join(args)}: message lacks {s!r}:\n{p.stderr}"
    if out:
        assert not os.path.exists(out), f"{out} was left behind"
        parent = os.path.dirname(out) or "."
        left = [f for f in os.listdir(parent) if os.path.basename(out) in f and f != os.path.basename(out)]
        assert not left, f"temporaries left: {left}"


@test
def bad_inputs():
    src, weights, stats = model_and_stats()
    q = "model.layers.0.self_attn.q_proj.weight"
    base = ["convert", "--to", "compressed-tensors", "--quiet"]

    def case(name, tamper=None, diag=False, extra=(), needles=()):
        f = os.path.join(TMP, f"bad_{name}.safetensors")
        write_calib(f, stats, diag=diag, tamper=tamper)
        out = os.path.join(TMP, f"out_bad_{name}")
        expect_failure(base + ["--method", "gptq", "--calibration", f, *extra, src, out], *needles, out=out)

    case("missing", lambda t: (t.pop(q + ".xtx"), t.pop(q + ".tokens")), needles=(q,))
    other = {n: np.eye(2 * s.shape[0], dtype=F32) for n, s in stats.items()}   # k doubled: another model
    f = os.path.join(TMP, "bad_other.safetensors")
    write_calib(f, other)
    out = os.path.join(TMP, "out_bad_other")
    expect_failure(base + ["--method", "gptq", "--calibration", f, src, out], "model.layers.0.", out=out)
    case("diag", diag=True, needles=("diagonal",))

    def nan(t):
        t[q + ".xtx"] = t[q + ".xtx"].copy()
        t[q + ".xtx"][3, 5] = np.nan
    case("nan", nan, needles=(q,))

    def indefinite(t):
        # a symmetric matrix with a positive diagonal but a negative eigenvalue that damping
        # does not lift: the factorization meets a pivot <= 0
        k = t[q + ".xtx"].shape[0]
        h = np.full((k, k), 1.0, F32)
        np.fill_diagonal(h, 1e-3)
        t[q + ".xtx"] = h
    case("indefinite", indefinite, needles=(q, "positive definite"))

    def zero(t):
        t[q + ".xtx"] = np.zeros_like(t[q + ".xtx"])
    # an all-zero Hessian: every column dead, GPTQ zeroes them: legal, not an error
    f = os.path.join(TMP, "zero.safetensors")
    write_calib(f, stats, tamper=zero)
    run(*base, "--method", "gptq", "--calibration", f, src, os.path.join(TMP, "out_zero"))
    good = os.path.join(TMP, "h.safetensors")
    write_calib(good, stats)
    out = os.path.join(TMP, "out_bad_profile")
    expect_failure(base + ["--profile", "compressed-tensors", "--method", "gptq", "--calibration", good, src, out],
                   "profile", out=out)
    expect_failure(base + ["--method", "gptq", src, out], "--calibration", out=out)
    expect_failure(base + ["--calibration", good, src, out], "rtn", out=out)
    expect_failure(base + ["--method", "mse", "--act-order", src, out], "gptq", out=out)
    expect_failure(base + ["--method", "bogus", src, out], "bogus", out=out)
    expect_failure(base + ["--method", "gptq", "--calibration", os.path.join(TMP, "nope.safetensors"), src, out],
                   "nope.safetensors", out=out)
    assert "--method" in run("convert", "--help").stdout
    # gpt-oss MoE experts have no per-expert statistics: refused before anything is written
    moe = os.path.join(TMP, "moe")
    cm.build_llama(moe)
    out = os.path.join(TMP, "out_moe")
    expect_failure(["convert", "--to", "gpt-oss", "--method", "mse", "--quiet", moe, out], "MoE expert", out=out)


def main():
    global LOFP, TMP
    LOFP = os.path.abspath(sys.argv[1])
    TMP = tempfile.mkdtemp(prefix="lofp_methods_")
    passed = failed = 0
    try:
        for fn in TESTS:
            try:
                fn()
                print(f"ok   {fn.__name__}")
                passed += 1
            except Exception:  # noqa: BLE001 -- report every test
                print(f"FAIL {fn.__name__}")
                traceback.print_exc()
                failed += 1
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
