"""Plain numpy float64 references of the contrastive losses, independent of xrisk.

Each function runs ONE step from the state dict and returns ``(loss, grad_inputs,
grad_params, new_state)`` in the harness's form. The estimators are computed unshifted (the
true moving averages u); the state keeps them as ``[u / exp(c), c]`` with the documented
shift rule ``c = max(largest batch exponent of the row, c_old + log((1 - gamma) u~_old))``.
Gradients are written out by hand: the losses are linear in the similarities once the
detached weights are fixed, and the row normalisation is chained on explicitly.
"""

from __future__ import annotations

import math

import numpy as np

TINY = 1e-24


def gamma_of(definition) -> float:
    """gamma of the definition's epoch: constant, or the cosine decay from 1."""
    if definition.gamma_schedule == "constant":
        return definition.gamma
    total = definition.gamma_decay_epochs
    e = min(definition.epoch, total)
    return definition.gamma + (1 - definition.gamma) * 0.5 * (1 + math.cos(math.pi * e / total))


def _unit(x, normalize):
    if not normalize:
        return x, None
    norm = np.sqrt(np.maximum((x * x).sum(axis=1, keepdims=True), TINY))
    return x / norm, norm


def _unit_back(g, unit, norm):
    """d loss / d x from d loss / d (x / |x|)."""
    if norm is None:
        return g
    return (g - unit * (unit * g).sum(axis=1, keepdims=True)) / norm


def _back(w1, w2, w3, w4, xh, yh):
    """Gradients of sum(w1*X Y^T) + sum(w2*X X^T) + sum(w3*(X Y^T)^T) + sum(w4*Y Y^T)."""
    gx = w1 @ yh + (w2 + w2.T) @ xh + w3.T @ yh
    gy = w1.T @ xh + w3 @ xh + (w4 + w4.T) @ yh
    return gx, gy


def _exp_on(z, negative):
    """exp(z) on the negatives, 0 elsewhere (never inf * 0)."""
    return np.exp(np.where(negative > 0, z, -np.inf))


def _groups(index):
    same = index[:, None] == index[None, :]
    negative = ~same
    count = negative.sum(axis=1)
    return same, negative.astype(float), count


def _pool(values, same):
    return np.array([values[same[i]].mean() for i in range(len(values))])


def _moving(old_rows, zs_by_direction, negative, same, count, gamma):
    """Unshifted moving averages per direction; the row's stored [u~, c]."""
    has = count > 0
    old_tilde, old_shift = old_rows[:, 0], old_rows[:, 1]
    old_true = old_tilde * np.exp(old_shift)
    weight = np.where(old_tilde > 0, gamma, 1.0)
    low = min(z.min() for zs in zs_by_direction for z in zs)
    largest = np.full(len(count), -np.inf)
    for zs in zs_by_direction:
        for z in zs:
            largest = np.maximum(largest, np.where(negative > 0, z, low).max(axis=1))
    largest = np.array([largest[same[i]].max() for i in range(len(count))])
    carry = (1 - gamma) * old_tilde
    shift = np.where(carry > 0, np.maximum(largest, old_shift + np.log(np.where(
        carry > 0, carry, 1.0))), largest)
    per_direction = []
    for zs in zs_by_direction:
        total = sum(_exp_on(z, negative).sum(axis=1) for z in zs)
        fresh = total / (len(zs) * np.maximum(count, 1))
        per_direction.append((1 - gamma) * old_true + weight * _pool(fresh, same))
    true = sum(per_direction) / len(per_direction)
    rows = np.stack([true * np.exp(-shift), shift], axis=1)
    rows = np.where(has[:, None], rows, old_rows)
    return per_direction, rows


def _temperatures(old, grad, same, count, definition):
    momentum = (1 - definition.beta) * old[:, 1] + definition.beta * _pool(grad, same)
    tau = np.clip(old[:, 0] - definition.eta * momentum, definition.tau_min, definition.tau_max)
    return np.where((count > 0)[:, None], np.stack([tau, momentum], axis=1), old)


def _write(table, index, rows):
    table = np.array(table, dtype=float, copy=True)
    for position, key in enumerate(index):
        table[key] = rows[position]
    return table


