"""The binding's contract: zero-copy outputs, strided inputs (copied once), every dtype, errors
with the right message, and the GIL released around the kernels."""
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import lofp
from conftest import layer


def test_quantize_returns_a_qtensor():
    q = lofp.quantize(np.ones((4, 32), "float32"), "mxfp4")
    assert isinstance(q, lofp.QTensor)
    assert q.codes.dtype == np.uint8 and q.codes.shape == (4, 16)
    assert q.scales.dtype == ml_dtypes.float8_e8m0fnu and q.scales.shape == (4, 1)
    assert q.shape == (4, 32) and q.layout == "linear" and q.scheme == "mxfp4" and q.global_scale == 1.0
    assert "QTensor(scheme='mxfp4'" in repr(q)
    with pytest.raises(Exception):
        q.scheme = "nvfp4"  # frozen


def test_scale_dtypes_per_scheme(rng):
    x = layer(rng, (4, 64))
    assert lofp.quantize(x, "nvfp4").scales.dtype == ml_dtypes.float8_e4m3fn
    assert lofp.quantize(x, "mxfp8-e4m3").scales.dtype == ml_dtypes.float8_e8m0fnu
    assert lofp.quantize(x, "ultraquant").scales.dtype == np.uint8
    q = lofp.quantize(x, "mxfp4", scale_layout="packed-u32")
    assert q.scales.dtype == np.uint32 and q.pad_byte == 127


def test_out_is_filled_in_place(rng):
    x = layer(rng, (8, 128))
    codes = np.empty((8, 64), np.uint8)
    scales = np.empty((8, 8), ml_dtypes.float8_e4m3fn)
    q = lofp.quantize(x, "nvfp4", out=(codes, scales))
    assert q.codes is codes and q.scales is scales
    assert np.shares_memory(q.codes, codes) and np.shares_memory(q.scales, scales)
    ref = lofp.quantize(x, "nvfp4")
    np.testing.assert_array_equal(codes, ref.codes)
    np.testing.assert_array_equal(scales.view(np.uint8), ref.scales.view(np.uint8))
    out = np.empty((8, 128), np.float32)
    r = lofp.dequantize(q, out=out)
    assert r is out
    np.testing.assert_array_equal(out, lofp.dequantize(ref))


def test_contiguous_input_is_not_copied(rng):
    # a read-only input still works: the extension only reads it (no copy is made either way)
    x = layer(rng, (8, 128))
    x.setflags(write=False)
    lofp.quantize(x, "mxfp4")


def test_out_wrong_size_or_strided_is_refused(rng):
    x = layer(rng, (8, 128))
    with pytest.raises(lofp.Error, match=r"buffer too small: codes has 256 bytes, expected 512"):
        lofp.quantize(x, "nvfp4", out=(np.empty((8, 32), np.uint8), np.empty((8, 8), np.uint8)))
    big = np.empty((8, 128), np.uint8)
    with pytest.raises(lofp.Error, match="out codes must be C-contiguous"):
        lofp.quantize(x, "nvfp4", out=(big[:, ::2], np.empty((8, 8), np.uint8)))
    with pytest.raises(lofp.Error, match="out must be a"):
        lofp.quantize(x, "nvfp4", out=np.empty(3))


