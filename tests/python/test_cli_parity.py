"""lofp.quantize / dequantize / save / load / layout against the lofp command of the same build:
the same tensor quantized by both must give byte-identical files, and dequantized by both
bit-identical values."""
import ml_dtypes
import numpy as np
import pytest

import lofp
from conftest import layer, run_cli

SCHEMES = list(lofp.SCHEMES)
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}

# (scheme, python options, CLI options)
OPTIONS = [
    ("nvfp4", {"rounding": "ties-to-zero"}, ["--rounding", "ties-to-zero"]),
    ("nvfp4", {"two_level": False}, ["--one-level"]),
    ("nvfp4", {"scale_layout": "swizzle-128x4"}, ["--scale-layout", "swizzle-128x4"]),
    ("mxfp4", {"scale_rule": "rceil"}, ["--scale-rule", "rceil"]),
    ("mxfp4", {"scale_rule": "even", "block": 64}, ["--scale-rule", "even", "--block", "64"]),
    ("mxfp8-e4m3", {"scale_rule": "ceil", "scale_layout": "packed-u32"}, ["--scale-rule", "ceil", "--scale-layout", "packed-u32"]),
    ("mxfp8-e4m3", {"scale_layout": "packed-u32:deepgemm", "pad_byte": 7}, ["--scale-layout", "packed-u32:deepgemm", "--pad-byte", "7"]),
    ("mxfp6-e2m3", {"rounding": "stochastic", "seed": 99}, ["--rounding", "stochastic", "--seed", "99"]),
    ("mxint8", {"rounding": "ties-away"}, ["--rounding", "ties-away"]),
    ("ultraquant", {"rotate": False}, ["--no-rotate"]),
    ("ultraquant", {"hadamard": "dense", "c": 0.2}, ["--dense-hadamard", "--c", "0.2"]),
    ("tilelang-mxfp8", {"scale_layout": "packed-u32"}, ["--scale-layout", "packed-u32"]),
]


def _cli_quantize(cli, tmp_path, x, name, scheme, cli_opts):
    src = tmp_path / "in.safetensors"
    lofp.save(src, {name: x})
    out = tmp_path / "cli.safetensors"
    run_cli(cli, "quantize", "--scheme", scheme, *cli_opts, src, out)
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_quantize_file_identical_to_cli(cli, tmp_path, rng, scheme, dtype):
    x = layer(rng, (3, 4, 128)).astype(DTYPES[dtype])
    cli_file = _cli_quantize(cli, tmp_path, x, "w", scheme, [])
    q = lofp.quantize(x, scheme)
    py_file = tmp_path / "py.safetensors"
    lofp.save(py_file, {"w": q})
    back = lofp.load(cli_file)["w"]
    np.testing.assert_array_equal(back.codes, q.codes)
    np.testing.assert_array_equal(back.scales.view(np.uint8), q.scales.view(np.uint8))
    assert back.global_scale == q.global_scale
    assert py_file.read_bytes() == cli_file.read_bytes()


@pytest.mark.parametrize("scheme,opts,cli_opts", OPTIONS, ids=[f"{s}-{'-'.join(map(str, o.values()))}" for s, o, _ in OPTIONS])
def test_options_identical_to_cli(cli, tmp_path, rng, scheme, opts, cli_opts):
    x = layer(rng, (40, 256))
    cli_file = _cli_quantize(cli, tmp_path, x, "layer.w", scheme, cli_opts)
    q = lofp.quantize(x, scheme, **opts)
    py_file = tmp_path / "py.safetensors"
    lofp.save(py_file, {"layer.w": q})
    assert py_file.read_bytes() == cli_file.read_bytes()


PROFILES = [
    ("nvfp4", "modelopt", {}, []),
    ("nvfp4", "compressed-tensors", {}, []),
    ("nvfp4", "torchao", {}, []),
    ("mxfp8-e4m3", "torchao", {"scale_rule": "rceil"}, ["--scale-rule", "rceil"]),
    ("mxfp4", "modelopt", {}, []),
    ("mxfp4", "ggml", {}, []),
]