def global_contrastive(definition, state, params, view1, view2, index):
    """GlobalContrastiveLoss (SogCLR / iSogCLR), one step."""
    index = np.asarray(index).reshape(-1)
    xh, nx = _unit(np.asarray(view1, float), definition.normalize)
    yh, ny = _unit(np.asarray(view2, float), definition.normalize)
    batch = len(index)
    same, negative, count = _groups(index)
    has = (count > 0).astype(float)
    individual = definition.temperature_scheme == "individual"
    tau = state["temperature"][index, 0][:, None] if individual else definition.tau
    s = xh @ yh.T
    blocks = [[s, xh @ xh.T], [s.T, yh @ yh.T]]
    zs = [[b / tau for b in direction] for direction in blocks]
    old = np.asarray(state["u"], float)[index]
    per_direction, rows = _moving(old, zs, negative, same, count, gamma_of(definition))
    coefficients = []
    loss = 0.0
    grad_tau = np.zeros(batch)
    for direction, z_direction, u in zip(blocks, zs, per_direction):
        safe = np.where((count > 0) & (u > 0), u, 1.0)
        denominator = (safe * 2 * np.maximum(count, 1))[:, None]
        for block, z in zip(direction, z_direction):
            w = _exp_on(z, negative) / denominator
            loss += (has[:, None] * w * block).sum() / batch
            coefficients.append(has[:, None] * w / batch)
            grad_tau += 0.5 * -(w * z).sum(axis=1)
        loss -= (has * np.diag(s)).sum() / batch
        grad_tau += 0.5 * (np.log(safe) + definition.rho)
    w1, w2, w3, w4 = coefficients
    w1 = w1 - np.diag(has) / batch
    w3 = w3 - np.diag(has) / batch
    gx, gy = _back(w1, w2, w3, w4, xh, yh)
    grads = {"view1": _unit_back(gx, xh, nx), "view2": _unit_back(gy, yh, ny)}
    new_state = {"u": _write(state["u"], index, rows)}
    if individual:
        old_tau = np.asarray(state["temperature"], float)[index]
        new_state["temperature"] = _write(state["temperature"], index,
                                  _temperatures(old_tau, grad_tau, same, count, definition))
    return float(loss), grads, {}, new_state


def bimodal_contrastive(definition, state, params, image, text, index):
    """BimodalContrastiveLoss, one step."""
    index = np.asarray(index).reshape(-1)
    xh, nx = _unit(np.asarray(image, float), definition.normalize)
    yh, ny = _unit(np.asarray(text, float), definition.normalize)
    batch = len(index)
    same, negative, count = _groups(index)
    has = (count > 0).astype(float)
    individual = definition.temperature_scheme == "individual"
    s = xh @ yh.T
    positive = np.diag(s)[:, None]
    loss = 0.0
    coefficients = []
    new_state = {}
    for side, similarity in (("image", s), ("text", s.T)):
        margin = similarity - positive
        tau = state[f"temperature_{side}"][index, 0][:, None] if individual else definition.tau
        z = margin / tau
        old = np.asarray(state[f"u_{side}"], float)[index]
        (u,), rows = _moving(old, [[z]], negative, same, count, gamma_of(definition))
        safe = np.where((count > 0) & (u > 0), u, 1.0)
        ratio = _exp_on(z, negative) / safe[:, None]
        reduce = np.maximum(count, 1) if definition.negative_reduction == "mean" else 1.0
        w = has[:, None] * ratio / (np.reshape(reduce, (-1, 1)) * batch) / 2
        loss += (w * margin).sum()
        coefficients.append(w - np.diag(w.sum(axis=1)))  # d/ds_ii of -s_ii
        new_state[f"u_{side}"] = _write(state[f"u_{side}"], index, rows)
        if individual:
            grad = np.log(safe) + definition.rho - (ratio * z).sum(axis=1) / np.maximum(count, 1)
            old_tau = np.asarray(state[f"temperature_{side}"], float)[index]
            new_state[f"temperature_{side}"] = _write(state[f"temperature_{side}"], index,
                                              _temperatures(old_tau, grad, same, count,
                                                            definition))
    zeros = np.zeros((batch, batch))
    gx, gy = _back(coefficients[0], zeros, coefficients[1], zeros, xh, yh)
    grads = {"image": _unit_back(gx, xh, nx), "text": _unit_back(gy, yh, ny)}
    return float(loss), grads, {}, new_state


def info_nce(definition, state, params, view1, view2, index=None):
    """InfoNCELoss (SimCLR / CLIP), one step (stateless)."""
    xh, nx = _unit(np.asarray(view1, float), definition.normalize)
    yh, ny = _unit(np.asarray(view2, float), definition.normalize)
    batch = xh.shape[0]
    index = np.arange(batch) if index is None else np.asarray(index).reshape(-1)
    _, negative, _ = _groups(index)
    t = definition.tau
    s = xh @ yh.T / t
    positive = np.diag(s)
    loss = 0.0
    coefficients = []
    for cross, within in ((s, xh @ xh.T / t), (s.T, yh @ yh.T / t)):
        blocks = [cross, within] if definition.within_view else [cross]
        top = np.maximum(positive, np.max([np.where(negative > 0, b, -np.inf).max(axis=1)
                                           for b in blocks], axis=0))
        den = np.exp(positive - top) + sum(_exp_on(b - top[:, None], negative).sum(axis=1)
                                           for b in blocks)
        loss += (np.log(den) + top - positive).sum() / (2 * batch)
        p_cross = _exp_on(cross - top[:, None], negative) / den[:, None]
        p_pos = np.exp(positive - top) / den
        coefficients.append((p_cross + np.diag(p_pos - 1)) / (2 * batch * t))
        coefficients.append((_exp_on(within - top[:, None], negative) / den[:, None]
                             / (2 * batch * t)) if definition.within_view
                            else np.zeros((batch, batch)))
    w1, w2, w3, w4 = coefficients
    gx, gy = _back(w1, w2, w3, w4, xh, yh)
    return (float(loss), {"view1": _unit_back(gx, xh, nx), "view2": _unit_back(gy, yh, ny)},
            {}, {})
