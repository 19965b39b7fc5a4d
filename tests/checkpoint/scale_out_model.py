#!/usr/bin/env python3
"""A llama-style model directory in several shards, built with numpy + safetensors (never lofp),
for the scale-out tests (scale_out_test.py, slow_slurm.sh): `--shards S` files of
`--layers-per-shard L` decoder layers each (the embedding in the first, the final norm and lm_head
in the last), hidden size `--hidden H`, bf16 weights with a few outliers per tensor.

usage: scale_out_model.py DIR [--shards S] [--layers-per-shard L] [--hidden H] [--seed N]
Prints the total size in bytes of the shard files.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402


def tensors(n_layers, h, seed):
    rng = np.random.default_rng(seed)
    inter, kv, vocab = 2 * h, h // 2, 4 * h
    t = {"model.embed_tokens.weight": cm._w(rng, (vocab, h)), "model.norm.weight": np.ones(h, cm.BF16),
         "lm_head.weight": cm._w(rng, (vocab, h))}
    for layer in range(n_layers):
        p = f"model.layers.{layer}."
        t[p + "input_layernorm.weight"] = np.ones(h, cm.BF16)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, cm.BF16)
        t[p + "self_attn.q_proj.weight"] = cm._w(rng, (h, h))
        t[p + "self_attn.k_proj.weight"] = cm._w(rng, (kv, h), 0.05)
        t[p + "self_attn.v_proj.weight"] = cm._w(rng, (kv, h), 0.01)
        t[p + "self_attn.o_proj.weight"] = cm._w(rng, (h, h))
        t[p + "mlp.gate_proj.weight"] = cm._w(rng, (inter, h))
        t[p + "mlp.up_proj.weight"] = cm._w(rng, (inter, h), 0.04)
        t[p + "mlp.down_proj.weight"] = cm._w(rng, (h, inter))
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--layers-per-shard", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s, per = a.shards, a.layers_per_shard
    t = tensors(s * per, a.hidden, a.seed)

    def in_shard(k):
        def pred(name):
            if name.startswith("model.layers."):
                return int(name.split(".")[2]) // per == k
            if name.startswith("model.embed"):
                return k == 0
            return k == s - 1
        return pred

    shards = [(f"model-{k + 1:05d}-of-{s:05d}.safetensors", in_shard(k)) for k in range(s)]
    config = dict(cm.LLAMA_CONFIG, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                  num_hidden_layers=s * per, vocab_size=4 * a.hidden, num_attention_heads=4,
                  num_key_value_heads=2)
    cm.write_dir(a.dir, t, shards, config)
    print(sum(os.path.getsize(os.path.join(a.dir, f)) for f, _ in shards))


if __name__ == "__main__":
    main()
