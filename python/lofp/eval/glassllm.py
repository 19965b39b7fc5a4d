"""glassllm (PyPI `glassllm`): a 4-layer decoder-only LM, GQA, SwiGLU, RoPE on adjacent pairs,
RMSNorm, tied embeddings, a character BPE tokenizer. Weights `[in, out]` (`x @ W`), fp16 in the
file, run in fp32. The numpy forward below does the same operations in the same order and precision
as the package (float64 activations: its scalar constants are float64 arrays, which promote), so
its logits equal the package's bit for bit (tests/python/test_eval_glassllm.py)."""
from __future__ import annotations

import importlib.util
import json
import math
import re
import unicodedata
from pathlib import Path

import numpy as np

from .model_base import KeptTensor, Model, ModelInfo, split_windows
from . import texts

SPACE = "\u2581"
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
_PIECES = re.compile("\n|" + SPACE + "*[^" + SPACE + "\n]+|" + SPACE + "+")


class CharBPE:
    """The glassllm tokenizer format: {"alphabet": [...], "merges": [[a, b], ...]}; ids are the
    four specials, then the alphabet, then one id per merge."""

    def __init__(self, alphabet, merges):
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: i for i, m in enumerate(self.merges)}
        vocab = SPECIALS + list(alphabet) + [a + b for a, b in self.merges]
        self.vocab = vocab
        self.ids = {t: i for i, t in enumerate(vocab)}
        self.unk = self.ids["<unk>"]
        self._memo: dict[str, list[str]] = {}

    @classmethod
    def load(cls, path):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(data["alphabet"], data["merges"])

    def _pieces(self, chunk: str) -> list[str]:
        hit = self._memo.get(chunk)
        if hit is not None:
            return hit
        sym = list(chunk)
        while len(sym) > 1:
            best = None
            for i in range(len(sym) - 1):
                r = self.rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, self.merges[r])
            if best is None:
                break
            a, b = best[1]
            merged, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(sym[i])
                    i += 1
            sym = merged
        self._memo[chunk] = sym
        return sym

    def encode(self, text: str) -> list[int]:
        text = unicodedata.normalize("NFC", text).replace(" ", SPACE)
        return [self.ids.get(p, self.unk) for c in _PIECES.findall(text) for p in self._pieces(c)]


