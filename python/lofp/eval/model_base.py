"""What every evaluated model offers to the runner."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class KeptTensor:
    name: str
    shape: tuple
    why: str


@dataclass
class ModelInfo:
    name: str                 # short name used in tables ("glassllm-en", ...)
    kind: str                 # "lm" (next-token logits) or "embed" (sentence embeddings)
    source: str               # where the weights came from
    params: int               # parameter count
    notes: list = field(default_factory=list)


class Model:
    """A model whose 2-D linear weights can be replaced.

    linear_weights(): name -> fp32 [out, in] (rows = output features, K = input features: the
    orientation lofp quantizes, blocks along the input dimension). forward(...) takes a dict of
    replacements in the same orientation (missing names keep the original) and `kv`, None or a
    lofp KV cache type ("ultraquant", "fp32", "bf16") that every attention layer's K/V go through.

    forward(..., observe=f) also calls f(weight_name, x) just before each linear layer's product,
    with x that layer's input as a 2-D array [tokens, k] in the precision the forward computes in
    (a view of the operand itself: f must not modify it; layers that share an input get the same
    array object). It changes nothing in the forward's numerics (lofp.calibrate uses it).

    forward(..., act=g) replaces the input of each linear layer of linear_weights() by g(x)
    (x the operand as above, K its last axis, in any leading shape; g returns an array of the
    same shape) just before the product, and nowhere else: it is how `lofp eval --activations`
    fake-quantizes activations. Layers that share an input get one call and share its result;
    `observe` then sees the replaced input.
    """

    info: ModelInfo

    def linear_weights(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def kept_tensors(self) -> list[KeptTensor]:
        raise NotImplementedError

    def inputs(self, text: str | None):
        """The evaluation inputs: token windows (lm) or token lists of sentences (embed)."""
        raise NotImplementedError

    def forward(self, inputs, weights: dict | None = None, kv: str | None = None, backend=None,
                observe=None, act=None):
        """lm: list of fp32 logits [n, V] per window; embed: fp32 [S, d] sentence embeddings."""
        raise NotImplementedError

    def checkpoint_name(self, name: str) -> str:
        """The name the model's checkpoint file gives the linear weight `name` of
        linear_weights() (what `lofp convert` of that file looks the weight up by)."""
        return name

    def max_seq_len(self) -> int:
        """The longest token window the forward takes."""
        raise NotImplementedError


def split_windows(ids: list[int], max_len: int, min_len: int = 2) -> list[np.ndarray]:
    """Cuts a token list into consecutive windows of at most max_len tokens (a last window
    shorter than min_len is dropped)."""
    out = []
    for s in range(0, len(ids), max_len):
        w = ids[s:s + max_len]
        if len(w) >= min_len:
            out.append(np.asarray(w, dtype=np.int64))
    return out
