"""Numpy float64 reference of one MIDAM step (softmax and attention pooling), written from the
math of the paper (Zhu et al., ICML 2023) and libauc-reference.md §4.17, independently of
xrisk: plain loops over bags, no shared code.

State layout (the one xrisk documents): softmax ``s`` (N, 2) = [s~, c] with s = s~ e^c;
attention ``s`` (N, 3) = [n~, d~, c] with n = n~ e^c, d = d~ e^c; ``smoothing`` () = gamma.
The shift rule: c_new = max(max z over the bag's duplicates, c_old + log((1 - gamma) s~_old)),
the second term only when (1 - gamma) s~_old > 0.
"""

from __future__ import annotations

import math

import numpy as np


def _groups(index, present):
    """For each position, the list of present positions with the same bag index."""
    return [[j for j in range(len(index)) if present[j] and index[j] == index[i]]
            if present[i] else [] for i in range(len(index))]


def _new_shift(old_tilde, old_shift, largest, gamma):
    carry = (1 - gamma) * old_tilde
    if carry > 0:
        return max(largest, old_shift + math.log(carry)), True
    return largest, False


def _auc_objective(h, labels, present, a, b, alpha, margin):
    """F, dF/dh (per position), dF/da, dF/db, dF/dalpha over the present positions."""
    pos = [i for i in range(len(h)) if present[i] and labels[i] == 1]
    neg = [i for i in range(len(h)) if present[i] and labels[i] == 0]
    n_pos, n_neg = max(len(pos), 1), max(len(neg), 1)
    mean_pos = sum(h[i] for i in pos) / n_pos
    mean_neg = sum(h[i] for i in neg) / n_neg
    value = (sum((h[i] - a) ** 2 for i in pos) / n_pos + sum((h[i] - b) ** 2 for i in neg) / n_neg
             + 2 * alpha * (margin + mean_neg - mean_pos) - alpha ** 2)
    dh = np.zeros(len(h))
    for i in pos:
        dh[i] = (2 * (h[i] - a) - 2 * alpha) / n_pos
    for i in neg:
        dh[i] = (2 * (h[i] - b) + 2 * alpha) / n_neg
    da = -2 * sum(h[i] - a for i in pos) / n_pos
    db = -2 * sum(h[i] - b for i in neg) / n_neg
    dalpha = 2 * (margin + mean_neg - mean_pos) - 2 * alpha
    return value, dh, da, db, dalpha


def softmax_step(state, params, scores, labels, index, mask=None, *, tau, margin):
    """``(loss, {"scores": grad}, grad_params, new_state)`` of one softmax-pooling step."""
    scores = np.asarray(scores, dtype=np.float64)
    batch, width = scores.shape
    mask = np.ones((batch, width)) if mask is None else np.asarray(mask, dtype=np.float64)
    table = np.array(state["s"], dtype=np.float64, copy=True)
    gamma = float(state["smoothing"])
    present = mask.sum(axis=1) > 0
    groups = _groups(index, present)
    z = scores / tau
    rows = {}
    for i in range(batch):
        if not present[i] or index[i] in rows:
            continue
        members = groups[i]
        old_tilde, old_shift = table[index[i]]
        largest = max(z[j, k] for j in members for k in range(width) if mask[j, k])
        shift, carries = _new_shift(old_tilde, old_shift, largest, gamma)
        carried = (1 - gamma) * old_tilde * math.exp(old_shift - shift) if carries else 0.0
        fresh = np.mean([sum(math.exp(z[j, k] - shift) for k in range(width) if mask[j, k])
                         / mask[j].sum() for j in members])
        rows[index[i]] = (carried + gamma * fresh, shift)
    for key, row in rows.items():
        table[key] = row
    h = np.zeros(batch)
    s = np.ones(batch)
    for i in range(batch):
        if present[i]:
            s[i] = table[index[i], 0] * math.exp(table[index[i], 1])
            h[i] = tau * math.log(s[i])
    a, b, alpha = (float(params[k]) for k in ("a", "b", "alpha"))
    value, dh, da, db, dalpha = _auc_objective(h, labels, present, a, b, alpha, margin)
    grad = np.zeros_like(scores)
    for i in range(batch):
        if present[i]:
            # d/dphi of tau * s^_i / s_i, s^_i = mean_k exp(phi_k / tau)
            grad[i] = dh[i] * mask[i] * np.exp(z[i]) / (mask[i].sum() * s[i])
    new_state = {"s": table, "smoothing": np.asarray(gamma)}
    return value, {"scores": grad}, {"a": da, "b": db, "alpha": dalpha}, new_state


