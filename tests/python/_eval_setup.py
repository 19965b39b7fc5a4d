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


def backend():
    return get_backend()
