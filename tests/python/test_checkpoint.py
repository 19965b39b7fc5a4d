"""lofp.convert / import_checkpoint / open_checkpoint / check_checkpoint / verify_checkpoint against `lofp convert`
and `lofp import` of the same build (byte-identical directories), on the small llama model of
tests/checkpoint (written with numpy + safetensors)."""
import filecmp
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import lofp
from conftest import run_cli

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "checkpoint"))
ckpt_models = pytest.importorskip("ckpt_models")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama") / "model"
    ckpt_models.build_llama(str(d))
    return d


def _same_tree(a, b):
    fa = sorted(os.listdir(a))
    assert fa == sorted(os.listdir(b))
    for f in fa:
        assert filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False), f


@pytest.mark.parametrize("to,scheme", [("modelopt", None), ("modelopt", "mxfp8"), ("compressed-tensors", "mxfp4"),
                                       ("compressed-tensors", None)])
def test_convert_identical_to_cli(cli, tmp_path, llama, to, scheme):
    args = ["convert", "--to", to, "--quiet"] + (["--scheme", scheme] if scheme else []) + [llama, tmp_path / "cli"]
    run_cli(cli, *args)
    notes = lofp.convert(llama, tmp_path / "py", to, scheme)
    assert isinstance(notes, list)
    _same_tree(tmp_path / "cli", tmp_path / "py")


@pytest.mark.parametrize("to,scheme,profile", [("modelopt", None, "modelopt"), ("modelopt", "mxfp8", "modelopt"),
                                               ("compressed-tensors", None, "compressed-tensors"),
                                               ("modelopt", None, "lofp")])
def test_convert_profile_identical_to_cli(cli, tmp_path, llama, to, scheme, profile):
    args = ["convert", "--to", to, "--quiet", "--profile", profile] + (["--scheme", scheme] if scheme else [])
    run_cli(cli, *args, llama, tmp_path / "cli")
    lofp.convert(llama, tmp_path / "py", to, scheme, profile=profile)
    _same_tree(tmp_path / "cli", tmp_path / "py")


def test_convert_profile_refused(tmp_path, llama):
    with pytest.raises(lofp.Error, match="--to modelopt"):
        lofp.convert(llama, tmp_path / "x", "compressed-tensors", profile="modelopt")
    with pytest.raises(lofp.Error, match="unknown profile"):
        lofp.convert(llama, tmp_path / "y", "modelopt", profile="nvidia")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_import_and_read_identical_to_cli(cli, tmp_path, llama):
    lofp.convert(llama, tmp_path / "mo", "modelopt", exclude=["*.v_proj.*"])
    run_cli(cli, "import", "--dtype", "bf16", tmp_path / "mo", tmp_path / "cli")
    lofp.import_checkpoint(tmp_path / "mo", tmp_path / "py", "bfloat16")
    _same_tree(tmp_path / "cli", tmp_path / "py")
    c = lofp.open_checkpoint(tmp_path / "mo")
    assert c.format == "modelopt" and "NVFP4" in c.description.upper()
    name = "model.layers.0.mlp.up_proj.weight"
    assert name in c
    info = c.info(name)
    assert info["quantized"] and info["scheme"] == "nvfp4" and info["direction"] == "decode"
    imported = lofp.load(next(p for p in (tmp_path / "cli").iterdir() if p.suffix == ".safetensors"))
    if name in imported:
        np.testing.assert_array_equal(c.dequantize(name, "bfloat16").view(np.uint16), imported[name].view(np.uint16))
    q = c.get(name)
    assert isinstance(q, lofp.QTensor) and q.shape == info["shape"]
    # the QTensor is in lofp's convention: its global is the encode multiplier of the stored decode scale
    assert np.float32(q.global_scale) == np.float32(lofp._lofp.encode_from_decode(info["stored_scale"]))
    dense = c.get("model.norm.weight")
    assert dense.dtype == ml_dtypes.bfloat16
    r = lofp.check_checkpoint(tmp_path / "mo")
    assert r.format == "modelopt" and r.quantized > 0 and r.tensors == len(c)


def test_checkpoint_errors(tmp_path, llama):
    with pytest.raises(lofp.Error, match="not found: unknown checkpoint format 'onnx'"):
        lofp.convert(llama, tmp_path / "x", "onnx")
    with pytest.raises(lofp.Error) as ei:
        lofp.open_checkpoint(tmp_path / "missing")
    assert "missing" in str(ei.value)
    with pytest.raises(lofp.Error, match="import dtype"):
        lofp.import_checkpoint(llama, tmp_path / "y", "int8")
    # a ModelOpt checkpoint without its weight_scale_2 is refused by name
    import json
    lofp.convert(llama, tmp_path / "mo", "modelopt", fuse_scales=False)
    files = [p for p in (tmp_path / "mo").iterdir() if p.suffix == ".safetensors"]
    for p in files:
        t = lofp.load(p)
        meta = t.pop("__metadata__", None)
        key = next((k for k in t if k.endswith("weight_scale_2")), None)
        if key:
            del t[key]
            lofp.save(p, t, meta)
            idx = tmp_path / "mo" / "model.safetensors.index.json"
            if idx.exists():
                j = json.loads(idx.read_text())
                j["weight_map"].pop(key, None)
                idx.write_text(json.dumps(j))
            break
    with pytest.raises(lofp.Error) as ei:
        lofp.check_checkpoint(tmp_path / "mo")
    assert key.rsplit(".", 1)[0] in str(ei.value)


def test_convert_quantized_input_identical_to_cli(cli, tmp_path, llama):
    """An already-quantized input goes through the exact casts, from Python as from the CLI."""
    lofp.convert(llama, tmp_path / "mo", "modelopt")
    run_cli(cli, "convert", "--to", "compressed-tensors", "--quiet", tmp_path / "mo", tmp_path / "cli")
    notes = lofp.convert(tmp_path / "mo", tmp_path / "py", "compressed-tensors")
    assert any("codes and block scales unchanged" in n for n in notes), notes
    _same_tree(tmp_path / "cli", tmp_path / "py")
    # NVFP4 -> MXFP4 has no exact path: refused, naming the way back
    with pytest.raises(lofp.Error, match="lofp import"):
        lofp.convert(tmp_path / "mo", tmp_path / "x", "gpt-oss")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("quiet", [False, True])
def test_verify_checkpoint_equals_cli(cli, tmp_path, llama, quiet):
    lofp.convert(llama, tmp_path / "mo", "modelopt", exclude=["*.v_proj.*"])
    args = ["verify-checkpoint"] + (["--quiet"] if quiet else []) + [llama, tmp_path / "mo"]
    r = run_cli(cli, *args, ok=(0, 1))
    v = lofp.verify_checkpoint(llama, tmp_path / "mo", quiet=quiet)
    want = [f"{tmp_path / 'mo'}: {v.description}"] + [f"  {l}" for l in v.lines] + \
        [f"{v.quantized} quantized tensors: {v.reproduced} reproduced bit for bit, {v.failed} not"]
    assert r.stdout.splitlines() == want
    assert (r.returncode == 0) == v.ok and v.quantized > 0
