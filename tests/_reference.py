"""Independent numpy float64 references, written from LibAUC 2.0.1's math with plain loops.

They share no code with xrisk: losses return the value, the analytic gradient with respect
to the scores (and auxiliaries) and the new state; the optimizer is a step-by-step copy of
LibAUC 2.0.1's update rules (SGD/Adam core, PESG, PDSCA; with xrisk's documented choices,
listed in :class:`ClippedOptimizer`).
"""

from __future__ import annotations

import numpy as np


def surrogate(name, t, margin, scale):
    """Value and derivative d/dt of each surrogate (the subgradients xrisk documents)."""
    t = np.asarray(t, dtype=np.float64)
    if name == "squared_hinge":
        gap = np.where(margin - t > 0, margin - t, 0.0)
        return gap**2, -2 * gap
    if name == "hinge":
        inside = margin - t > 0
        return np.where(inside, margin - t, 0.0), np.where(inside, -1.0, 0.0)
    if name == "squared":
        return (margin - t) ** 2, -2 * (margin - t)
    if name == "logistic":
        z = -scale * t
        value = np.logaddexp(0.0, z)
        return value, -scale / (1 + np.exp(-z))
    if name == "barrier_hinge":
        hinge, rising, barrier = margin - t, scale * (t - margin), -scale * (margin + t) + margin
        inner_value = np.where(hinge >= rising, hinge, rising)
        inner_slope = np.where(hinge >= rising, -1.0, scale)
        use_barrier = barrier >= inner_value
        return (np.where(use_barrier, barrier, inner_value),
                np.where(use_barrier, -scale, inner_slope))
    raise ValueError(name)


