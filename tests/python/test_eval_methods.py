"""lofp eval --methods (docs/EVAL.md, docs/QUALITY.md): each method beside round-to-nearest on
glassllm, with the statistics of lofp calibrate. Oracles: every weight eval fake-quantizes with
GPTQ / MSE equals lofp.quantize given that layer's statistics as the calibration file stores them
(sum / tokens, read here with safetensors, not through lofp); GPTQ's Hessian-weighted error and
MSE's weighted error are below round-to-nearest's for every layer."""
import numpy as np
import pytest
from safetensors.numpy import load_file

import _eval_setup  # noqa: F401  (python/ on sys.path, BLAS threads)
import lofp
from lofp import calibrate as C
from lofp.eval import runner
from lofp.eval.backend import get_backend
from lofp.eval.cli import main as eval_main


@pytest.fixture(scope="module")
def glass_and_calib(tmp_path_factory):
    pytest.importorskip("glassllm")
    from lofp.eval.glassllm import GlassLLM
    m = GlassLLM.from_package("en")
    path = tmp_path_factory.mktemp("calib") / "glass.calib.safetensors"
    C.write(path, C.calibrate(m, samples=2))
    return m, path


def _mean(raw, name):
    return (raw[name + ".xtx"].astype(np.float64) / float(raw[name + ".tokens"][0])).astype(np.float32)


def test_methods_rows_and_their_weights(glass_and_calib):
    m, path = glass_and_calib
    raw = load_file(str(path))
    cal = C.open_calibration(path)
    be = get_backend()
    rtn = runner.Variant("mxfp4")
    for method in ("mse", "gptq"):
        v = runner.Variant("mxfp4", method=method)
        qw, _, _ = runner.quantize_model(m, be, v, cal, {"damp": 0.01, "act_order": False})
        q0, _, _ = runner.quantize_model(m, be, rtn)
        for name, w in m.linear_weights().items():
            h = _mean(raw, name)
            kw = {"hessian": h} if method == "gptq" else {"importance": np.ascontiguousarray(np.diag(h))}
            want = lofp.dequantize(lofp.quantize(w, "mxfp4", pad=True, method=method, **kw), dtype="float32")
            assert np.array_equal(np.asarray(want), qw[name]), f"{method} {name}: eval's weights differ"
            d, d0 = (w - qw[name]).astype(np.float64), (w - q0[name]).astype(np.float64)
            if method == "gptq":
                loss, loss0 = np.einsum("ij,jk,ik->", d, h, d), np.einsum("ij,jk,ik->", d0, h, d0)
            else:
                loss, loss0 = (d * d * np.diag(h)).sum(), (d0 * d0 * np.diag(h)).sum()
            assert loss < loss0, f"{method} {name}: weighted error {loss:.4g} not below RTN's {loss0:.4g}"


def test_cli_methods_table(glass_and_calib, capsys):
    _, path = glass_and_calib
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--methods", "rtn,mse,gptq", "--mse-scales",
                      "--calibration", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    for label in ("mxfp4 ", "mxfp4 mse", "mxfp4 gptq", "quant s"):
        assert label in out, out


def test_cli_refusals(capsys):
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--methods", "gptq"]) == 2
    assert "--calibration" in capsys.readouterr().err
    assert eval_main(["glassllm", "--schemes", "mxfp4", "--methods", "bogus"]) == 2
