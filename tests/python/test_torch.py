"""lofp with torch tensors (skipped without torch): CPU here, CUDA where a GPU and the CUDA backend
are present (run on the GPU machine): bit-identical to numpy / the CPU, custom ops under
torch.compile without graph breaks, W4A16Linear, quantize_model, torchao fields."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lofp  # noqa: E402
import lofp.torch as lt  # noqa: E402
from conftest import layer  # noqa: E402

CUDA = lofp.HAVE_CUDA and torch.cuda.is_available() and lofp.cuda_device_count() > 0
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device and the lofp CUDA backend")


@pytest.fixture(autouse=True, params=["direct", "dlpack"])
def tensor_path(request):
    """Every torch test runs with torch tensors passed directly and through DLPack."""
    prev = lofp._lofp.tensor_path(request.param)
    yield request.param
    lofp._lofp.tensor_path(prev)


def _np(t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype.itemsize == 1:
        return t.view(torch.uint8).numpy()
    if t.dtype == torch.uint32:
        return t.view(torch.int32).numpy().view(np.uint32)
    return t.numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scheme", list(lofp.SCHEMES))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_torch_matches_numpy(rng, device, scheme, dtype):
    if device == "cuda" and scheme == "ultraquant":
        pass
    x = layer(rng, (3, 5, 256))
    xd = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    ref = lofp.quantize(xd, scheme)
    t = lt.from_numpy(xd, device)
    q = lofp.quantize(t, scheme)
    assert q.codes.device.type == device and q.codes.dtype == torch.uint8
    np.testing.assert_array_equal(_np(q.codes), ref.codes)
    np.testing.assert_array_equal(_np(q.scales), ref.scales.view(np.uint8))
    assert float(q.global_scale) == ref.global_scale
    for od in ("float32", "bfloat16", "float16"):
        y = lofp.dequantize(q, od)
        assert y.device.type == device and y.dtype == getattr(torch, od)
        np.testing.assert_array_equal(_np(y).view(np.uint32 if od == "float32" else np.uint16),
                                      lofp.dequantize(ref, od).view(np.uint32 if od == "float32" else np.uint16))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["swizzle-128x4", "packed-u32", "packed-u32:deepgemm"])
def test_torch_layouts_match_numpy(rng, device, layout):
    x = layer(rng, (130, 256))
    ref = lofp.quantize(x, "mxfp8-e4m3", scale_layout=layout)
    q = lofp.quantize(lt.from_numpy(x, device), "mxfp8-e4m3", scale_layout=layout)
    np.testing.assert_array_equal(_np(q.scales).reshape(-1).view(np.uint8), np.asarray(ref.scales).reshape(-1).view(np.uint8))
    np.testing.assert_array_equal(_np(lofp.dequantize(q)), lofp.dequantize(ref))


def test_torch_out_and_strided(rng):
    x = torch.from_numpy(layer(rng, (8, 256)))
    codes = torch.empty((8, 128), dtype=torch.uint8)
    scales = torch.empty((8, 16), dtype=torch.float8_e4m3fn)
    q = lofp.quantize(x, "nvfp4", out=(codes, scales))
    assert q.codes is codes and q.codes.data_ptr() == codes.data_ptr()
    ref = lofp.quantize(x.numpy(), "nvfp4")
    np.testing.assert_array_equal(codes.numpy(), ref.codes)
    xt = torch.from_numpy(layer(rng, (256, 64))).t()           # non-contiguous: copied once
    np.testing.assert_array_equal(lofp.quantize(xt, "mxfp4").codes.numpy(),
                                  lofp.quantize(xt.contiguous().numpy(), "mxfp4").codes)
    with pytest.raises(lofp.Error, match="must be contiguous"):
        lofp.quantize(x, "nvfp4", out=(torch.empty((128, 8), dtype=torch.uint8).t(), scales))
    with pytest.raises(lofp.Error, match="x has dtype torch.int32"):
        lofp.quantize(torch.ones((2, 32), dtype=torch.int32), "mxfp4")


def test_as_float4_and_torchao_fields(rng):
    q = lofp.quantize(torch.from_numpy(layer(rng, (16, 64))), "nvfp4")
    f4 = lt.as_float4(q)
    assert f4.dtype == torch.float4_e2m1fn_x2 and tuple(f4.shape) == (16, 32)
    f = lt.torchao_fields(q)
    assert f["kind"] == "NVFP4Tensor" and f["block_size"] == 16 and f["scale"].dtype == torch.float8_e4m3fn
    assert float(f["per_tensor_scale"]) == np.float32(q.decode_scale)
    back = lt.from_torchao(f)
    assert back.scheme == "nvfp4" and back.shape == (16, 64)
    np.testing.assert_array_equal(lofp.dequantize(back).numpy(), lofp.dequantize(q).numpy())
    m = lofp.quantize(torch.from_numpy(layer(rng, (16, 64))), "mxfp8-e4m3")
    fm = lt.torchao_fields(m)
    assert fm["kind"] == "MXTensor" and fm["elem_dtype"] == torch.float8_e4m3fn and fm["scale"].dtype == torch.float8_e8m0fnu
    np.testing.assert_array_equal(lofp.dequantize(lt.from_torchao(fm)).numpy(), lofp.dequantize(m).numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_custom_ops(rng, device):
    x = lt.from_numpy(layer(rng, (4, 256)), device)
    codes, scales, g = torch.ops.lofp.quantize(x, "nvfp4", "swizzle-128x4")
    ref = lofp.quantize(x.cpu().numpy(), "nvfp4", scale_layout="swizzle-128x4")
    np.testing.assert_array_equal(_np(codes), ref.codes)
    np.testing.assert_array_equal(_np(scales), ref.scales.view(np.uint8))
    y = torch.ops.lofp.dequantize(codes, scales, g, "nvfp4", 16, [4, 256], "swizzle-128x4", torch.float32)
    np.testing.assert_array_equal(_np(y), lofp.dequantize(ref))
    torch.library.opcheck(torch.ops.lofp.quantize.default, (x, "mxfp4", "linear"))
    torch.library.opcheck(torch.ops.lofp.dequantize.default, (codes, scales, g, "nvfp4", 16, [4, 256], "swizzle-128x4", torch.bfloat16))


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(128, 256)
        self.down = torch.nn.Linear(256, 128, bias=False)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.down(torch.relu(self.up(x))))


@pytest.mark.parametrize("device", DEVICES)
def test_quantize_model_and_compile_without_graph_breaks(device):
    torch.manual_seed(0)
    model = _Tiny().to(device)
    x = torch.randn(4, 128, device=device)
    ref_model = _Tiny().to(device)
    ref_model.load_state_dict(model.state_dict())
    lt.quantize_model(model, "nvfp4", exclude=["head"])
    assert isinstance(model.up, lt.W4A16Linear) and isinstance(model.down, lt.W4A16Linear)
    assert isinstance(model.head, torch.nn.Linear) and not isinstance(model.head, lt.W4A16Linear)
    with torch.no_grad():
        y = model(x)
        # the layer equals lofp.gemm with the quantized weight
        q = lofp.quantize(ref_model.up.weight.detach(), "nvfp4")
        up = lofp.gemm(x, q) if device == "cpu" else None
        if up is not None:
            np.testing.assert_array_equal(_np(model.up(x)), _np(up + ref_model.up.bias))
        # close to the unquantized model
        yr = ref_model(x)
        assert float((y - yr).norm() / yr.norm()) < 0.2
        import torch._dynamo as dynamo
        dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        yc = compiled(x)
    np.testing.assert_array_equal(_np(yc), _np(y))


def test_w4a16_from_checkpoint_formats(rng):
    w = torch.from_numpy(layer(rng, (32, 128)))
    q = lofp.quantize(w, "nvfp4")
    ref = lt.W4A16Linear.from_qtensor(q)
    x = torch.randn(3, 128)
    modelopt = {"l.weight": q.codes, "l.weight_scale": q.scales, "l.weight_scale_2": torch.tensor(q.decode_scale)}
    ct = {"l.weight_packed": q.codes, "l.weight_scale": q.scales, "l.weight_global_scale": q.global_scale}
    a = lt.W4A16Linear.from_checkpoint(ct, "l")
    np.testing.assert_array_equal(a(x).numpy(), ref(x).numpy())
    b = lt.W4A16Linear.from_checkpoint(modelopt, "l")
    assert float(b.global_scale) == float(lofp._lofp.encode_from_decode(np.float32(q.decode_scale)))
    assert torch.allclose(b(x), ref(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(lofp.Error, match="no NVFP4 weight under 'm'"):
        lt.W4A16Linear.from_checkpoint(ct, "m")


def test_load_to_torch(tmp_path, rng):
    x = layer(rng, (8, 64))
    q = lofp.quantize(x, "nvfp4")
    lofp.save(tmp_path / "m.safetensors", {"w": q, "b": np.arange(4, dtype=np.float32)})
    d = lofp.load(tmp_path / "m.safetensors", device="cpu")
    assert isinstance(d["b"], torch.Tensor) and d["b"].tolist() == [0.0, 1.0, 2.0, 3.0]
    w = d["w"]
    assert isinstance(w.codes, torch.Tensor) and w.scales.dtype == torch.float8_e4m3fn
    np.testing.assert_array_equal(lofp.dequantize(w).numpy(), lofp.dequantize(q))


def test_uq_ops_cpu(rng):
    cache = lt.new_uq_cache(4, 16, 2, 64)
    k = torch.randn(10, 2, 64)
    v = torch.randn(10, 2, 64)
    torch.ops.lofp.uq_store(cache, k, v, torch.arange(10), 16)
    ref = lofp.kv.Cache(4, 16, 2, 64)
    ref.store(k.numpy(), v.numpy(), np.arange(10))
    np.testing.assert_array_equal(cache.numpy(), ref.data)
    q = torch.randn(1, 4, 64)
    out = torch.ops.lofp.uq_decode_attention(q, cache, torch.tensor([[0]], dtype=torch.int32),
                                             torch.tensor([10], dtype=torch.int32), 2, 16, 0.125)
    np.testing.assert_array_equal(out.numpy(), ref.decode(q.numpy(), np.array([[0]]), np.array([10]), scale=0.125))


# ----------------------------------------------------------------------------------------------
# CUDA only (the GPU machine)


@needs_cuda
def test_cuda_side_stream_is_ordered(rng):
    x = torch.from_numpy(layer(rng, (2048, 4096))).cuda()
    ref = lofp.quantize(x.cpu(), "nvfp4")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x * 1.0                      # produced on the side stream
        q = lofp.quantize(y, "nvfp4")    # runs on the side stream (current), after y
        d = lofp.dequantize(q, "float32")
    torch.cuda.current_stream().wait_stream(s)
    np.testing.assert_array_equal(_np(q.codes), ref.codes.numpy())
    np.testing.assert_array_equal(_np(d), lofp.dequantize(ref).numpy())


@needs_cuda
@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("m", [1, 7, 96])
def test_cuda_w4a16_gemm(rng, scheme, m):
    w = lofp.quantize(torch.from_numpy(layer(rng, (256, 512))), scheme)
    a = torch.randn(m, 512, dtype=torch.bfloat16)
    ref = lofp.gemm_reference(a.float().numpy(), lofp.quantize(w.codes.new_empty(0), scheme) if False else w)
    wc = lt.to_device(w, "cuda")
    c = lofp.gemm(a.cuda(), wc)
    assert c.dtype == torch.float32 and tuple(c.shape) == (m, 256)
    err = np.abs(_np(c) - ref).max() / np.abs(ref).max()
    assert err < 1e-5


@needs_cuda
def test_cuda_kv_cache_matches_cpu(rng):
    Hq, Hk, D, N, bs = 8, 2, 128, 100, 16
    k = torch.randn(N, Hk, D)
    v = torch.randn(N, Hk, D)
    cpu = lofp.kv.Cache(8, bs, Hk, D)
    gpu = lofp.kv.Cache(8, bs, Hk, D, device="cuda")
    slots = torch.arange(N)
    cpu.store(k.numpy(), v.numpy(), slots.numpy())
    gpu.store(k.cuda(), v.cuda(), slots.cuda())
    np.testing.assert_array_equal(_np(gpu.data), cpu.data)
    q = torch.randn(1, Hq, D)
    bt = torch.arange(8, dtype=torch.int32).reshape(1, 8)
    sl = torch.tensor([N], dtype=torch.int32)
    o_cpu = cpu.decode(q.numpy(), bt.numpy(), sl.numpy(), path="reference")
    o_gpu = gpu.decode(q.cuda(), bt.cuda(), sl.cuda(), max_seq_len=N)
    assert np.abs(_np(o_gpu) - o_cpu).max() <= 1e-4 * np.abs(o_cpu).max()


@needs_cuda
def test_cuda_custom_op_overhead_report():
    """Not an assertion: prints the per-call overhead of the custom op on CUDA (BENCHMARKS.md)."""
    import time
    x = torch.randn(1, 64, device="cuda")
    for _ in range(50):
        torch.ops.lofp.quantize(x, "mxfp4", "linear")
    torch.cuda.synchronize()
    n = 500
    t0 = time.perf_counter()
    for _ in range(n):
        torch.ops.lofp.quantize(x, "mxfp4", "linear")
    torch.cuda.synchronize()
    print(f"\nlofp::quantize custom op, [1, 64] mxfp4 on CUDA: {1e6 * (time.perf_counter() - t0) / n:.1f} us per call")
    lin = lt.W4A16Linear.from_linear(torch.nn.Linear(4096, 4096, bias=False).cuda(), "nvfp4")
    a = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):
        lin(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        lin(a)
    torch.cuda.synchronize()
    print(f"W4A16Linear 4096x4096 NVFP4, bf16 [1, 4096], eager (the fast path) on CUDA: "
          f"{1e6 * (time.perf_counter() - t0) / n:.1f} us per call")
    t0 = time.perf_counter()
    for _ in range(n):
        torch.ops.lofp.w4a16_gemm(a, lin.codes, lin.scales, lin.global_scale, "nvfp4", 4096, 4096, lin._handle)
    torch.cuda.synchronize()
    print(f"the same through lofp::w4a16_gemm: {1e6 * (time.perf_counter() - t0) / n:.1f} us per call")
    ref = torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16, device="cuda")
    for _ in range(50):
        ref(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        ref(a)
    torch.cuda.synchronize()
    print(f"torch bf16 nn.Linear same shape: {1e6 * (time.perf_counter() - t0) / n:.1f} us per call")


# CUDA arrays of other DLPack producers (JAX, CuPy): neither installs on the GPU machine, so a
# stand-in exposes a torch CUDA tensor through the DLPack protocol only. lofp must ask for the
# device, pass its stream to __dlpack__, read the array in place and give bit-identical results.


class ForeignCuda:
    """Only __dlpack__ / __dlpack_device__ (no torch attributes, no buffer protocol), over the
    capsules of a torch CUDA tensor; `legacy` refuses max_version like a pre-2023.12 producer."""

    def __init__(self, t, legacy=False):
        self._t = t
        self.legacy = legacy
        self.streams = []  # the stream argument of every successful __dlpack__ call

    def __dlpack_device__(self):
        d = self._t.__dlpack_device__()
        return (int(d[0]), int(d[1]))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        cap = self._t.__dlpack__(stream=stream) if max_version is None else \
            self._t.__dlpack__(stream=stream, max_version=max_version)
        self.streams.append(stream)
        return cap


def _dl_stream(s):
    return 1 if s.cuda_stream == 0 else s.cuda_stream  # DLPack spells the legacy default stream 1


@needs_cuda
@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4", "mxfp8-e4m3", "ultraquant"])
def test_foreign_cuda_quantize_bit_identical(rng, legacy, scheme):
    x = layer(rng, (6, 512))
    ref = lofp.quantize(x, scheme)
    p = ForeignCuda(torch.from_numpy(x).cuda(), legacy=legacy)
    q = lofp.quantize(p, scheme)
    assert p.streams == [_dl_stream(torch.cuda.current_stream())]
    assert q.codes.device.type == "cuda" and q.device == "cuda:0"   # outputs: torch on the same GPU
    np.testing.assert_array_equal(_np(q.codes), ref.codes)
    np.testing.assert_array_equal(_np(q.scales), ref.scales.view(np.uint8))
    assert float(q.global_scale) == ref.global_scale
    y = lofp.dequantize(q, "float32")
    np.testing.assert_array_equal(_np(y).view(np.uint32), lofp.dequantize(ref, "float32").view(np.uint32))


@needs_cuda
def test_foreign_cuda_bfloat16_and_outputs_in_place(rng):
    x = layer(rng, (4, 256)).astype(ml_dtypes.bfloat16)
    ref = lofp.quantize(x, "nvfp4")
    t = lt.from_numpy(x, "cuda")
    codes = torch.zeros((4, 128), dtype=torch.uint8, device="cuda")
    scales = torch.zeros((4, 16), dtype=torch.uint8, device="cuda")
    pc, ps = ForeignCuda(codes), ForeignCuda(scales)
    q = lofp.quantize(ForeignCuda(t), "nvfp4", out=(pc, ps))
    assert q.codes is pc and q.dtype == "bfloat16" and q.device == "cuda:0"
    np.testing.assert_array_equal(_np(codes), ref.codes)
    np.testing.assert_array_equal(_np(scales), ref.scales.view(np.uint8))
    y = torch.empty((4, 256), dtype=torch.bfloat16, device="cuda")
    py = ForeignCuda(y)
    assert lofp.dequantize(q, out=py) is py   # codes, scales and out all read through DLPack
    np.testing.assert_array_equal(_np(y).view(np.uint16), lofp.dequantize(ref).view(np.uint16))
    assert py.streams == [_dl_stream(torch.cuda.current_stream())]


@needs_cuda
def test_foreign_cuda_side_stream_is_passed_and_ordered(rng):
    x = torch.from_numpy(layer(rng, (2048, 4096))).cuda()
    ref = lofp.quantize(x.cpu(), "nvfp4")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        p = ForeignCuda(x * 1.0)           # produced on the side stream
        q = lofp.quantize(p, "nvfp4")      # lofp's stream is the current one: the side stream
        d = lofp.dequantize(q, "float32")
    torch.cuda.current_stream().wait_stream(s)
    assert p.streams == [s.cuda_stream] and s.cuda_stream not in (0, 1)
    np.testing.assert_array_equal(_np(q.codes), ref.codes.numpy())
    np.testing.assert_array_equal(_np(d), lofp.dequantize(ref).numpy())


@needs_cuda
def test_foreign_cuda_refusals(rng):
    x = torch.from_numpy(layer(rng, (4, 256))).cuda()
    with pytest.raises(lofp.Error, match=r"x \(a CUDA array from ForeignCuda\) is not C-contiguous"):
        lofp.quantize(ForeignCuda(x.t().contiguous().t()), "mxfp4")  # column-major: strides (1, 4)
    with pytest.raises(lofp.Error, match="has DLPack dtype code 2 with 64 bits x 1; lofp takes float32"):
        lofp.quantize(ForeignCuda(x.double()), "mxfp4")
    q = lofp.quantize(x, "mxfp4")
    with pytest.raises(lofp.Error, match="out has 2048 bytes, expected 4096"):
        lofp.dequantize(q, out=ForeignCuda(torch.empty((4, 256), dtype=torch.float16, device="cuda")), dtype="float32")


@needs_cuda
def test_foreign_cuda_gemm_and_kv(rng):
    w = lofp.quantize(torch.from_numpy(layer(rng, (256, 512))), "nvfp4")
    wc = lt.to_device(w, "cuda")
    a = torch.randn(3, 512, dtype=torch.bfloat16, device="cuda")
    ref = _np(lofp.gemm(a, wc))
    np.testing.assert_allclose(_np(lofp.gemm(ForeignCuda(a), wc)), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    Hk, D = 2, 128
    k = torch.randn(10, Hk, D, device="cuda")
    v = torch.randn(10, Hk, D, device="cuda")
    c1 = lofp.kv.Cache(4, 16, Hk, D, device="cuda")
    c2 = lofp.kv.Cache(4, 16, Hk, D, device="cuda")
    slots = torch.arange(10, device="cuda")
    c1.store(k, v, slots)
    c2.store(ForeignCuda(k), ForeignCuda(v), ForeignCuda(slots))
    np.testing.assert_array_equal(_np(c1.data), _np(c2.data))
