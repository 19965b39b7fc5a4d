"""lofp.eval: what each lofp format does to a real model (perplexity, KL, top-1 agreement,
embedding cosine, per-layer weight error). Pure Python + numpy; lofp itself is reached through
lofp.eval.backend. Entry point: lofp.eval.cli.main(argv)."""
from .backend import get_backend
from .loaders import load_model
from .runner import Variant, build_variants, run

__all__ = ["get_backend", "load_model", "Variant", "build_variants", "run"]
