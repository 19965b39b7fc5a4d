"""GEMM, verify_gemm and the UltraQuant KV cache against the fp64 reference, numpy, and the lofp
command of the same build."""
import ml_dtypes
import numpy as np
import pytest

import lofp
from conftest import layer, run_cli


@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4", "mxfp8-e4m3"])
@pytest.mark.parametrize("a_quant", [None, "mxint8", "nvfp4"])
def test_gemm_matches_reference(rng, scheme, a_quant):
    a = rng.standard_normal((5, 256)).astype(np.float32)
    w = lofp.quantize(layer(rng, (48, 256)), scheme)
    c = lofp.gemm(a, w, a_quant=a_quant)
    ref = lofp.gemm_reference(a, w, a_quant=a_quant)
    assert c.dtype == np.float32 and c.shape == (5, 48)
    np.testing.assert_allclose(c, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
    # the reference is the fp64 product of the dequantized operands (numpy, independent sum order)
    # (NVFP4: code * scale is exact, the globals divide the fp64 sum once)
    def exact(q):
        if q.scheme != "nvfp4":
            return lofp.dequantize(q, "float32").astype(np.float64), 1.0
        return lofp.dequantize(lofp.replace(q, global_scale=1.0), "float32").astype(np.float64), float(q.global_scale)
    aa, ga = (a.astype(np.float64), 1.0) if a_quant is None else exact(lofp.quantize(a, a_quant))
    ww, gw = exact(w)
    ref_np = (aa @ ww.T) / ga / gw
    np.testing.assert_allclose(ref, ref_np, rtol=1e-12, atol=1e-12 * np.abs(ref_np).max())
    # thread count never changes the bits
    np.testing.assert_array_equal(lofp.gemm(a, w, a_quant=a_quant, threads=2), c)


def test_gemm_packed_weight_and_quantized_a(rng):
    a = rng.standard_normal((3, 4, 128)).astype(ml_dtypes.bfloat16)
    w = lofp.quantize(layer(rng, (32, 128)), "mxfp4")
    pw = lofp.pack_weight(w)
    c = lofp.gemm(a, w)
    assert c.shape == (3, 4, 32)
    np.testing.assert_array_equal(lofp.gemm(a, pw), c)
    qa = lofp.quantize(a.reshape(12, 128), "mxfp8-e4m3")
    np.testing.assert_allclose(lofp.gemm(qa, w), lofp.gemm_reference(qa, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(lofp.Error, match="shape: a has shape"):
        lofp.gemm(np.ones((2, 64), np.float32), w)


def _write_q(path, name, q):
    lofp.save(path, {name: q})


@pytest.mark.parametrize("mistake", ["ok", "swizzle", "nibbles", "global"])
def test_verify_gemm_names_the_mistake_like_the_cli(cli, tmp_path, rng, mistake):
    a = lofp.quantize(rng.standard_normal((128, 256)).astype(np.float32), "nvfp4", scale_layout="swizzle-128x4")
    b = lofp.quantize(layer(rng, (64, 256)), "mxfp4")
    A = lofp.dequantize(a, "float32").astype(np.float64)
    B = lofp.dequantize(b, "float32").astype(np.float64)
    if mistake == "swizzle":   # the consumer read A's swizzled scales as linear
        wrong = lofp.replace(a, scales=np.ascontiguousarray(a.scales).reshape(-1)[: 128 * 16].reshape(128, 16), layout="linear")
        A = lofp.dequantize(wrong, "float32").astype(np.float64)
    elif mistake == "nibbles":
        sw = ((b.codes >> 4) | (b.codes << 4)).astype(np.uint8)
        B = lofp.dequantize(lofp.replace(b, codes=sw), "float32").astype(np.float64)
    elif mistake == "global":
        A = A * float(a.global_scale)
    c = (A @ B.T).astype(np.float32)
    _write_q(tmp_path / "a.safetensors", "a", a)
    _write_q(tmp_path / "b.safetensors", "b", b)
    np.save(tmp_path / "c.npy", c)
    r = run_cli(cli, "verify", tmp_path / "a.safetensors", tmp_path / "b.safetensors", tmp_path / "c.npy", ok=(0, 1))
    v = lofp.verify_gemm(a, b, c)
    assert v.ok == (r.returncode == 0) == (mistake == "ok")
    assert f"{v.error:.3e}" in r.stdout
    if not v.ok:
        assert v.explained is not None
        assert f"explained: {v.explained} (error {v.closest_error:.3e})" in r.stdout
        for d, e in v.candidates:
            assert f"{d:<72s} -> {e:.3e}" in r.stdout
        # (swapping the nibbles of A or of B gives the same product: pairs never straddle a block)
        want = {"swizzle": "A scales (written swizzle-128x4) read as linear", "nibbles": "FP4 nibbles swapped",
                "global": "A per-tensor scale not applied"}[mistake]
        assert want in v.explained


@pytest.mark.parametrize("case", ["ok", "corrupt", "nan", "packed"])
def test_verify_gemm_prints_what_the_cli_prints(cli, tmp_path, rng, case):
    """lofp verify and lofp.verify_gemm are one library check (lofp_gemm_verify): on the same
    files the report lines are the same, candidate for candidate, on any thread count. A corrupted
    kernel output (one element off, a NaN) fails in both and no mistake explains it."""
    layout = "packed-u32" if case == "packed" else "linear"
    a = lofp.quantize(rng.standard_normal((64, 128)).astype(np.float32), "mxfp4", scale_layout=layout)
    b = lofp.quantize(layer(rng, (32, 128)), "nvfp4")
    c = lofp.gemm_reference(a, b).astype(np.float32)
    if case == "corrupt":
        c[3, 5] += 100.0
    elif case == "nan":
        c[0, 0] = np.nan
    elif case == "packed":   # the consumer read A's packed words byte-reversed
        raw = np.ascontiguousarray(a.scales).reshape(-1).view(np.uint8).reshape(-1, 4)[:, ::-1].reshape(-1)
        wrong = lofp.layout.convert_scales(raw, 64, 4, "packed-u32", "linear")
        c = lofp.gemm_reference(lofp.replace(a, scales=np.asarray(wrong).reshape(64, 4), layout="linear"), b).astype(np.float32)
    _write_q(tmp_path / "a.safetensors", "a", a)
    _write_q(tmp_path / "b.safetensors", "b", b)
    np.save(tmp_path / "c.npy", c)
    r = run_cli(cli, "verify", tmp_path / "a.safetensors", tmp_path / "b.safetensors", tmp_path / "c.npy",
                "--threads", "3", ok=(0, 1))
    v = lofp.verify_gemm(a, b, c, threads=2)
    cli_lines = [ln for ln in r.stdout.splitlines()
                 if not ln.startswith("verify: ") and ln != "error is large; trying the usual mistakes:"]
    assert cli_lines == str(v).splitlines()
    assert (r.returncode == 0) == v.ok == (case == "ok")
    if case in ("corrupt", "nan"):
        assert v.explained is None and len(v.candidates) > 0
        assert "no single known mistake explains it" in r.stdout
    if case == "nan":
        assert v.error == float("inf")
    if case == "packed":
        assert v.explained == "A scales (written packed-u32) read as packed-u32, bytes reversed"


def test_kv_store_matches_quantize(rng):
    cache = lofp.kv.Cache(4, 16, 2, 128)
    k = rng.standard_normal((10, 2, 128)).astype(np.float32)
    v = rng.standard_normal((10, 2, 128)).astype(np.float32)
    slots = np.array([17, 3, -1, 40, 41, 42, 0, 1, 2, 63])
    rep = cache.store(k, v, slots)
    assert rep.tokens_stored == 9 and rep.tokens_skipped == 1
    qk = lofp.quantize(k.reshape(20, 128), "ultraquant")
    qv = lofp.quantize(v.reshape(20, 128), "ultraquant", rotate=False)
    o = cache.offsets
    flat = cache.data.reshape(64, 2, cache.slot_bytes)
    for t, s in enumerate(slots):
        if s < 0:
            continue
        for h in range(2):
            slot = flat[s, h]
            np.testing.assert_array_equal(slot[o[0]:o[1]], qk.codes[2 * t + h])
            np.testing.assert_array_equal(slot[o[1]:o[2]], qk.scales.view(np.uint8)[2 * t + h])
            np.testing.assert_array_equal(slot[o[2]:o[3]], qv.codes[2 * t + h])
            np.testing.assert_array_equal(slot[o[3]:], qv.scales.view(np.uint8)[2 * t + h])
    # gather reads the dequantized values back (K in the rotated basis)
    ks, vs = cache.gather(np.array([0]), 4)
    np.testing.assert_array_equal(ks[1], lofp.dequantize(qk, "float32")[14:16])  # position 1: token 7
    np.testing.assert_array_equal(vs[3], lofp.dequantize(qv, "float32")[2:4])    # position 3: token 1


def _attention_oracle(q, K, V, scale, sinks=None):
    """Reference UltraQuant attention in numpy: q rotated (dense H), cast through E4M3 (ml_dtypes,
    values past 448 clipped as lofp saturates), scores over the stored K (rotated basis)."""
    D = q.shape[-1]
    H = np.array([[1.0]])
    while H.shape[0] < D:
        H = np.block([[H, H], [H, -H]])
    qr = (q.astype(np.float64) @ (H / np.sqrt(D)).T).astype(np.float32)
    q8 = np.clip(qr, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    B, Hq, _ = q.shape
    Hk = K.shape[2]
    out = np.zeros((B, Hq, D))
    for b in range(B):
        for h in range(Hq):
            kh = h // (Hq // Hk)
            s = (K[b, :, kh, :].astype(np.float64) @ q8[b, h]) * scale
            m = s.max() if sinks is None else max(s.max(), sinks[h])
            e = np.exp(s - m)
            den = e.sum() + (0.0 if sinks is None else np.exp(sinks[h] - m))
            out[b, h] = (e / den) @ V[b, :, kh, :].astype(np.float64)
    return out


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_decode_attention_matches_cli_and_oracle(cli, tmp_path, rng, path):
    B, N, Hq, Hk, D = 2, 70, 8, 2, 128
    q = rng.standard_normal((B, Hq, D)).astype(np.float32)
    k = rng.standard_normal((B, N, Hk, D)).astype(np.float32)
    v = rng.standard_normal((B, N, Hk, D)).astype(np.float32)
    sinks = rng.standard_normal(Hq).astype(np.float32)
    bs = 64
    blocks_per = (N + bs - 1) // bs
    cache = lofp.kv.Cache(B * blocks_per, bs, Hk, D)
    tables = np.arange(B * blocks_per, dtype=np.int32).reshape(B, blocks_per)[:, ::-1].copy()  # reversed placement
    for b in range(B):
        pos = np.arange(N)
        slots = tables[b, pos // bs].astype(np.int64) * bs + pos % bs
        cache.store(k[b], v[b], slots)
    out = cache.decode(q, tables, np.full(B, N, np.int32), sinks=sinks, path=path)
    for name, arr in (("q", q), ("k", k), ("v", v), ("s", sinks)):
        np.save(tmp_path / f"{name}.npy", arr)
    run_cli(cli, "attention", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
            "--sinks", tmp_path / "s.npy", "--path", path, "--block-size", bs, tmp_path / "o.npy")
    np.testing.assert_array_equal(out, np.load(tmp_path / "o.npy"))
    # oracle over the stored (dequantized) K and V
    K = np.stack([cache.gather(tables[b], N)[0] for b in range(B)])
    V = np.stack([cache.gather(tables[b], N)[1] for b in range(B)])
    ref = _attention_oracle(q, K, V, 1 / np.sqrt(D), sinks)
    assert np.abs(out - ref).max() <= 1e-4 * np.abs(ref).max()


def test_prefill_last_row_equals_decode(rng):
    Hq, Hk, D, N = 4, 2, 64, 20
    cache = lofp.kv.Cache(2, 16, Hk, D, format="bf16")
    k = rng.standard_normal((N, Hk, D)).astype(np.float32)
    v = rng.standard_normal((N, Hk, D)).astype(np.float32)
    cache.store(k, v, np.arange(N))
    q = rng.standard_normal((3, Hq, D)).astype(np.float32)
    bt = np.array([[0, 1]], np.int32)
    pre = cache.prefill(q, np.array([0, 3], np.int32), bt, np.array([N], np.int32), path="reference")
    dec = cache.decode(q[2:], bt, np.array([N], np.int32), path="reference")
    np.testing.assert_array_equal(pre[2], dec[0])


def test_kv_errors(rng):
    cache = lofp.kv.Cache(2, 16, 2, 64)
    k = rng.standard_normal((3, 2, 64)).astype(np.float32)
    with pytest.raises(lofp.Error, match=r"slot_mapping\[1\] = 32 is outside the cache \(32 slots\)"):
        cache.store(k, k, np.array([0, 32, 1]))
    bad = k.copy()
    bad[1, 0, 5] = np.nan
    with pytest.raises(lofp.Error) as ei:
        cache.store(bad, k, np.array([0, 1, 2]))
    assert ei.value.index == 1 * 128 + 5 and "k has a non-finite value" in str(ei.value)
    rep = cache.store(bad, k, np.array([0, 1, 2]), propagate_nonfinite=True)
    assert rep.zeroed_groups == 2  # the rotation spreads the NaN over the head vector: D/32 groups
    with pytest.raises(lofp.Error, match="shape: k and v must both be"):
        cache.store(k[:, :1], k[:, :1], np.array([0, 1, 2]))
    with pytest.raises(lofp.Error, match="query heads 3 are not a multiple of the KV heads 2"):
        cache.decode(np.ones((1, 3, 64), np.float32), np.array([[0]]), np.array([3]))
