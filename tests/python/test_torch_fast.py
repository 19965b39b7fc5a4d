"""lofp.torch's eager fast path and W4A8 (skipped without torch; the CUDA tests where a GPU and the
CUDA backend are present, the W4A8 kernel ones on compute capability 9.0 only): the layers called
directly in eager mode give the custom op's bits, the op is what torch.compile / fake tensors /
tracing see, the prepared weight follows .to() and load_state_dict, W4A8Linear equals a torch
emulation (exactly on the CPU, within the FP8 accumulation error on the GPU), NVFP4 is refused."""
import copy
import pickle

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lofp  # noqa: E402
import lofp.torch as lt  # noqa: E402
from conftest import layer  # noqa: E402

CUDA = lofp.HAVE_CUDA and torch.cuda.is_available() and lofp.cuda_device_count() > 0
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device and the lofp CUDA backend")
SM90 = CUDA and torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(not SM90, reason="the W4A8 kernel needs a compute capability 9.0 GPU")


def _np(t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).astype(np.float32)
    return t.float().numpy()


def _linear(rng, n, k, bias=True, device="cpu"):
    lin = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(layer(rng, (n, k))))
        if bias:
            lin.bias.copy_(torch.from_numpy(rng.standard_normal(n).astype(np.float32)))
    return lin.to(device)


def _op(mod, x):
    """The layer through its registered custom op (what forward runs when torch records it)."""
    op = torch.ops.lofp.w4a8_gemm if isinstance(mod, lt.W4A8Linear) else torch.ops.lofp.w4a16_gemm
    y = op(x, mod.codes, mod.scales, mod.global_scale, mod.scheme, mod.out_features, mod.in_features, mod._handle)
    return y if mod.bias is None else y + mod.bias.to(y.dtype)


