"""lofp.quantize(method=...): the MSE scale search and GPTQ through the Python front end.

The numbers are checked against oracles written here in numpy: the MSE result decodes (through
lofp.dequantize) to an error no larger than RTN's and no larger than that of any single scale
change; GPTQ with H = c*I writes RTN's bytes; GPTQ lowers tr((W-Q) H (W-Q)^T) on correlated
inputs. Bad arguments raise lofp.Error naming the argument. (Bit-for-bit GPTQ against an
independent numpy GPTQ: tests/quant/script_gptq_oracle.sh.)
"""
import numpy as np
import pytest

import lofp


def _err(x, q, w=None):
    d = (x.astype(np.float64) - lofp.dequantize(q).astype(np.float64)) ** 2
    return float(np.sum(d * (1.0 if w is None else w.astype(np.float64))))


@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4", "mxfp8-e4m3", "mxint8"])
def test_mse_never_worse_than_rtn(scheme):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((24, 128)) * np.exp(rng.uniform(-3, 3, (24, 1)))).astype(np.float32)
    imp = rng.uniform(0, 2, 128).astype(np.float32)
    rtn = lofp.quantize(x, scheme)
    mse = lofp.quantize(x, scheme, method="mse")
    mse_w = lofp.quantize(x, scheme, method="mse", importance=imp)
    assert mse.codes.shape == rtn.codes.shape and mse.scales.shape == rtn.scales.shape
    assert float(mse.global_scale) == float(rtn.global_scale)
    assert _err(x, mse) <= _err(x, rtn)
    assert _err(x, mse_w, imp) <= _err(x, rtn, imp)
    assert _err(x, mse) < _err(x, rtn)  # on this data the search finds something
    # a layout other than linear holds the same scales
    sw = lofp.quantize(x, scheme, method="mse", scale_layout="swizzle-128x4")
    assert np.array_equal(lofp.dequantize(sw), lofp.dequantize(mse))


def test_gptq_identity_hessian_is_rtn():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 96)).astype(np.float32)
    for scheme in ("nvfp4", "mxfp4", "mxfp8-e4m3"):
        rtn = lofp.quantize(x, scheme)
        g = lofp.quantize(x, scheme, method="gptq", hessian=np.eye(96, dtype=np.float32) * 7, act_order=True)
        assert np.array_equal(np.asarray(g.codes), np.asarray(rtn.codes))
        assert np.array_equal(np.asarray(g.scales).view(np.uint8), np.asarray(rtn.scales).view(np.uint8))


def test_gptq_lowers_hessian_loss():
    rng = np.random.default_rng(8)
    k = 128
    mix = np.eye(k) + 0.5 * rng.standard_normal((k, k)) / np.sqrt(k)
    xs = (rng.standard_normal((1024, k)) @ mix).astype(np.float32)
    h = (xs.astype(np.float64).T @ xs).astype(np.float32)
    w = rng.standard_normal((32, k)).astype(np.float32)
    for scheme in ("nvfp4", "mxfp4"):
        def loss(q):
            d = w.astype(np.float64) - lofp.dequantize(q).astype(np.float64)
            return float(np.einsum("ri,ij,rj->", d, h.astype(np.float64), d))
        l_rtn = loss(lofp.quantize(w, scheme))
        l_g = loss(lofp.quantize(w, scheme, method="gptq", hessian=h))
        assert l_g < 0.9 * l_rtn, (scheme, l_g, l_rtn)


def test_method_arguments_are_checked():
    x = np.ones((2, 32), np.float32)
    h = np.eye(32, dtype=np.float32)
    bad = [
        dict(method="awq"),
        dict(method=1),
        dict(method="gptq"),  # no hessian
        dict(method="mse", hessian=h),
        dict(method="gptq", hessian=h, importance=np.ones(32, np.float32)),
        dict(method="rtn", importance=np.ones(32, np.float32)),
        dict(method="mse", importance=np.ones(31, np.float32)),
        dict(method="mse", importance=np.array(["a"] * 32)),
        dict(method="gptq", hessian=np.eye(31, dtype=np.float32)),
        dict(method="gptq", hessian=h, damp=-1.0),
        dict(method="gptq", hessian=h, damp="0.1"),
        dict(method="gptq", hessian=h, act_order="yes"),
        dict(method="mse", act_order=True),
        dict(method="gptq", hessian=np.full((32, 32), np.nan, np.float32)),
        dict(method="gptq", hessian=-h),  # not positive definite
        dict(method="mse", importance=-np.ones(32, np.float32)),
        dict(method="mse", rounding="stochastic", seed=1),
        dict(method="mse", profile="torchao"),
    ]
    for kw in bad:
        with pytest.raises(lofp.Error):
            lofp.quantize(x, "mxfp8-e4m3", **kw)
    with pytest.raises(lofp.Error):
        lofp.quantize(x, "ultraquant", method="mse")
    xn = x.copy()
    xn[1, 3] = np.nan
    with pytest.raises(lofp.Error) as e:
        lofp.quantize(xn, "mxfp4", method="mse")
    assert "35" in str(e.value)
