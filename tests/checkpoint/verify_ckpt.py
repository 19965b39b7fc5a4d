"""`lofp verify-checkpoint ORIGINAL QUANTIZED` on checkpoints made by lofp convert, on ones whose
tensors a producer profile wrote (`lofp quantize --profile P`, patched in), and on deliberately
broken ones: it must name the producer, or the mistake."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ckpt_models import build_llama  # noqa: E402

LOFP = sys.argv[1]
T = "model.layers.0.self_attn.q_proj"      # [128, 128]: whole 128x4 swizzle tiles
U = "model.layers.0.mlp.gate_proj"         # [256, 128], fused with up_proj
failures = 0
passed = 0


def run(*args):
    return subprocess.run([LOFP, *args], capture_output=True, text=True)


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def find(d, name):
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            h, base = header(os.path.join(d, fn))
            if name in h:
                return os.path.join(d, fn), h[name], base
    raise KeyError(name)


def read(d, name):
    path, e, base = find(d, name)
    a, b = e["data_offsets"]
    with open(path, "rb") as f:
        f.seek(base + a)
        return np.frombuffer(f.read(b - a), np.uint8).copy(), e


def patch(d, name, data):
    path, e, base = find(d, name)
    a, b = e["data_offsets"]
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    assert data.size == b - a, (name, data.size, b - a)
    with open(path, "r+b") as f:
        f.seek(base + a)
        f.write(data.tobytes())


def expect(label, orig, q, rc, *needles, line_with=None):
    global failures, passed
    p = run("verify-checkpoint", orig, q)
    out = p.stdout + p.stderr
    ok = p.returncode == rc and all(n in out for n in needles)
    if line_with:
        ok = ok and any(line_with[0] in ln and line_with[1] in ln for ln in out.splitlines())
    if ok:
        passed += 1
        print(f"ok   {label}")
    else:
        failures += 1
        print(f"FAIL {label}: exit {p.returncode} (want {rc}); want {needles} in:\n{out}")


def swizzle(lin, rows, cols):
    # cuBLAS 128x4: within a 128x4 tile, byte (r, c) goes to (r % 32) * 16 + (r // 32) * 4 + c
    out = np.zeros(((rows + 127) // 128 * 128) * ((cols + 3) // 4 * 4), np.uint8)
    ct = (cols + 3) // 4
    for r in range(rows):
        for c in range(cols):
            tile = (r // 128) * ct + c // 4
            rr, cc = r % 128, c % 4
            out[tile * 512 + (rr % 32) * 16 + (rr // 32) * 4 + cc] = lin[r * cols + c]
    return out


with tempfile.TemporaryDirectory() as tmp:
    orig = os.path.join(tmp, "orig")
    build_llama(orig)
    for fmt in ("modelopt", "compressed-tensors"):
        q = os.path.join(tmp, fmt)
        p = run("convert", orig, q, "--to", fmt)
        assert p.returncode == 0, p.stderr
        expect(f"{fmt}: lofp convert output is lofp's numerics", orig, q, 0, "reproduced bit for bit by: lofp", " 0 not")
    q = os.path.join(tmp, "modelopt")
    mo, _ = read(q, T + ".weight")
    sc, _ = read(q, T + ".weight_scale")
    s2, _ = read(q, T + ".weight_scale_2")
    # tensors written by each producer profile, patched into the checkpoint of its format
    for prof, fmt, gname in (("modelopt", "modelopt", ".weight_scale_2"),
                             ("torchao", "modelopt", ".weight_scale_2"),
                             ("compressed-tensors", "compressed-tensors", ".weight_global_scale")):
        d = os.path.join(tmp, f"{prof}-made")
        shutil.copytree(os.path.join(tmp, fmt), d)
        out = os.path.join(tmp, f"{prof}.safetensors")
        p = run("quantize", "--scheme", "nvfp4", "--profile", prof, "--include", T + ".weight",
                os.path.join(orig, "model-00001-of-00002.safetensors"), out)
        assert p.returncode == 0, p.stderr
        h, base = header(out)
        with open(out, "rb") as f:
            raw = f.read()

        def get(n):
            a, b = h[n]["data_offsets"]
            return np.frombuffer(raw[base + a:base + b], np.uint8)
        wname = T + (".weight" if fmt == "modelopt" else ".weight_packed")
        patch(d, wname, get(T + ".weight.codes"))
        patch(d, T + ".weight_scale", get(T + ".weight.scales"))
        patch(d, T + gname, get(T + ".weight.global_scale"))
        expect(f"a tensor written by {prof} in a {fmt} checkpoint", orig, d, 0,
               line_with=(f"{T}.weight (nvfp4): reproduced bit for bit by: ", prof))
    # broken checkpoints
    d = os.path.join(tmp, "swapped")
    shutil.copytree(q, d)
    patch(d, T + ".weight", (mo << 4) | (mo >> 4))
    expect("swapped nibbles", orig, d, 1, "nibbles swapped")
    d = os.path.join(tmp, "swizzled")
    shutil.copytree(q, d)
    patch(d, T + ".weight_scale", swizzle(sc, 128, 8))
    expect("swizzled scales stored as linear", orig, d, 1, "swizzle-128x4 stored as linear")
    d = os.path.join(tmp, "shifted")
    shutil.copytree(q, d)
    patch(d, T + ".weight", np.roll(mo.reshape(128, 64), -16, axis=0))
    patch(d, T + ".weight_scale", np.roll(sc.reshape(128, 8), -16, axis=0))
    expect("a shard shifted by 16 rows", orig, d, 1, "rows shifted by 16")
    d = os.path.join(tmp, "inverted")
    shutil.copytree(q, d)
    patch(d, T + ".weight_scale_2", np.array([1.0 / s2.view(np.float32)[0]], np.float32))
    expect("inverted per-tensor scale", orig, d, 1, "inverted")
    d = os.path.join(tmp, "garbage")
    shutil.copytree(q, d)
    patch(d, U + ".weight", np.random.default_rng(1).integers(0, 256, 256 * 64, dtype=np.uint8))
    expect("garbage codes", orig, d, 1, "no producer reproduces it")
print(f"{passed} passed, {failures} failed")
sys.exit(1 if failures else 0)
