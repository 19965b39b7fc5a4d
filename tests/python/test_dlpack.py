"""DLPack producers other than numpy and torch (JAX, CuPy, ...), on the CPU: the capsule protocol as
the DLPack Python specification states it -- __dlpack_device__ asked first, one __dlpack__ call
with max_version (and copy=False for outputs), versioned and legacy capsules, the consumed capsule
renamed "used_dltensor[_versioned]" and its deleter run exactly once, refusals with clear errors.

Two fake producers stand in for foreign frameworks: one hands out numpy's own capsules (the
producer side is numpy's code, not ours), the other builds capsules with ctypes from the structs
of the specification, so that versions, flags, dtypes and deleters can be chosen. The CUDA side
(stream argument, results on the GPU) is in test_torch.py (test_foreign_cuda_*)."""
import ctypes
import gc
import sys

import ml_dtypes
import numpy as np
import pytest

import lofp
from conftest import layer

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_name(cap):
    return _get_name(cap).decode()


class NumpyProducer:
    """Exposes a numpy array through the DLPack protocol only (no buffer protocol, no .dtype)."""

    def __init__(self, arr, legacy=False):
        self._a = arr
        self.legacy = legacy
        self.calls = []     # the keyword arguments of every successful __dlpack__ call
        self.capsules = []  # what it handed out

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.legacy and (max_version is not None or copy is not None):
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        kw = {"stream": stream} if self.legacy else {"stream": stream, "max_version": max_version, "copy": copy}
        cap = self._a.__dlpack__(**kw)
        self.calls.append(kw)
        self.capsules.append(cap)
        return cap


# The DLPack ABI, declared from the specification (v1.1), for the ctypes producer.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensorS(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensorS), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensorS)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_NAME_V, _NAME_L = b"dltensor_versioned", b"dltensor"
READ_ONLY, IS_COPIED = 1, 2


class CtypesProducer:
    """Builds DLPack capsules by hand over a numpy array's memory (kept alive by this object).
    Its capsules have no destructor, so only a consumer's call of the deleter counts: `deleted`
    must end at the number of capsules consumed."""

    def __init__(self, arr, *, code, bits, lanes=1, versioned=True, major=1, flags=0, device=(1, 0), strides=None,
                 byte_offset=0, shape=None):
        self._a = arr
        self.code, self.bits, self.lanes, self.versioned, self.major, self.flags = code, bits, lanes, versioned, major, flags
        self.device, self.strides, self.byte_offset = device, strides, byte_offset
        self.shape = tuple(arr.shape) if shape is None else tuple(shape)
        self.deleted = 0
        self.exported = 0
        self.capsules = []
        self._keep = []
        self._deleter = DELETER(self._on_delete)

    def _on_delete(self, ptr):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.versioned and max_version is None:
            raise AssertionError("lofp must ask for max_version")
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        strides = None if self.strides is None else (ctypes.c_int64 * len(self.strides))(*self.strides)
        t = DLTensorS(self._a.ctypes.data, DLDevice(*self.device), len(self.shape),
                      DLDataType(self.code, self.bits, self.lanes), shape,
                      ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None,
                      self.byte_offset)
        if self.versioned:
            m = DLManagedTensorVersioned(DLPackVersion(self.major, 1), None, self._deleter, self.flags, t)
            name = _NAME_V
        else:
            m = DLManagedTensor(t, None, self._deleter)
            name = _NAME_L
        self._keep += [shape, strides, m]
        cap = _capsule_new(ctypes.addressof(m), name, None)
        self.exported += 1
        self.capsules.append(cap)
        return cap


def _same_q(a, b):
    np.testing.assert_array_equal(np.asarray(a.codes), np.asarray(b.codes))
    np.testing.assert_array_equal(np.asarray(a.scales).view(np.uint8), np.asarray(b.scales).view(np.uint8))
    assert a.global_scale == b.global_scale and a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp4", "ultraquant"])
