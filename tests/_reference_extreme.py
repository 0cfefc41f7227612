"""Numpy float64 reference of one SCENT / SOX step (libauc-reference.md §4.18), written
independently of xrisk: loops over samples, Python's math.

State layout (the one xrisk documents): ``nu`` (N, 2) = [nu, seen flag], ``smoothing`` () =
gamma. A first visit (flag 0) sets nu = log m; duplicates of one index pool m (mean).
"""

from __future__ import annotations

import math

import numpy as np


def _log_mean_exp(values):
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values) / len(values))


def step(state, logits, index, mask=None, *, mode, alpha, alpha_multiplier):
    """``(loss, {"logits": grad}, {}, new_state)`` of one step."""
    logits = np.asarray(logits, dtype=np.float64)
    batch, width = logits.shape
    mask = np.ones((batch, width)) if mask is None else np.asarray(mask, dtype=np.float64)
    table = np.array(state["nu"], dtype=np.float64, copy=True)
    gamma = float(state["smoothing"])
    present = mask.sum(axis=1) > 0
    log_m = [(_log_mean_exp([logits[i, k] for k in range(width) if mask[i, k]])
              if present[i] else None) for i in range(batch)]
    done = set()
    for i in range(batch):
        if not present[i] or index[i] in done:
            continue
        done.add(index[i])
        members = [j for j in range(batch) if present[j] and index[j] == index[i]]
        pooled = _log_mean_exp([log_m[j] for j in members])
        nu, seen = table[index[i]]
        if seen == 0:
            new = pooled
        elif mode == "SOX":
            if gamma == 1:
                new = pooled
            else:
                x, y = math.log(1 - gamma) + nu, math.log(gamma) + pooled
                new = max(x, y) + math.log1p(math.exp(-abs(x - y)))
        else:
            k = alpha_multiplier

            def softplus(x):
                return max(x, 0.0) + math.log1p(math.exp(-abs(x)))

            new = nu + softplus(alpha + pooled + (k - 1) * nu) - softplus(alpha + k * nu)
        table[index[i]] = (new, 1.0)
    loss = 0.0
    grad = np.zeros_like(logits)
    for i in range(batch):
        if not present[i]:
            continue
        nu = table[index[i], 0]
        terms = mask[i] * np.exp(logits[i] - nu) / mask[i].sum()
        loss += terms.sum() / batch
        grad[i] = terms / batch
    return loss, {"logits": grad}, {}, {"nu": table, "smoothing": np.asarray(gamma)}