def attention_step(state, params, scores, attention, labels, index, mask=None, *, margin):
    """``(loss, {"scores": .., "attention": ..}, grad_params, new_state)`` of one
    attention-pooling step."""
    phi = np.asarray(scores, dtype=np.float64)
    omega = np.asarray(attention, dtype=np.float64)
    batch, width = phi.shape
    mask = np.ones((batch, width)) if mask is None else np.asarray(mask, dtype=np.float64)
    table = np.array(state["s"], dtype=np.float64, copy=True)
    gamma = float(state["smoothing"])
    present = mask.sum(axis=1) > 0
    groups = _groups(index, present)
    rows = {}
    for i in range(batch):
        if not present[i] or index[i] in rows:
            continue
        members = groups[i]
        old_n, old_d, old_shift = table[index[i]]
        largest = max(omega[j, k] for j in members for k in range(width) if mask[j, k])
        shift, carries = _new_shift(old_d, old_shift, largest, gamma)
        decay = (1 - gamma) * math.exp(old_shift - shift) if carries else 0.0
        fresh_n = np.mean([sum(math.exp(omega[j, k] - shift) * phi[j, k]
                               for k in range(width) if mask[j, k]) / mask[j].sum()
                           for j in members])
        fresh_d = np.mean([sum(math.exp(omega[j, k] - shift) for k in range(width)
                               if mask[j, k]) / mask[j].sum() for j in members])
        rows[index[i]] = (decay * old_n + gamma * fresh_n, decay * old_d + gamma * fresh_d,
                          shift)
    for key, row in rows.items():
        table[key] = row
    h = np.zeros(batch)
    n = np.zeros(batch)
    d = np.ones(batch)
    for i in range(batch):
        if present[i]:
            n_t, d_t, c = table[index[i]]
            n[i], d[i] = n_t * math.exp(c), d_t * math.exp(c)
            h[i] = 1 / (1 + math.exp(-n[i] / d[i]))
    a, b, alpha = (float(params[k]) for k in ("a", "b", "alpha"))
    value, dh, da, db, dalpha = _auc_objective(h, labels, present, a, b, alpha, margin)
    g_phi, g_omega = np.zeros_like(phi), np.zeros_like(omega)
    for i in range(batch):
        if present[i]:
            slope = h[i] * (1 - h[i])
            weight = mask[i] * np.exp(omega[i]) / mask[i].sum()  # d d^_i / d omega
            g_phi[i] = dh[i] * slope * weight / d[i]
            g_omega[i] = dh[i] * slope * (weight * phi[i] / d[i] - n[i] / d[i] ** 2 * weight)
    new_state = {"s": table, "smoothing": np.asarray(gamma)}
    return (value, {"scores": g_phi, "attention": g_omega}, {"a": da, "b": db, "alpha": dalpha},
            new_state)


def midam_optimizer(params, grads, aux, aux_grads, *, lr, momentum, weight_decay, margin,
                    steps_state=None):
    """One LibAUC-MIDAM-style step with the paper's alpha direction (numpy lists).

    ``params``/``grads``: lists of arrays; ``aux``/``aux_grads``: dicts a, b, alpha;
    ``steps_state``: dict of momentum buffers (None at the first step). Returns
    ``(params, aux, buffers)``.
    """
    values = [*params, aux["a"], aux["b"]]
    gradients = [*grads, aux_grads["a"], aux_grads["b"]]
    buffers = [] if steps_state is None else steps_state
    new_values, new_buffers = [], []
    for position, (p, g) in enumerate(zip(values, gradients)):
        d = np.asarray(g, dtype=np.float64) + weight_decay * np.asarray(p, dtype=np.float64)
        if momentum > 0:
            buf = d if steps_state is None else momentum * buffers[position] + (1 - momentum) * d
            new_buffers.append(buf)
        else:
            buf = d
        new_values.append(np.asarray(p, dtype=np.float64) - lr * buf)
    a, b = new_values[-2], new_values[-1]
    alpha = max(0.0, float(aux["alpha"]) + lr * (2 * (margin + b - a) - 2 * float(aux["alpha"])))
    return new_values[:-2], {"a": a, "b": b, "alpha": alpha}, new_buffers