@pytest.mark.parametrize("scheme,profile,opts,cli_opts", PROFILES, ids=[f"{s}-{p}" for s, p, _, _ in PROFILES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_profiles_identical_to_cli(cli, tmp_path, rng, scheme, profile, opts, cli_opts, dtype):
    x = layer(rng, (16, 256)).astype(DTYPES[dtype])
    cli_file = _cli_quantize(cli, tmp_path, x, "w", scheme, ["--profile", profile] + cli_opts)
    q = lofp.quantize(x, scheme, profile=profile, **opts)
    assert q.profile == profile
    lofp.save(tmp_path / "py.safetensors", {"w": q})
    assert (tmp_path / "py.safetensors").read_bytes() == cli_file.read_bytes()
    back = lofp.load(cli_file)["w"]
    assert back.profile == profile
    run_cli(cli, "dequantize", cli_file, tmp_path / "d.npy")
    np.testing.assert_array_equal(lofp.dequantize(back, "float32").view(np.uint32), np.load(tmp_path / "d.npy").view(np.uint32))
    if scheme == "nvfp4" and profile in ("modelopt", "torchao"):
        assert q.decode_scale == q.global_scale   # decode direction
    with pytest.raises(lofp.Error, match="unknown profile 'onnx'"):
        lofp.quantize(x, scheme, profile="onnx")


def test_pad_identical_to_cli(cli, tmp_path, rng):
    x = layer(rng, (5, 100))
    cli_file = _cli_quantize(cli, tmp_path, x, "w", "mxfp4", ["--pad"])
    q = lofp.quantize(x, "mxfp4", pad=True)
    assert q.codes.shape == (5, 64) and q.padded_k == 128
    lofp.save(tmp_path / "py.safetensors", {"w": q})
    assert (tmp_path / "py.safetensors").read_bytes() == cli_file.read_bytes()


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("out", ["f32", "bf16", "f16"])
def test_dequantize_identical_to_cli(cli, tmp_path, rng, scheme, out):
    x = layer(rng, (6, 256))
    q = lofp.quantize(x, scheme, scale_layout="swizzle-128x4" if scheme == "nvfp4" else "linear")
    lofp.save(tmp_path / "q.safetensors", {"w": q})
    if out == "bf16":  # numpy has no bf16: through a .safetensors file
        run_cli(cli, "dequantize", "--dtype", out, tmp_path / "q.safetensors", tmp_path / "d.safetensors")
        ref = lofp.load(tmp_path / "d.safetensors")["w"]
    else:
        run_cli(cli, "dequantize", "--dtype", out, tmp_path / "q.safetensors", tmp_path / "d.npy")
        ref = np.load(tmp_path / "d.npy")
    got = lofp.dequantize(q, {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[out])
    assert got.shape == x.shape
    ref_bits = ref.view(np.uint32 if out == "f32" else np.uint16)
    got_bits = got.view(np.uint32 if out == "f32" else np.uint16)
    np.testing.assert_array_equal(got_bits, ref_bits)


@pytest.mark.parametrize("to", ["swizzle-128x4", "packed-u32", "packed-u32:deepgemm", "linear"])
def test_layout_convert_identical_to_cli(cli, tmp_path, rng, to):
    x = layer(rng, (130, 256))
    q = lofp.quantize(x, "mxfp8-e4m3", scale_layout="swizzle-128x4")
    lofp.save(tmp_path / "q.safetensors", {"w": q})
    run_cli(cli, "layout", "convert", "--to", to, tmp_path / "q.safetensors", tmp_path / "c.safetensors")
    q2 = lofp.layout.convert(q, to)
    lofp.save(tmp_path / "p.safetensors", {"w": q2})
    assert (tmp_path / "p.safetensors").read_bytes() == (tmp_path / "c.safetensors").read_bytes()
    # and back to linear gives the original scales
    lin = lofp.layout.convert(q2, "linear")
    np.testing.assert_array_equal(lin.scales.view(np.uint8),
                                  lofp.quantize(x, "mxfp8-e4m3").scales.view(np.uint8))


@pytest.mark.parametrize("written,block,alt", [("swizzle-128x4", 32, 0), ("packed-u32", 32, 0),
                                               ("packed-u32:deepgemm", 128, 32), ("linear", 32, 0)])
def test_diagnose_identical_to_cli(cli, tmp_path, rng, written, block, alt):
    x = layer(rng, (64, 512))
    q = lofp.quantize(x, "mxfp8-e4m3", scale_layout=written, scale_rule="rceil")
    raw = np.ascontiguousarray(q.scales).view(np.uint8).reshape(-1)
    np.save(tmp_path / "s.npy", raw)
    np.save(tmp_path / "x.npy", x)
    args = ["layout", "diagnose", tmp_path / "s.npy", "--tensor", tmp_path / "x.npy", "--scheme", "mxfp8-e4m3",
            "--scale-rule", "rceil", "--block", block]
    if alt:
        args += ["--alt-block", alt]
    r = run_cli(cli, *args, ok=(0, 1))
    d = lofp.layout.diagnose(raw, x, "mxfp8-e4m3", block=block, alt_block=alt or None, scale_rule="rceil")
    assert d.evidence in r.stdout
    assert str(d).splitlines()[-1] in r.stdout
    assert (r.returncode == 0) == d.matches
    if not alt:
        assert d.matches and d.layout == written


def test_load_reads_cli_file_with_passthrough(cli, tmp_path, rng):
    import safetensors.numpy
    x = layer(rng, (8, 64))
    norm = rng.standard_normal(64).astype(np.float32)
    safetensors.numpy.save_file({"mlp.w": x, "norm": norm}, str(tmp_path / "in.safetensors"), metadata={"origin": "test"})
    run_cli(cli, "quantize", "--scheme", "nvfp4", "--include", "mlp.*", tmp_path / "in.safetensors", tmp_path / "q.safetensors")
    d = lofp.load(tmp_path / "q.safetensors")
    assert set(d) == {"mlp.w", "norm", "__metadata__"}
    assert d["__metadata__"] == {"origin": "test"}
    np.testing.assert_array_equal(d["norm"], norm)
    q = d["mlp.w"]
    ref = lofp.quantize(x, "nvfp4")
    np.testing.assert_array_equal(q.codes, ref.codes)
    assert q.global_scale == ref.global_scale


def test_python_m_lofp_version_and_no_command(cli, tmp_path):
    """python -m lofp answers --version itself and refuses the command's other commands without
    running the lofp command (a fake one on PATH and in LOFP_CLI would leave a mark)."""
    import os
    import subprocess
    import sys
    mark = tmp_path / "ran"
    fake = tmp_path / "lofp"
    fake.write_text(f"#!/bin/sh\ntouch {mark}\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ.get('PATH', '')}", LOFP_CLI=str(fake))
    r = subprocess.run([sys.executable, "-m", "lofp", "--version"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == f"lofp {lofp.__version__}"
    r = subprocess.run([sys.executable, "-m", "lofp", "inspect", "x.safetensors"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 2 and "lofp command" in r.stderr
    assert not mark.exists()
