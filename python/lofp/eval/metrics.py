"""Quality metrics: perplexity, KL divergence, top-1 agreement, embedding cosine, weight error."""
from __future__ import annotations

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def lm_nll(logits_windows, windows) -> tuple[float, int]:
    """Total negative log-likelihood of each window's tokens 1..n-1 given the earlier ones, and
    the number of predicted tokens."""
    total, count = 0.0, 0
    for lg, ids in zip(logits_windows, windows):
        lp = log_softmax(lg[:-1])
        tgt = np.asarray(ids[1:])
        total -= float(lp[np.arange(len(tgt)), tgt].sum())
        count += len(tgt)
    return total, count


def perplexity(logits_windows, windows) -> float:
    total, count = lm_nll(logits_windows, windows)
    return float(np.exp(total / count))


def kl_top1(ref_windows, q_windows) -> tuple[float, float, float]:
    """Mean KL(P_ref || P_quant) over every position (nats), its maximum, and the fraction of
    positions whose argmax agrees."""
    kls, agree, n = [], 0, 0
    for r, q in zip(ref_windows, q_windows):
        lr, lq = log_softmax(r), log_softmax(q)
        kls.append((np.exp(lr) * (lr - lq)).sum(axis=-1))
        agree += int((r.argmax(axis=-1) == q.argmax(axis=-1)).sum())
        n += r.shape[0]
    k = np.concatenate(kls)
    return float(k.mean()), float(k.max()), agree / n


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def similarity_matrix(e: np.ndarray) -> np.ndarray:
    e = np.asarray(e, np.float64)
    e = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return e @ e.T


def weight_error(w: np.ndarray, wq: np.ndarray) -> dict:
    """SNR in dB (10 log10 of signal over error energy) and relative Frobenius error."""
    w = np.asarray(w, np.float64)
    err = np.asarray(wq, np.float64) - w
    sig, noise = float((w * w).sum()), float((err * err).sum())
    return {"snr_db": float("inf") if noise == 0 else 10.0 * np.log10(sig / noise),
            "rel_fro": float(np.sqrt(noise / sig)) if sig > 0 else 0.0,
            "max_abs_err": float(np.abs(err).max()),
            "_sig": sig, "_noise": noise}