def package_dir() -> Path | None:
    spec = importlib.util.find_spec("glassllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "weights"


def _rope_tables(d_k: int, max_len: int, base: float):
    i = np.arange(d_k // 2)
    theta = base ** (-2.0 * i / d_k)
    ang = np.outer(np.arange(max_len), theta)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _rope(x, cos, sin):
    xe, xo = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = xe * cos - xo * sin
    out[..., 1::2] = xe * sin + xo * cos
    return out


def _rmsnorm(x, gamma, eps):
    # As the package: a sum divided by a float64 count, eps a float64 0-d array. This makes the
    # first normalised activations float64, and the whole forward runs in float64 from there
    # (the weights are fp16 values held in float32 and promoted at each product).
    ms = (x * x).sum(axis=-1, keepdims=True) / np.float64(x.shape[-1])
    return x / (ms + np.float64(eps)) ** 0.5 * gamma


def _softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _silu(x):
    e = np.exp(-np.abs(x))
    return x * np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_NEG_INF64 = np.asarray(-np.inf, dtype=np.float64)

LINEAR = ("attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O", "ffn.W1", "ffn.W3", "ffn.W2")


class GlassLLM(Model):
    def __init__(self, weights_path, tokenizer_path, name="glassllm", lang="en"):
        with np.load(weights_path) as data:
            self.cfg = json.loads(str(data["__config__"]))
            self.p = {k: data[k].astype(np.float32) for k in data.files if k != "__config__"}
        self.tok = CharBPE.load(tokenizer_path)
        if len(self.tok.vocab) != self.cfg["vocab_size"]:
            raise ValueError(f"{tokenizer_path}: vocabulary {len(self.tok.vocab)} != model "
                             f"{self.cfg['vocab_size']}")
        c = self.cfg
        self.d_k = c["d_model"] // c["n_heads"]
        self.cos, self.sin = _rope_tables(self.d_k, c["max_len"], c["rope_base"])
        self.lang = lang
        n = sum(v.size for v in self.p.values())
        self.info = ModelInfo(name=name, kind="lm", source=str(weights_path), params=n, notes=[
            f"{c['n_layers']} layers, d {c['d_model']}, {c['n_heads']} heads / "
            f"{c['n_kv_heads']} KV heads (head dim {self.d_k}), ffn "
            f"{self.p['blocks.0.ffn.W1'].shape[1]}, vocab {c['vocab_size']}, "
            f"context {c['max_len']}"])

    @classmethod
    def from_package(cls, lang="en"):
        base = package_dir()
        if base is None:
            raise FileNotFoundError("the glassllm package is not installed "
                                    "(pip install glassllm)")
        return cls(base / f"{lang}.npz", base / f"{lang}.tokenizer.json",
                   name=f"glassllm-{lang}", lang=lang)

    @classmethod
    def from_dir(cls, path, lang=None):
        path = Path(path)
        cands = sorted(path.glob("*.npz"))
        if lang is not None:
            cands = [p for p in cands if p.stem == lang]
        for npz in cands:
            tj = npz.with_name(npz.stem + ".tokenizer.json")
            if tj.is_file():
                return cls(npz, tj, name=f"glassllm-{npz.stem}", lang=npz.stem)
        raise FileNotFoundError(f"{path}: no <name>.npz with <name>.tokenizer.json")

    # -- Model interface --------------------------------------------------------------------------

    def linear_weights(self):
        out = {}
        for i in range(self.cfg["n_layers"]):
            for n in LINEAR:
                key = f"blocks.{i}.{n}"
                out[key] = np.ascontiguousarray(self.p[key].T)
        return out

    def kept_tensors(self):
        kept = [KeptTensor("E", self.p["E"].shape, "embedding (tied with the output projection)")]
        for k, v in self.p.items():
            if v.ndim == 1:
                kept.append(KeptTensor(k, v.shape, "norm (1-D)"))
        return kept

    def text(self, text=None):
        if text is not None:
            return text
        return texts.PORTUGUESE if self.lang == "pt" else texts.ENGLISH

    def inputs(self, text=None):
        ids = self.tok.encode(self.text(text))
        return split_windows(ids, self.cfg["max_len"])

    def max_seq_len(self):
        return int(self.cfg["max_len"])

    def forward(self, inputs, weights=None, kv=None, backend=None, observe=None, act=None):
        w = dict(self.p)
        if weights:
            for k, v in weights.items():
                w[k] = np.ascontiguousarray(v.T)  # back to [in, out]
        return [self._forward_one(ids, w, kv, backend, observe, act) for ids in inputs]

    def _forward_one(self, ids, w, kv, backend, observe=None, act=None):
        def see(names, a):
            """The input of blocks.i.<name> for each name (one array): act(a) under act, shown
            to observe as [tokens, k]."""
            if act is not None:
                a = act(a)
            if observe is not None:
                a2 = a.reshape(-1, a.shape[-1])
                for nm in names:
                    observe(nm, a2)
            return a

        c = self.cfg
        H, Hk, dk, eps = c["n_heads"], c["n_kv_heads"], self.d_k, c["eps"]
        n = len(ids)
        x = w["E"][np.asarray(ids)[None, :]]  # [1, n, d]
        cos, sin = self.cos[:n], self.sin[:n]
        mask = np.arange(n)[None, :] > np.arange(n)[:, None]
        for i in range(c["n_layers"]):
            b = f"blocks.{i}."
            h = _rmsnorm(x, w[b + "norm1.gamma"], eps)
            h = see([b + "attn.W_Q", b + "attn.W_K", b + "attn.W_V"], h)
            q = (h @ w[b + "attn.W_Q"]).reshape(1, n, H, dk).transpose(0, 2, 1, 3)
            k = (h @ w[b + "attn.W_K"]).reshape(1, n, Hk, dk).transpose(0, 2, 1, 3)
            v = (h @ w[b + "attn.W_V"]).reshape(1, n, Hk, dk).transpose(0, 2, 1, 3)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            if kv is None:
                rep = H // Hk
                ka, va = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
                s = (q @ ka.transpose(0, 1, 3, 2)) / math.sqrt(dk)
                s = np.where(mask, _NEG_INF64, s)
                mixed = _softmax(s) @ va
            else:
                o = backend.attention(q[0].transpose(1, 0, 2), k[0].transpose(1, 0, 2),
                                      v[0].transpose(1, 0, 2), 1.0 / math.sqrt(dk), True, kv)
                mixed = o.transpose(1, 0, 2)[None]
            cat = mixed.transpose(0, 2, 1, 3).reshape(1, n, H * dk)
            cat = see([b + "attn.W_O"], cat)
            x = x + cat @ w[b + "attn.W_O"]
            h = _rmsnorm(x, w[b + "norm2.gamma"], eps)
            h = see([b + "ffn.W1", b + "ffn.W3"], h)
            gated = _silu(h @ w[b + "ffn.W1"]) * (h @ w[b + "ffn.W3"])
            x = x + see([b + "ffn.W2"], gated) @ w[b + "ffn.W2"]
        h = _rmsnorm(x, w["norm_f.gamma"], eps)
        return (h @ w["E"].T)[0]