def test_numpy_capsules_quantize_bit_identical(rng, legacy, scheme):
    x = layer(rng, (6, 256))
    before = sys.getrefcount(x)
    p = NumpyProducer(x, legacy=legacy)
    q = lofp.quantize(p, scheme)
    _same_q(q, lofp.quantize(x, scheme))
    assert isinstance(q.codes, np.ndarray)          # CPU outputs are numpy's
    assert len(p.calls) == 1                        # one export for the whole call
    assert p.calls[0]["stream"] is None             # no stream for a CPU array
    if not legacy:
        assert p.calls[0]["max_version"] == (1, 1) and p.calls[0]["copy"] is None
    assert capsule_name(p.capsules[0]) == ("used_dltensor" if legacy else "used_dltensor_versioned")
    del p, q
    gc.collect()
    assert sys.getrefcount(x) == before             # numpy's deleter ran: no reference leaked


@pytest.mark.parametrize("legacy", [False, True])
def test_numpy_capsule_outputs_filled_in_place(rng, legacy):
    x = layer(rng, (8, 128))
    codes, scales = np.zeros((8, 64), np.uint8), np.zeros((8, 8), np.uint8)
    pc, ps = NumpyProducer(codes, legacy), NumpyProducer(scales, legacy)
    q = lofp.quantize(x, "nvfp4", out=(pc, ps))
    ref = lofp.quantize(x, "nvfp4")
    np.testing.assert_array_equal(codes, ref.codes)
    np.testing.assert_array_equal(scales, ref.scales.view(np.uint8))
    if not legacy:
        assert pc.calls[0]["copy"] is False and ps.calls[0]["copy"] is False  # outputs must not be copies
    assert len(pc.calls) == 1 and capsule_name(pc.capsules[0]).startswith("used_")
    assert q.codes is pc and q.device == "cpu" and "NumpyProducer (DLPack)" in repr(q)
    y = np.empty((8, 128), np.float32)
    py = NumpyProducer(y, legacy)
    assert lofp.dequantize(q, out=py) is py          # q's codes and scales are producers too
    np.testing.assert_array_equal(y, lofp.dequantize(ref))
    if not legacy:
        assert py.calls[0]["copy"] is False


def test_read_only_output_is_refused(rng):
    x = layer(rng, (8, 128))
    q = lofp.quantize(x, "mxfp4")
    y = np.empty((8, 128), np.float32)
    y.setflags(write=False)
    with pytest.raises(lofp.Error, match="invalid argument: out is read-only"):
        lofp.dequantize(q, out=NumpyProducer(y))


@pytest.mark.parametrize("versioned", [True, False])
def test_ctypes_capsule_consumed_once(rng, versioned):
    x = layer(rng, (4, 64))
    p = CtypesProducer(x, code=2, bits=32, versioned=versioned)
    q = lofp.quantize(p, "mxfp4")
    _same_q(q, lofp.quantize(x, "mxfp4"))
    assert p.exported == 1
    assert capsule_name(p.capsules[0]) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    gc.collect()
    assert p.deleted == 1


def test_ctypes_bfloat16_and_byte_offset(rng):
    x = layer(rng, (4, 64)).astype(ml_dtypes.bfloat16)
    buf = np.zeros(x.nbytes + 64, np.uint8)
    buf[64:] = x.view(np.uint8).reshape(-1)
    p = CtypesProducer(buf, code=4, bits=16, shape=x.shape, byte_offset=64)  # kDLBfloat
    q = lofp.quantize(p, "nvfp4")
    _same_q(q, lofp.quantize(x, "nvfp4"))
    assert q.dtype == "bfloat16" and p.deleted == 1
    y = lofp.dequantize(q)
    assert y.dtype == ml_dtypes.bfloat16


def test_ctypes_float16_and_explicit_compact_strides(rng):
    x = layer(rng, (4, 64)).astype(np.float16)
    p = CtypesProducer(x, code=2, bits=16, strides=(64, 1))
    _same_q(lofp.quantize(p, "mxfp8-e4m3"), lofp.quantize(x, "mxfp8-e4m3"))


def test_strided_cpu_array_is_copied_once_by_numpy(rng):
    base = layer(rng, (4, 128))
    # every other column of a [4, 128] array: strides (128, 2) elements
    p = NumpyProducer(base[:, ::2])
    q = lofp.quantize(p, "mxfp4")
    _same_q(q, lofp.quantize(np.ascontiguousarray(base[:, ::2]), "mxfp4"))
    assert len(p.calls) == 2  # read once by lofp (not readable in place), then converted by numpy


def test_float64_cpu_array_is_rounded_like_numpy(rng):
    x = layer(rng, (4, 64)).astype(np.float64)
    _same_q(lofp.quantize(NumpyProducer(x), "mxfp4"), lofp.quantize(x, "mxfp4"))


