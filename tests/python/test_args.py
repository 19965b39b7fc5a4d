"""Bad arguments to the public functions raise lofp.Error naming the argument and what it
accepts, instead of a bare OverflowError/TypeError or a silently different request."""
import numpy as np
import pytest

import lofp


@pytest.fixture
def x():
    return np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32)


def test_seed_negative(x):
    with pytest.raises(lofp.Error, match=r"seed.*0\.\.18446744073709551615"):
        lofp.quantize(x, "mxfp4", rounding="stochastic", seed=-1)


def test_seed_too_large():
    with pytest.raises(lofp.Error, match="seed"):
        lofp.scheme("mxfp4", seed=1 << 64)


def test_seed_not_int():
    with pytest.raises(lofp.Error, match="seed"):
        lofp.scheme("mxfp4", seed="3")


def test_scale_rule_int(x):
    with pytest.raises(lofp.Error, match="scale_rule.*floor, ceil, even, rceil"):
        lofp.quantize(x, "mxfp4", scale_rule=5)


def test_scale_rule_unknown():
    with pytest.raises(lofp.Error, match="unknown scale rule"):
        lofp.scheme("mxfp4", scale_rule="nearest")


def test_rounding_not_str():
    with pytest.raises(lofp.Error, match="rounding.*rne"):
        lofp.scheme("mxfp4", rounding=0)


def test_pad_string(x):
    with pytest.raises(lofp.Error, match="pad must be True or False"):
        lofp.quantize(x, "mxfp4", pad="no")


def test_pad_bool_accepted(x):
    assert lofp.quantize(x, "mxfp4", pad=False).shape == (4, 64)


def test_two_level_int():
    with pytest.raises(lofp.Error, match="two_level"):
        lofp.scheme("nvfp4", two_level=1)


def test_threads_negative(x):
    with pytest.raises(lofp.Error, match=r"threads.*1\.\.256"):
        lofp.quantize(x, "mxfp4", threads=-1)


def test_threads_huge(x):
    with pytest.raises(lofp.Error, match=r"threads.*1\.\.256"):
        lofp.quantize(x, "mxfp4", threads=10**6)


def test_threads_zero(x):
    with pytest.raises(lofp.Error, match="threads"):
        lofp.quantize(x, "mxfp4", threads=0)


def test_threads_bool(x):
    with pytest.raises(lofp.Error, match="threads"):
        lofp.quantize(x, "mxfp4", threads=True)


def test_threads_limits_accepted(x):
    a = lofp.quantize(x, "mxfp4", threads=1)
    b = lofp.quantize(x, "mxfp4", threads=256)
    assert np.array_equal(np.asarray(a.codes), np.asarray(b.codes))


def test_dequantize_threads(x):
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match="threads"):
        lofp.dequantize(q, threads=-1)


def test_dequantize_out_dtype(x):
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match="dtype"):
        lofp.dequantize(q, out=np.empty((4, 64), np.int32))


def test_dequantize_out_shape(x):
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match="shape"):
        lofp.dequantize(q, out=np.empty((2, 128), np.float32))


def test_dequantize_out_contiguous(x):
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match="out must be C-contiguous"):
        lofp.dequantize(q, out=np.empty((4, 128), np.float32)[:, ::2])  # right shape, strided


def test_dequantize_out_good(x):
    q = lofp.quantize(x, "mxfp4")
    out = np.empty((4, 64), np.float32)
    r = lofp.dequantize(q, out=out)
    assert r is out and np.array_equal(out, lofp.dequantize(q))


def test_exclude_str_is_one_pattern():
    from lofp import _args
    assert _args.patterns("exclude", "*.mlp.*") == ["*.mlp.*"]
    assert _args.patterns("exclude", ("a", "b")) == ["a", "b"]


def test_exclude_not_str():
    from lofp import _args
    with pytest.raises(lofp.Error, match="exclude"):
        _args.patterns("exclude", [1])
    with pytest.raises(lofp.Error, match="exclude"):
        _args.patterns("exclude", 3)


def test_convert_pad_string(tmp_path):
    with pytest.raises(lofp.Error, match="pad"):
        lofp.convert(tmp_path / "nope", tmp_path / "out", pad="no")