@pytest.mark.parametrize("make", [
    lambda x: x[:, ::2],                     # strided columns
    lambda x: x.T.copy().T,                  # Fortran order
    lambda x: x[::3],                        # strided rows
    lambda x: np.broadcast_to(x[:1], x.shape),  # zero strides
])
def test_strided_inputs_are_copied_once(rng, make):
    base = layer(rng, (12, 256))
    v = make(base)
    assert not v.flags.c_contiguous
    got = lofp.quantize(v, "mxfp4")
    ref = lofp.quantize(np.ascontiguousarray(v), "mxfp4")
    np.testing.assert_array_equal(got.codes, ref.codes)
    np.testing.assert_array_equal(got.scales.view(np.uint8), ref.scales.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp8-e4m3", "ultraquant"])
def test_every_input_dtype(rng, dtype, scheme):
    x = layer(rng, (4, 128))
    xd = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    q = lofp.quantize(xd, scheme)
    # the library converts bf16/f16 exactly and float64 is rounded to float32 first
    ref = lofp.quantize(xd.astype(np.float32), scheme)
    np.testing.assert_array_equal(q.codes, ref.codes)
    np.testing.assert_array_equal(q.scales.view(np.uint8), ref.scales.view(np.uint8))
    assert q.dtype == ("float32" if dtype == "float64" else dtype)
    for od, npd in (("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)):
        y = lofp.dequantize(q, od)
        assert y.dtype == npd and y.shape == x.shape
        np.testing.assert_array_equal(y.astype(np.float32), lofp.dequantize(q, "float32").astype(npd).astype(np.float32))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_strided_16_bit_inputs_are_copied_once(rng, dtype):
    # numpy cannot export a strided bfloat16 array through DLPack either: the fast path must fall
    # back to the general one (which copies) instead of raising numpy's BufferError
    base = layer(rng, (6, 512)).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    v = base[:, ::2]
    got = lofp.quantize(v, "nvfp4")
    ref = lofp.quantize(np.ascontiguousarray(v), "nvfp4")
    np.testing.assert_array_equal(got.codes, ref.codes)
    np.testing.assert_array_equal(got.scales.view(np.uint8), ref.scales.view(np.uint8))
    assert got.dtype == dtype


def test_fast_path_errors_match_the_general_path(rng):
    x = layer(rng, (4, 64))
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match=r"buffer too small: out has 512 bytes, expected 1024"):
        lofp.dequantize(q, out=np.empty((4, 32), np.float32))
    with pytest.raises(lofp.Error, match="out must be C-contiguous"):
        lofp.dequantize(q, out=np.empty((4, 128), np.float32)[:, ::2])
    with pytest.raises(lofp.Error, match=r"threads must be an integer 1\.\.256"):
        lofp.quantize(x, "mxfp4", threads=-1)
    bad = lofp.QTensor(q.codes, q.scales, float("nan"), "nvfp4", q.shape, spec=lofp.scheme("nvfp4"))
    with pytest.raises(lofp.Error):
        lofp.dequantize(bad)


def test_lists_and_memoryviews_are_accepted():
    q = lofp.quantize([[1.0] * 32], "mxfp4")
    assert q.shape == (1, 32)


@pytest.mark.parametrize("call,status,message", [
    (lambda x: lofp.quantize(x, "fp5"), "not found", "unknown scheme 'fp5'"),
    (lambda x: lofp.quantize(x[:, :33], "mxfp4"), "shape", "last dimension 33 is not a multiple of the block 32 (pass pad=True)"),
    (lambda x: lofp.quantize(x, "mxfp4", block=48), "invalid argument", "invalid options for mxfp4 (block 48"),
    (lambda x: lofp.quantize(x, "nvfp4", rounding="up"), "not found", "unknown rounding 'up'"),
    (lambda x: lofp.quantize(x, "mxfp4", scale_rule="round"), "not found", "unknown scale rule 'round'"),
    (lambda x: lofp.quantize(x, "mxfp4", scale_layout="tiled"), "not found", "unknown scale layout 'tiled'"),
    (lambda x: lofp.quantize(x, "mxfp4", scale_layout="packed-u32", pad_byte=255), "invalid argument", "pad_byte must be 0..254"),
    (lambda x: lofp.quantize(x.astype(np.int32), "mxfp4"), "invalid argument", "x has dtype int32"),
    (lambda x: lofp.quantize(np.float32(1.0), "mxfp4"), "invalid argument", "x is a scalar"),
    (lambda x: lofp.quantize(x[:0], "mxfp4"), "invalid argument", "x is empty"),
    (lambda x: lofp.quantize(x, "nvfp4", global_scale=-1.0), "invalid argument", "global_scale must be finite and > 0"),
    (lambda x: lofp.dequantize(x), "invalid argument", "dequantize takes a lofp.QTensor"),
    (lambda x: lofp.dequantize(lofp.quantize(x, "mxfp4"), "int8"), "invalid argument", "unknown dtype 'int8'"),
    (lambda x: lofp.encode(x, "e9m9"), "not found", "unknown element type 'e9m9'"),
    (lambda x: lofp.encode(x, "e2m1", rounding="stochastic"), "invalid argument", "stochastic rounding needs rbits"),
    (lambda x: lofp.load("/nonexistent/file.safetensors"), "i/o error", "/nonexistent/file.safetensors"),
    (lambda x: lofp.kv.Cache(4, 16, 2, 100), "shape", "head_dim 100 is not a power of two"),
])
def test_bad_arguments_raise_lofp_error(rng, call, status, message):
    x = layer(rng, (4, 64))
    with pytest.raises(lofp.Error) as ei:
        call(x)
    assert isinstance(ei.value, ValueError)
    assert ei.value.status == status
    assert str(ei.value).startswith(status + ":")
    assert message in str(ei.value)


def test_nonfinite_error_names_the_flat_index(rng):
    x = layer(rng, (4, 64))
    x[2, 5] = np.inf
    with pytest.raises(lofp.Error) as ei:
        lofp.quantize(x, "mxfp4")
    e = ei.value
    assert e.status == "non-finite input" and e.index == 2 * 64 + 5 and e.code == 3
    assert "non-finite value at flat index 133" in str(e)
    # MX propagation: scale 0xFF for the block, which dequantizes to NaN
    q = lofp.quantize(x, "mxfp4", propagate_nonfinite=True)
    assert q.scales.view(np.uint8)[2, 0] == 0xFF
    y = lofp.dequantize(q)
    assert np.isnan(y[2, :32]).all() and np.isfinite(y[2, 32:]).all()


def test_corrupt_file_is_a_format_error(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}        ")
    with pytest.raises(lofp.Error) as ei:
        lofp.load(p)
    assert ei.value.status == "malformed data" and "bad.safetensors" in str(ei.value)


def test_threads_never_change_bits(rng):
    x = layer(rng, (64, 1024))
    a = lofp.quantize(x, "nvfp4", threads=1)
    b = lofp.quantize(x, "nvfp4", threads=4)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.scales.view(np.uint8), b.scales.view(np.uint8))


def _big(rng):
    return rng.standard_normal((1024, 4096)).astype(np.float32)


def test_gil_is_released_during_a_kernel(rng):
    """While one thread is inside lofp.quantize, the main thread keeps running Python code."""
    x = _big(rng)
    started, done = threading.Event(), threading.Event()

    def work():
        started.set()
        for _ in range(3):
            lofp.quantize(x, "ultraquant", threads=1)  # tens of ms per call
        done.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    spins = 0
    t0 = time.perf_counter()
    while not done.is_set():
        spins += 1
    elapsed = time.perf_counter() - t0
    t.join()
    # With the GIL held for the whole call the main thread would only run between calls
    # (a handful of switch intervals); released, it spins freely the whole time.
    assert elapsed > 0.02
    assert spins > 20000, f"main thread made {spins} iterations in {elapsed:.3f} s"