def test_unknown_major_version_is_refused_and_left_to_the_producer(rng):
    x = layer(rng, (4, 64))
    p = CtypesProducer(x, code=2, bits=32, major=2)
    with pytest.raises(lofp.Error, match=r"unsupported: x: DLPack major version 2 \(this build reads 1\)"):
        lofp.quantize(p, "mxfp4")
    assert capsule_name(p.capsules[0]) == "dltensor_versioned"  # not consumed
    gc.collect()
    assert p.deleted == 0


@pytest.mark.parametrize("flags,message", [(READ_ONLY, "out is read-only"),
                                           (IS_COPIED, "out was copied by its DLPack producer")])
def test_output_flags_are_honoured(rng, flags, message):
    x = layer(rng, (4, 64))
    q = lofp.quantize(x, "mxfp4")
    y = np.zeros((4, 64), np.float32)
    p = CtypesProducer(y, code=2, bits=32, flags=flags)
    with pytest.raises(lofp.Error, match=message):
        lofp.dequantize(q, out=p)
    assert not y.any()
    gc.collect()
    assert p.deleted == p.exported >= 1  # every capsule consumed was freed by lofp, once


def test_read_only_input_is_fine(rng):
    x = layer(rng, (4, 64))
    _same_q(lofp.quantize(CtypesProducer(x, code=2, bits=32, flags=READ_ONLY), "mxfp4"), lofp.quantize(x, "mxfp4"))


def test_strided_output_is_refused(rng):
    q = lofp.quantize(layer(rng, (4, 64)), "mxfp4")
    y = np.zeros((4, 128), np.float32)
    p = CtypesProducer(y, code=2, bits=32, shape=(4, 64), strides=(128, 2))
    with pytest.raises(lofp.Error, match="out is not C-contiguous"):
        lofp.dequantize(q, out=p)


def test_unsupported_dtype_and_not_a_capsule(rng):
    x = layer(rng, (4, 64))
    with pytest.raises(lofp.Error, match="x has dtype int32"):
        lofp.quantize(NumpyProducer(x.astype(np.int32)), "mxfp4")

    class Bad:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            return 42

    with pytest.raises(lofp.Error, match="x: __dlpack__ returned something that is not an unconsumed DLPack capsule"):
        lofp.quantize(Bad(), "mxfp4")


def test_wrong_device_is_refused_before_export(rng):
    x = layer(rng, (4, 64))
    sch = lofp.scheme("mxfp4")
    codes, scales = np.empty((4, 32), np.uint8), np.empty((4, 2), np.uint8)
    p = CtypesProducer(x, code=2, bits=32, device=(2, 0))  # claims to be on CUDA
    with pytest.raises(lofp.Error, match="x is on DLPack device type 2, expected the CPU"):
        lofp._lofp.quantize(sch.blob, 1, p, 4, 64, codes, scales, None, 1)
    assert p.exported == 0
    rocm = CtypesProducer(x, code=2, bits=32, device=(10, 0))
    with pytest.raises(lofp.Error, match="unsupported: x is on DLPack device type 10"):
        lofp.quantize(rocm, "mxfp4")
    assert rocm.exported == 0


def test_foreign_cuda_array_without_torch_is_refused(rng):
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed: test_torch.py runs CUDA arrays of other producers")
    except ImportError:
        pass
    p = CtypesProducer(layer(rng, (4, 64)), code=2, bits=32, device=(2, 0))
    with pytest.raises(lofp.Error, match="unsupported: x is a CUDA array of a DLPack producer other than torch"):
        lofp.quantize(p, "mxfp4")
    assert p.exported == 0


def test_dltensor_object(rng):
    x = layer(rng, (4, 64))
    p = CtypesProducer(x, code=2, bits=32)
    h = lofp._lofp.from_dlpack(p, "x")
    assert h.shape == (4, 64) and h.dtype == (2, 32, 1) and h.device == (1, 0)
    assert h.info["nbytes"] == x.nbytes and h.info["contiguous"] and h.info["versioned"]
    assert p.deleted == 0
    h.release()
    assert p.deleted == 1
    with pytest.raises(ValueError, match="released"):
        h.shape
    del h
    gc.collect()
    assert p.deleted == 1  # never twice
    with pytest.raises(TypeError):
        lofp._lofp.DLTensor()
