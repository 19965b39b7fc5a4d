"""lofp: block-scaled low-precision numbers (NVFP4, the OCP MX family, UltraQuant FP4 KV cache).

The Python face of the lofp C library: bit-exact quantize / dequantize over numpy arrays and torch
tensors (CPU and CUDA), element codecs, the scale layouts GPU kernels read, CPU GEMM with quantized
weights, the UltraQuant paged KV cache, and .safetensors / .npy files. See docs/PYTHON.md.

    >>> import numpy as np, lofp
    >>> q = lofp.quantize(np.ones((4, 32), np.float32), "mxfp4")
    >>> lofp.dequantize(q, "float32")[0, :4]
    array([1., 1., 1., 1.], dtype=float32)

Errors are lofp.Error (a ValueError) with the library's status name and, for bad values, the
flat index. lofp.torch (imported on demand) registers the kernels as torch custom operators.
"""
from . import _lofp
from ._lofp import Error
from ._core import (LAYOUTS, ROUNDINGS, SCHEMES, QTensor, Scheme, decode, dequantize, elem_info, encode, hadamard,
                    kernel_name, nvfp4_global_scale, quantize, replace, scheme)
from ._gemm import CudaWeight, PackedWeight, VerifyResult, cuda_weight, gemm, gemm_reference, pack_weight, verify_gemm
from ._io import load, save
from . import kv, layout
from .checkpoint import (Checkpoint, CheckpointReport, convert, import_checkpoint, open_checkpoint,
                         verify_checkpoint, check_checkpoint, CheckpointVerifyReport)

__version__ = _lofp.version()
HAVE_CUDA = bool(_lofp.HAVE_CUDA)


def cuda_device_count() -> int:
    """CUDA devices the lofp CUDA backend can use (0 without the backend, a driver or a GPU)."""
    return _lofp.cuda_device_count() if HAVE_CUDA else 0


__all__ = [
    "Error", "QTensor", "Scheme", "scheme", "quantize", "dequantize", "encode", "decode", "elem_info", "hadamard",
    "kernel_name", "nvfp4_global_scale", "replace", "gemm", "gemm_reference", "pack_weight", "PackedWeight",
    "cuda_weight", "CudaWeight", "verify_gemm", "VerifyResult", "load", "save", "kv", "layout", "SCHEMES",
    "LAYOUTS", "ROUNDINGS", "HAVE_CUDA", "cuda_device_count", "__version__", "convert", "import_checkpoint",
    "open_checkpoint", "verify_checkpoint", "check_checkpoint", "Checkpoint", "CheckpointReport", "CheckpointVerifyReport",
]
