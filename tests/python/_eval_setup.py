"""Shared setup of the lofp.eval tests: python/ on sys.path, the backend (liblofp.so from
$LOFP_LIBRARY, which tests/script_eval.sh sets to the build being tested, or the lofp package)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
try:  # the package under test (PYTHONPATH), else the source tree
    import lofp.eval  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))
GOLDEN = ROOT / "tests" / "golden" / "eval"

from lofp.eval.backend import get_backend  # noqa: E402
from lofp.eval.cli import limit_blas_threads  # noqa: E402

if not (os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
    limit_blas_threads(1)  # small matrices; spinning BLAS threads only slow a busy machine


def backend():
    return get_backend()