def ap_step(u_all, u_pos, scores, labels, index, *, gamma, margin, surrogate_name, scale):
    """One APLoss step: (loss, d loss / d scores, new u_all, new u_pos)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    index = np.asarray(index)
    n = len(s)
    value, slope = surrogate(surrogate_name, s[:, None] - s[None, :], margin, scale)
    u_all, u_pos = np.array(u_all, dtype=np.float64), np.array(u_pos, dtype=np.float64)
    for k in np.unique(index[y]):
        rows = [i for i in range(n) if y[i] and index[i] == k]
        mean_all = np.mean([value[i].sum() / n for i in rows])
        mean_pos = np.mean([value[i, y].sum() / n for i in rows])
        u_all[k] = (1 - gamma) * u_all[k] + gamma * mean_all
        u_pos[k] = (1 - gamma) * u_pos[k] + gamma * mean_pos
    loss, grad = 0.0, np.zeros(n)
    for i in range(n):
        if not y[i]:
            continue
        for j in range(n):
            w = (u_pos[index[i]] - u_all[index[i]] * y[j]) / u_all[index[i]] ** 2
            loss += w * value[i, j]
            grad[i] += w * slope[i, j]
            grad[j] -= w * slope[i, j]
    norm = max(y.sum(), 1) * n
    return loss / norm, grad / norm, u_all, u_pos


def aucm_loss(scores, labels, a, b, alpha, *, margin, version, imratio=None):
    """AUC-M value and gradients: (loss, d/d scores, d/da, d/db, d/dalpha)."""
    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(labels).astype(bool)
    neg = ~pos
    n = len(s)
    if version == "v2":
        n_pos, n_neg = max(pos.sum(), 1), max(neg.sum(), 1)
        mean_pos, mean_neg = s[pos].sum() / n_pos, s[neg].sum() / n_neg
        loss = (((s[pos] - a) ** 2).sum() / n_pos + ((s[neg] - b) ** 2).sum() / n_neg
                + 2 * alpha * (margin + mean_neg - mean_pos) - alpha**2)
        grad = np.where(pos, 2 * (s - a) / n_pos - 2 * alpha / n_pos,
                        2 * (s - b) / n_neg + 2 * alpha / n_neg)
        return (loss, grad, -2 * (s[pos] - a).sum() / n_pos, -2 * (s[neg] - b).sum() / n_neg,
                2 * (margin + mean_neg - mean_pos) - 2 * alpha)
    p = pos.mean() if imratio is None else imratio
    loss = ((1 - p) * ((s[pos] - a) ** 2).sum() / n + p * ((s[neg] - b) ** 2).sum() / n
            + 2 * alpha * (p * (1 - p) * margin + (p * s[neg].sum() - (1 - p) * s[pos].sum()) / n)
            - p * (1 - p) * alpha**2)
    grad = np.where(pos, 2 * (1 - p) * (s - a) / n - 2 * alpha * (1 - p) / n,
                    2 * p * (s - b) / n + 2 * alpha * p / n)
    return (loss, grad, -2 * (1 - p) * (s[pos] - a).sum() / n, -2 * p * (s[neg] - b).sum() / n,
            2 * (p * (1 - p) * margin + (p * s[neg].sum() - (1 - p) * s[pos].sum()) / n)
            - 2 * p * (1 - p) * alpha)


class ClippedOptimizer:
    """Step-by-step numpy copy of LibAUC 2.0.1's optimizers (SGD/Adam core, PESG, PDSCA).

    kind: "heavy_ball" (SOAP, SOPA, SOPAs, SOTAs, STACO, SONG, SGD, Adam), "AdamW", "PESG",
    "PDSCA" or "MIDAM" (heavy-ball with dampening = momentum, then PESG's alpha ascent).
    With xrisk's documented choices: the reference point starts at the initial
    weights; counts (Adam's t, the first momentum step, the iterate average) are per
    parameter and only count steps where that parameter had a gradient (None: untouched);
    alpha's projected ascent runs every step (PDSCA: every AUC-phase step) and is clipped
    at 0 only; PDSCA's phase is step mod 2k < k (cross-entropy) and its last ``n_aux``
    parameters (the loss's a, b) do not move in the cross-entropy phase.
    """

    def __init__(self, params, *, kind, lr, mode="sgd", clip_value=1.0, weight_decay=0.0,
                 epoch_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False,
                 betas=(0.9, 0.999), eps=1e-8, amsgrad=False, margin=1.0, lr0=None,
                 beta1=0.99, beta2=0.999, k=1, n_aux=0):
        self.kind, self.lr, self.mode, self.clip = kind, lr, mode, clip_value
        self.lr0 = lr if lr0 is None else lr0
        self.wd, self.ed, self.mu, self.damp, self.nesterov = (weight_decay, epoch_decay,
                                                               momentum, dampening, nesterov)
        self.betas, self.eps, self.amsgrad, self.margin = betas, eps, amsgrad, margin
        self.beta1, self.beta2, self.k, self.n_aux = beta1, beta2, k, n_aux
        n = len(params)
        self.ref = [np.array(p, dtype=np.float64) for p in params]
        self.acc = [np.zeros_like(r) for r in self.ref]
        self.T = [0] * n  # steps with a gradient since the last update_regularizer
        self.t = [0] * n  # updates taken (Adam's bias correction, the first momentum step)
        self.buf = [None] * n
        self.wbuf = [None] * n  # PDSCA's weight average
        self.m = [np.zeros_like(r) for r in self.ref]
        self.v = [np.zeros_like(r) for r in self.ref]
        self.vmax = [np.zeros_like(r) for r in self.ref]
        self.steps = 0

    def _direction(self, p, g, i):
        d = np.clip(g, -self.clip, self.clip)
        if self.ed > 0:
            d = d + self.ed * (p - self.ref[i])
        if self.kind != "AdamW":
            d = d + self.wd * p
        return d

    def _clipped(self, p, g, i):
        if self.kind == "AdamW":
            p = p * (1 - self.lr * self.wd)
        d = self._direction(p, g, i)
        self.t[i] += 1
        if self.mode == "adam" or self.kind == "AdamW":
            b1, b2 = self.betas
            self.m[i] = b1 * self.m[i] + (1 - b1) * d
            self.v[i] = b2 * self.v[i] + (1 - b2) * d * d
            v = self.v[i]
            if self.amsgrad:
                self.vmax[i] = np.maximum(self.vmax[i], v)
                v = self.vmax[i]
            denom = np.sqrt(v) / np.sqrt(1 - b2 ** self.t[i]) + self.eps
            return p - self.lr / (1 - b1 ** self.t[i]) * self.m[i] / denom
        if self.mu > 0:
            if self.buf[i] is None:
                self.buf[i] = d
            elif self.kind == "PESG":
                self.buf[i] = (1 - self.mu) * self.buf[i] + self.mu * d
            else:
                self.buf[i] = self.mu * self.buf[i] + (1 - self.damp) * d
            step = d + self.mu * self.buf[i] if self.nesterov else self.buf[i]
            return p - self.lr * step
        return p - self.lr * d

    def _pdsca(self, p, g, i, ce):
        d = self._direction(p, g, i)
        if ce:
            new = p - self.lr0 * d
            if self.beta1 != 0:
                self.wbuf[i] = new if self.wbuf[i] is None else (
                    (1 - self.beta1) * self.wbuf[i] + self.beta1 * new)
                new = self.wbuf[i]
            return new
        self.buf[i] = d if self.buf[i] is None else (1 - self.beta2) * self.buf[i] + self.beta2 * d
        return p - self.lr * self.buf[i]

    def step(self, params, grads, alpha=None):
        """Return new params (and new alpha for PESG/PDSCA, whose params end with a, b)."""
        ce = self.kind == "PDSCA" and self.steps % (2 * self.k) < self.k
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            frozen = ce and i >= len(params) - self.n_aux
            if g is None or frozen:
                out.append(p)
                continue
            new = self._pdsca(p, g, i, ce) if self.kind == "PDSCA" else self._clipped(p, g, i)
            if self.ed > 0:
                self.acc[i] = self.acc[i] + new
                self.T[i] += 1
            out.append(new)
        self.steps += 1
        if self.kind not in ("PESG", "PDSCA", "MIDAM"):
            return out
        if ce:
            return out, alpha
        a, b = out[-2], out[-1]
        new_alpha = max(alpha + self.lr * (2 * (self.margin + b - a) - 2 * alpha), 0.0)
        return out, new_alpha

    def update_regularizer(self, decay_factor=None):
        if decay_factor is not None:
            self.lr = self.lr / decay_factor
            self.lr0 = self.lr0 / decay_factor
        for i in range(len(self.ref)):
            if self.ed > 0 and self.T[i] > 0:
                self.ref[i] = self.acc[i] / self.T[i]
                self.acc[i] = np.zeros_like(self.ref[i])
            self.T[i] = 0
