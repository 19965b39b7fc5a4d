"""lofp tensor files through the Python package: lofp.load and lofp.save go through the C library's
one owner of the "lofp:NAME" convention (lofp/qfile.h), so a file whose metadata lies about its
stored tensors is refused with the file and tensor named (the hostile files of
tests/cli/qfile_hostile.py: wrong shapes, scale layouts, padded K, sizes that overflow), and the metadata bytes stay those lofp has always
written."""
import importlib.util
import os
import pathlib

import numpy as np
import pytest

import lofp

_SRC = pathlib.Path(os.environ.get("LOFP_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
_spec = importlib.util.spec_from_file_location("qfile_hostile", _SRC / "tests" / "cli" / "qfile_hostile.py")
hostile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hostile)


@pytest.mark.parametrize("case", sorted(hostile.CASES))
def test_lying_metadata_is_refused(tmp_path, case):
    tensors, value, needle = hostile.CASES[case]
    p = tmp_path / f"{case}.safetensors"
    hostile.write_st(str(p), tensors, {"lofp:w": value, "format": "pt"})
    with pytest.raises(lofp.Error) as ei:
        lofp.load(p)
    msg = str(ei.value)
    assert ei.value.status in ("malformed data", "not found"), msg
    assert f"{case}.safetensors" in msg and "'w" in msg and needle in msg, msg


def test_metadata_bytes_are_pinned(tmp_path):
    """The value lofp has written since its first release, byte for byte, and a file carrying the
    literal value of an earlier version still reads."""
    x = np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64)
    q = lofp.quantize(x, "mxfp4")
    v = lofp.__version__
    want = ("scheme=mxfp4;rounding=rne;scale_rule=floor;block=32;layout=linear;pad_byte=0;shape=[4,64];padded_k=64;"
            f"two_level=0;c=0.156000003;rotate=0;hadamard=butterfly;seed=0;source_dtype=F32;lofp_version={v}")
    p = tmp_path / "q.safetensors"
    lofp.save(p, {"w": q})
    got = lofp.load(p)
    assert got["w"].layout == "linear" and tuple(got["w"].shape) == (4, 64)
    import safetensors
    with safetensors.safe_open(str(p), "np") as f:
        assert f.metadata()["lofp:w"] == want
    # an earlier version's file (another lofp_version, no seed field) reads the same codes
    old = tmp_path / "old.safetensors"
    hostile.write_st(str(old), {"w.codes": ("U8", [4, 32], np.asarray(q.codes).tobytes()),
                                "w.scales": ("F8_E8M0", [4, 2], np.asarray(q.scales).view(np.uint8).tobytes())},
                     {"lofp:w": want.replace(f"lofp_version={v}", "lofp_version=0.0.1").replace("seed=0;", "")})
    back = lofp.load(old)["w"]
    np.testing.assert_array_equal(np.asarray(back.codes), np.asarray(q.codes))
    np.testing.assert_array_equal(lofp.dequantize(back), lofp.dequantize(q))