def _w4a8_emulation(x, q):
    """W4A8 written out independently of lofp.torch: per-token scale amax / 448 (1 for a zero
    row), E4M3 codes by ml_dtypes (round to nearest even), fp32 product with the dequantized
    weights, times the scale."""
    a = x.detach().cpu().reshape(-1, q.shape[1]).to(torch.bfloat16).float()
    s = a.abs().amax(dim=1, keepdim=True) / 448.0
    s[s == 0] = 1.0
    codes = torch.from_numpy((a / s).numpy().astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    w = lofp.dequantize(q, "float32")
    w = w if isinstance(w, torch.Tensor) else torch.from_numpy(w)
    return ((codes @ w.t()) * s).reshape(tuple(x.shape[:-1]) + (q.shape[0],))


class _Count:
    """Wraps an extension entry point and counts its calls (the fast path's kernel calls)."""

    def __init__(self, monkeypatch, name, fail=False):
        self.calls = 0
        self.fail = fail
        if hasattr(lofp._lofp, name):
            self.orig = getattr(lofp._lofp, name)
            monkeypatch.setattr(lofp._lofp, name, self)

    def __call__(self, *args):
        self.calls += 1
        if self.fail:
            raise AssertionError("the fast path ran where the custom op was expected")
        return self.orig(*args)


# ----------------------------------------------------------------------------------------------
# CPU (any machine with torch)


def test_w4a8_cpu_equals_emulation_exactly(rng):
    lin = _linear(rng, 64, 256)
    q = lofp.quantize(lin.weight.detach(), "mxfp4")
    mod = lt.W4A8Linear.from_linear(lin)
    assert mod.scheme == "mxfp4" and "activations=e4m3" in repr(mod)
    x = torch.from_numpy(rng.standard_normal((5, 256)).astype(np.float32))
    x[1] = 0.0  # an all-zero row: scale 1, output = bias
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
            xd = x.to(dt)
            y = mod(xd)
            assert y.dtype == dt and tuple(y.shape) == (5, 64)
            ref = _w4a8_emulation(xd, q).to(dt) + lin.bias.detach().to(dt)
            np.testing.assert_array_equal(_np(y), _np(ref))
        # 3-D input, and the activations really are rounded (W4A8 differs from W4A16)
        x3 = x.reshape(5, 1, 256)
        np.testing.assert_array_equal(_np(mod(x3)).reshape(5, 64), _np(mod(x)))
        w16 = lt.W4A16Linear.from_linear(lin, "mxfp4")
        d = float((mod(x) - w16(x)).norm() / w16(x).norm())
        assert 0 < d < 0.1


def test_w4a8_nonfinite_row_is_nan(rng):
    mod = lt.W4A8Linear.from_linear(_linear(rng, 32, 128, bias=False))
    x = torch.randn(3, 128)
    x[2, 5] = float("inf")
    y = mod(x)
    assert torch.isnan(y[2]).all() and torch.isfinite(y[:2]).all()


def test_w4a8_refuses_nvfp4_and_bad_arguments(rng):
    lin = _linear(rng, 32, 128)
    with pytest.raises(lofp.Error, match="unsupported: W4A8 .* MXFP4 weights, not nvfp4"):
        lt.W4A8Linear.from_linear(lin, "nvfp4")
    with pytest.raises(lofp.Error, match="MXFP4 weights, not nvfp4"):
        lt.W4A8Linear.from_qtensor(lofp.quantize(lin.weight.detach(), "nvfp4"))
    model = torch.nn.Sequential(_linear(rng, 32, 128))
    with pytest.raises(lofp.Error, match="MXFP4 weights, not nvfp4"):
        lt.quantize_model(model, "nvfp4", activations="e4m3")
    with pytest.raises(lofp.Error, match="activations is None .* or 'e4m3'"):
        lt.quantize_model(model, "mxfp4", activations="e5m2")
    assert isinstance(model[0], torch.nn.Linear)  # refused before anything was replaced
    lt.quantize_model(model, "mxfp4", activations="e4m3")
    assert isinstance(model[0], lt.W4A8Linear)
    with pytest.raises(lofp.Error, match="shape"):
        model[0](torch.randn(2, 256))
    q = lofp.quantize(lin.weight.detach(), "nvfp4")
    with pytest.raises(lofp.Error, match="MXFP4 weights, not nvfp4"):
        torch.ops.lofp.w4a8_gemm(torch.randn(1, 128), q.codes, q.scales.view(torch.uint8), q.global_scale,
                                 "nvfp4", 32, 128, -1)


def test_w4a8_op_check_and_compile(rng):
    torch.manual_seed(0)
    model = torch.nn.Sequential(_linear(rng, 256, 128), torch.nn.ReLU(), _linear(rng, 64, 256, bias=False))
    lt.quantize_model(model, "mxfp4", activations="e4m3")
    x = torch.randn(4, 128)
    m0 = model[0]
    torch.library.opcheck(torch.ops.lofp.w4a8_gemm.default,
                          (x, m0.codes, m0.scales, m0.global_scale, "mxfp4", 256, 128, m0._handle))
    with torch.no_grad():
        y = model(x)
        import torch._dynamo as dynamo
        dynamo.reset()
        yc = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    np.testing.assert_array_equal(yc.numpy(), y.numpy())


def test_copies_and_pickles(rng):
    mod = lt.W4A16Linear.from_linear(_linear(rng, 32, 128), "nvfp4")
    x = torch.randn(2, 128)
    y = mod(x)
    c = copy.deepcopy(mod)
    assert c._handle != mod._handle
    np.testing.assert_array_equal(c(x).numpy(), y.numpy())
    p = pickle.loads(pickle.dumps(mod))
    np.testing.assert_array_equal(p(x).numpy(), y.numpy())


# ----------------------------------------------------------------------------------------------
# CUDA: the fast path


@needs_cuda
@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
@pytest.mark.parametrize("bias", [True, False])
def test_cuda_fast_path_bit_identical_to_op(monkeypatch, rng, scheme, dtype, bias):
    mod = lt.W4A16Linear.from_linear(_linear(rng, 256, 512, bias=bias, device="cuda"), scheme)
    fast = _Count(monkeypatch, "cuda_w4a16_gemm_ptr")
    g = torch.Generator(device="cuda").manual_seed(1)
    xs = [torch.randn(1, 512, device="cuda", generator=g, dtype=dtype),
          torch.randn(7, 512, device="cuda", generator=g, dtype=dtype),
          torch.randn(2, 3, 512, device="cuda", generator=g, dtype=dtype),
          torch.randn(512, 96, device="cuda", generator=g, dtype=dtype).t(),   # not contiguous
          torch.randn(800, 512, device="cuda", generator=g, dtype=dtype)]     # the tiled GEMM
    with torch.no_grad():
        for x in xs:
            y = mod(x)
            r = _op(mod, x)
            assert y.dtype == dtype and y.shape == r.shape
            np.testing.assert_array_equal(_np(y), _np(r))
    assert fast.calls == len(xs)
    # on a side stream: the kernel runs there, after the input is produced
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        x = xs[1] * 1.0
        y = mod(x)
    torch.cuda.current_stream().wait_stream(s)
    np.testing.assert_array_equal(_np(y), _np(_op(mod, xs[1])))


@needs_cuda
def test_cuda_fast_path_not_used_when_recorded(monkeypatch, rng):
    torch.manual_seed(0)
    model = torch.nn.Sequential(_linear(rng, 256, 128, device="cuda"), torch.nn.ReLU(),
                                _linear(rng, 128, 256, bias=False, device="cuda"))
    lt.quantize_model(model, "nvfp4")
    x = torch.randn(4, 128, device="cuda")
    with torch.no_grad():
        y = model(x)                     # eager: the fast path
    _Count(monkeypatch, "cuda_w4a16_gemm_ptr", fail=True)
    with torch.no_grad():
        import torch._dynamo as dynamo
        dynamo.reset()
        yc = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
        np.testing.assert_array_equal(_np(yc), _np(y))
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fx = mode.from_tensor(x)
            assert tuple(model(fx).shape) == (4, 128)
        xr = x.clone().requires_grad_(True)  # an input that requires grad: the op (autograd's business)
        assert model[0](xr).shape == (4, 256)


@needs_cuda
def test_cuda_fast_path_follows_to_and_load_state_dict(rng):
    a = lt.W4A16Linear.from_linear(_linear(rng, 128, 256, device="cuda"), "nvfp4")
    b = lt.W4A16Linear.from_linear(_linear(rng, 128, 256, device="cuda"), "nvfp4")
    x = torch.randn(3, 256, device="cuda")
    ya, yb = a(x), b(x)
    assert not torch.equal(ya, yb)
    a.load_state_dict(b.state_dict())
    np.testing.assert_array_equal(_np(a(x)), _np(yb))
    a.bias = torch.nn.Parameter(torch.zeros(128, device="cuda"), requires_grad=False)
    y0 = a(x)
    assert not torch.equal(y0, yb)                   # the new bias, not the one prepared before
    np.testing.assert_array_equal(_np(y0), _np(_op(a, x)))
    a.cpu()
    yc = a(x.cpu())
    assert yc.device.type == "cpu"
    a.cuda()
    np.testing.assert_array_equal(_np(a(x)), _np(_op(a, x)))


@needs_cuda
def test_cuda_fast_path_errors(rng):
    mod = lt.W4A16Linear.from_linear(_linear(rng, 128, 256, device="cuda"), "nvfp4")
    with pytest.raises(lofp.Error, match="shape"):
        mod(torch.randn(2, 384, device="cuda"))
    big = torch.randn(257, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(lofp.Error, match="16-byte aligned"):
        mod(big[1:])                     # contiguous but misaligned: refused, as the op does
    with pytest.raises(lofp.Error, match="16-byte aligned"):
        _op(mod, big[1:])
    mod(torch.randn(1, 256, device="cuda"))
    h = mod._fast[1]
    a = torch.randn(1, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(1, 128, device="cuda")
    ptr = lofp._lofp.cuda_w4a16_gemm_ptr
    with pytest.raises(TypeError, match="takes 6 arguments"):
        ptr(h, a.data_ptr(), 1, 1, c.data_ptr())
    with pytest.raises(lofp.Error, match="a is a null pointer"):
        ptr(h, 0, 1, 1, c.data_ptr(), 0)
    with pytest.raises(lofp.Error, match="m must be > 0"):
        ptr(h, a.data_ptr(), 0, 1, c.data_ptr(), 0)
    with pytest.raises(lofp.Error, match="float32 or bfloat16"):
        ptr(h, a.data_ptr(), 1, 3, c.data_ptr(), 0)
    with pytest.raises(ValueError):
        ptr("not a handle", a.data_ptr(), 1, 1, c.data_ptr(), 0)
    ptr(h, a.data_ptr(), 1, 1, c.data_ptr(), torch.cuda.current_stream().cuda_stream)
    np.testing.assert_array_equal(_np(c), _np(lofp.gemm(a, lt.to_device(mod.qtensor(), "cuda"))))


# ----------------------------------------------------------------------------------------------
# CUDA: W4A8 (sm_90a)


@needs_sm90
@pytest.mark.parametrize("m", [1, 5, 256])
def test_cuda_w4a8_matches_emulation(monkeypatch, rng, m):
    lin = _linear(rng, 512, 1024, device="cuda")
    mod = lt.W4A8Linear.from_linear(lin)
    q = lofp.quantize(lin.weight.detach().cpu(), "mxfp4")
    fast = _Count(monkeypatch, "cuda_w4a8_gemm_ptr")
    x = torch.randn(m, 1024, device="cuda")
    with torch.no_grad():
        y32 = mod(x)
        y16 = mod(x.to(torch.bfloat16))
        ref = _w4a8_emulation(x.cpu(), q) + lin.bias.detach().cpu()
        # FP8 tensor-core sums of 128 products (about 13 bits, truncating) against fp32
        assert float((y32.cpu() - ref).norm() / ref.norm()) < 2e-3
        assert float((y16.float().cpu() - ref).norm() / ref.norm()) < 1e-2
        np.testing.assert_array_equal(_np(y32), _np(_op(mod, x)))   # fast path = op, bit for bit
        np.testing.assert_array_equal(_np(y16), _np(_op(mod, x.to(torch.bfloat16))))
    assert fast.calls == 2


@needs_sm90
@pytest.mark.parametrize("m", [70, 512])
def test_cuda_w4a8_reuses_the_activation(rng, m):
    # three W4A8 layers on one tensor (q / k / v): the second and third reuse the first's codes,
    # with the bits of a fresh quantize; m = 512 takes the large route where cuBLASLt has it
    mods = [lt.W4A8Linear.from_linear(_linear(rng, n, 1152, device="cuda")) for n in (272, 528, 272)]
    x = torch.randn(m, 1152, device="cuda", dtype=torch.bfloat16)
    x2 = torch.randn(m, 1152, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        lt.forget_w4a8_activation()
        y0 = mods[0](x)
        entry = lt._W8_LAST
        assert entry is not None and entry[0]() is x and entry[5] in (1, 2)
        y1 = mods[1](x)
        assert lt._W8_LAST[4] is entry[4]  # the same workspace
        for mod, y in zip(mods, (y0, y1)):
            np.testing.assert_array_equal(_np(y), _np(_op(mod, x)))
        # a write torch counts: quantized again
        x.mul_(-2)
        y2 = mods[2](x)
        assert lt._W8_LAST[4] is not entry[4]
        np.testing.assert_array_equal(_np(y2), _np(_op(mods[2], x)))
        # a write torch does not count (.data shares no version counter): the reuse shows --
        # the old codes -- until forget_w4a8_activation()
        old = _op(mods[1], x)
        x.data.copy_(x2)
        np.testing.assert_array_equal(_np(mods[1](x)), _np(old))
        lt.forget_w4a8_activation()
        np.testing.assert_array_equal(_np(mods[1](x)), _np(_op(mods[1], x2)))
        # the entry dies with its tensor; a float32 input (converted per call) is never reused
        del x
        assert lt._W8_LAST is None
        mods[0](x2.float())
        assert lt._W8_LAST is None


@needs_sm90
def test_cuda_w4a8_compile_and_binding_errors(monkeypatch, rng):
    model = torch.nn.Sequential(_linear(rng, 256, 256, device="cuda"))
    lt.quantize_model(model, "mxfp4", activations="e4m3")
    x = torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        y = model(x)
        _Count(monkeypatch, "cuda_w4a8_gemm_ptr", fail=True)
        import torch._dynamo as dynamo
        dynamo.reset()
        yc = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    np.testing.assert_array_equal(_np(yc), _np(y))
    monkeypatch.undo()
    mod = model[0]
    h = mod._fast[1]
    c = torch.empty(16, 256, device="cuda")
    ws_bytes = lofp._lofp.cuda_w4a8_workspace_bytes(16, 256)
    assert ws_bytes >= 16 * 256
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")
    s = torch.cuda.current_stream().cuda_stream
    with pytest.raises(lofp.Error, match="buffer too small"):
        lofp._lofp.cuda_w4a8_gemm_ptr(h, x.data_ptr(), 16, 1, c.data_ptr(), ws.data_ptr(), ws_bytes - 1, 0, s)
    ws2 = torch.empty(ws_bytes + 256, dtype=torch.uint8, device="cuda")
    with pytest.raises(lofp.Error, match="256-byte aligned"):
        lofp._lofp.cuda_w4a8_gemm_ptr(h, x.data_ptr(), 16, 1, c.data_ptr(), ws2.data_ptr() + 16, ws_bytes, 0, s)
    with pytest.raises(lofp.Error, match="workspace has"):
        lofp._lofp.cuda_w4a8_gemm(h, x, 16, 1, c, ws[:100], s)
    lofp._lofp.cuda_w4a8_gemm(h, x, 16, 1, c, ws, s)
    np.testing.assert_array_equal(_np(c + mod.bias), _np(_op(mod, x.float())))  # fp32 out of the same kernel
    # NVFP4 weights reach the kernel only through the binding: refused there too
    w = lofp.quantize(torch.randn(256, 256), "nvfp4")
    hn = lofp.cuda_weight(lt.to_device(w, "cuda"))._h
    with pytest.raises(lofp.Error, match="needs MXFP4 weights"):
        lofp._lofp.cuda_w4a8_gemm(hn, x, 16, 1, c, ws, s)
