"""Independent numpy float64 references for the classification losses (pAUC, AUC, CE, focal).

Written with plain loops from LibAUC 2.0.1's math (CompositionalAUCLoss, the pAUC losses,
PairwiseAUCLoss, CrossEntropyLoss, FocalLoss) and xrisk's documented semantics; they share no
code with xrisk (they are the oracle it is tested against).

Every step function returns ``(loss, grad_scores, grad_params, new_state)``:

- ``loss``: float, the value of the mini-batch loss;
- ``grad_scores``: (B,) analytic d loss / d scores, with every weight or mask computed from
  the state held constant (LibAUC's ``.detach()``, xrisk's ``stop_gradient``);
- ``grad_params``: dict of gradients for the trainable auxiliaries ({} when there are none);
- ``new_state``: dict of numpy float64 arrays; the input state is never modified.

Inputs: scores (B,), labels (B,) in {0, 1}, index (B,) the dataset index of every example
(only the positives' rows are read or written). P / N are the batch's positive / negative
positions, n+ = |P|, n- = |N|, l_ij = surrogate(s_i - s_j) for i in P, j in N.

xrisk's documented rules, which differ from LibAUC on purpose in a few places:

- Duplicate indices: positives sharing one dataset index pool their per-row batch
  quantities (arithmetic mean over the duplicate positions) and the row gets ONE update;
  every duplicate position then uses that row's updated value (LibAUC: last write wins).
  Rows of negatives are never written; rows absent from the batch never change.
- A batch with no positive or no negative: loss 0, gradient 0, state unchanged.
- ``gamma`` weights the NEW estimate: u <- (1 - gamma) u + gamma * new.
- KL-DRO estimators are stored shifted, (u~, c) with u = u~ * exp(c), so exp never
  overflows (LibAUC stores u and overflows once l / lam > ~88 in float32); the
  shift c moves down as well as up with u (see ``_update_shifted_u``), so u~ never
  underflows either.

The stateful functions take ``stop_gradient_scores`` (default: the scores): the scores from
which every stop-gradient quantity (masks, weights, state) is computed. Tests pass the
unperturbed scores there to take finite differences of the loss with the weights frozen.
"""

from __future__ import annotations

import numpy as np

from tests._reference import aucm_loss, surrogate

__all__ = [
    "compositional_auc", "cross_entropy", "focal", "init_pauc_cvar", "init_pauc_dro",
    "init_tpauc_cvar", "init_tpauc_kl", "pairwise_auc", "pauc_cvar", "pauc_dro", "tpauc_cvar",
    "tpauc_kl",
]


# --------------------------------------------------------------------------- helpers

def _batch(scores, labels, index=None, stop_gradient_scores=None):
    """float64 copies: scores, positive mask, index (or None), frozen scores."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    positive = np.asarray(labels).reshape(-1) == 1
    idx = None if index is None else np.asarray(index).reshape(-1).astype(np.int64)
    frozen = s if stop_gradient_scores is None else np.asarray(
        stop_gradient_scores, dtype=np.float64).reshape(-1)
    return s, positive, idx, frozen


def _pairs(s, frozen, positive, *, surrogate_name, margin, scale):
    """Positive and negative positions, l_ij and dl_ij/dt at s, and l_ij at the frozen s."""
    pos, neg = np.flatnonzero(positive), np.flatnonzero(~positive)
    value, slope = surrogate(surrogate_name, s[pos][:, None] - s[neg][None, :], margin, scale)
    frozen_value, _ = surrogate(surrogate_name, frozen[pos][:, None] - frozen[neg][None, :],
                                margin, scale)
    return pos, neg, value, slope, frozen_value


def _weighted_pairs(n, pos, neg, coef, value, slope):
    """L = sum_ab coef_ab l_ab and its gradient (coef is a constant), with plain loops."""
    loss, grad = 0.0, np.zeros(n)
    for a, i in enumerate(pos):
        for b, j in enumerate(neg):
            loss += coef[a, b] * value[a, b]
            grad[i] += coef[a, b] * slope[a, b]
            grad[j] -= coef[a, b] * slope[a, b]
    return float(loss), grad


def _groups(idx, pos):
    """[(dataset row k, [a: positions in pos whose index is k]), ...] in increasing k."""
    rows = {}
    for a, i in enumerate(pos):
        rows.setdefault(int(idx[i]), []).append(a)
    return sorted(rows.items())


def _copy_state(state):
    return {key: np.array(value, dtype=np.float64) for key, value in state.items()}


# --------------------------------------------------------------------------- 1. pairwise AUC

def pairwise_auc(scores, labels, *, surrogate_name, margin, scale):
    """L = mean over (i in P, j in N) of l_ij. No state."""
    s, positive, _, _ = _batch(scores, labels)
    pos, neg, value, slope, _ = _pairs(s, s, positive, surrogate_name=surrogate_name,
                                       margin=margin, scale=scale)
    if len(pos) == 0 or len(neg) == 0:
        return 0.0, np.zeros(len(s)), {}, {}
    coef = np.full(value.shape, 1.0 / (len(pos) * len(neg)))
    loss, grad = _weighted_pairs(len(s), pos, neg, coef, value, slope)
    return loss, grad, {}, {}


# --------------------------------------------------------------------------- 2. SOPA (CVaR)

def init_pauc_cvar(num_samples):
    """{"threshold": (num_samples,) zeros}."""
    return {"threshold": np.zeros(num_samples)}


def pauc_cvar(scores, labels, index, state, *, beta, eta, margin, surrogate_name, scale,
              stop_gradient_scores=None):
    """One SOPA step (one-way pAUC, FPR <= beta): mask from the OLD threshold, then update.

    p_ij = 1{l_ij > thr_old[k_i]};  L = (1/beta) (1/(n+ n-)) sum_ij p_ij l_ij;
    thr[k] <- thr[k] - eta * mean_{i in P, k_i = k} (1 - sum_j p_ij / (beta n-)).
    """
    s, positive, idx, frozen = _batch(scores, labels, index, stop_gradient_scores)
    new_state = _copy_state(state)
    pos, neg, value, slope, frozen_value = _pairs(
        s, frozen, positive, surrogate_name=surrogate_name, margin=margin, scale=scale)
    if len(pos) == 0 or len(neg) == 0:
        return 0.0, np.zeros(len(s)), {}, new_state
    old = new_state["threshold"].copy()
    n_pos, n_neg = len(pos), len(neg)
    mask = np.zeros((n_pos, n_neg))
    for a, i in enumerate(pos):
        for b in range(n_neg):
            mask[a, b] = 1.0 if frozen_value[a, b] > old[idx[i]] else 0.0
    loss, grad = _weighted_pairs(len(s), pos, neg, mask / (beta * n_pos * n_neg), value, slope)
    for k, rows in _groups(idx, pos):
        bracket = np.mean([1.0 - mask[a].sum() / (beta * n_neg) for a in rows])
        new_state["threshold"][k] = old[k] - eta * bracket
    return loss, grad, {}, new_state


# --------------------------------------------------------------------------- 3. SOPAs (KL-DRO)

def init_pauc_dro(num_samples):
    """{"u": (num_samples, 2) zeros}: columns [u~, c], u = u~ exp(c)."""
    return {"u": np.zeros((num_samples, 2))}


def _shift(old_shift, old_tilde, gamma, largest):
    """The new log-shift: max(largest, c_old + log((1-gamma) u~_old)), the second term left
    out (it is -inf) when (1-gamma) u~_old == 0 (a first visit, or gamma = 1)."""
    carried = (1 - gamma) * old_tilde
    return largest if carried == 0 else max(largest, old_shift + np.log(carried))


def _carried(old_shift, old_tilde, gamma, new_shift):
    """(1-gamma) u~_old exp(c_old - c_new), exactly 0 when (1-gamma) u~_old == 0 (then
    c_old - c_new may be large and exp(c_old - c_new) overflow)."""
    carried = (1 - gamma) * old_tilde
    return 0.0 if carried == 0 else carried * np.exp(old_shift - new_shift)


def _update_shifted_u(table, idx, pos, z, gamma):
    """Pooled, shifted u update of SOPAs / SOTAs; returns the new (num_samples, 2) table.

    c_new = max(max z over the row's duplicates, c_old + log((1-gamma) u~_old));
    u~_new = (1-gamma) u~_old exp(c_old - c_new) + gamma mean_{dups} mean_j exp(z - c_new).

    The shift follows u = u~ exp(c) down as well as up, so u~ stays in
    [min(1, gamma / (m n-)), 1 + gamma], m the row's duplicates in the batch (each of the two
    terms is <= 1, and the one that sets c_new is 1 or >= gamma / (m n-)). The earlier rule
    c_new = max(c_old, max z) only grew: once z fell far below c, u~ decayed like
    (1-gamma)^t, underflowed and the weights became 0/0.
    """
    old, new = table.copy(), table.copy()
    for k, rows in _groups(idx, pos):
        u_old, c_old = old[k]
        c_new = _shift(c_old, u_old, gamma, max(z[a].max() for a in rows))
        fresh = np.mean([np.mean(np.exp(z[a] - c_new)) for a in rows])
        new[k, 0] = _carried(c_old, u_old, gamma, c_new) + gamma * fresh
        new[k, 1] = c_new
    return new


def pauc_dro(scores, labels, index, state, *, gamma, lam, margin, surrogate_name, scale,
             stop_gradient_scores=None):
    """One SOPAs step (one-way pAUC via KL-DRO), stable shifted form; u first, then weights.

    z_ij = l_ij / lam;  (u~, c) updated as in ``_update_shifted_u``;
    w_ij = exp(z_ij - c[k_i]) / u~[k_i] (new values);  L = mean_{n+ x n-} w_ij l_ij.
    """
    s, positive, idx, frozen = _batch(scores, labels, index, stop_gradient_scores)
    new_state = _copy_state(state)
    pos, neg, value, slope, frozen_value = _pairs(
        s, frozen, positive, surrogate_name=surrogate_name, margin=margin, scale=scale)
    if len(pos) == 0 or len(neg) == 0:
        return 0.0, np.zeros(len(s)), {}, new_state
    z = frozen_value / lam
    table = _update_shifted_u(new_state["u"], idx, pos, z, gamma)
    n_pos, n_neg = len(pos), len(neg)
    coef = np.zeros((n_pos, n_neg))
    for a, i in enumerate(pos):
        u_tilde, shift = table[idx[i]]
        for b in range(n_neg):
            coef[a, b] = np.exp(z[a, b] - shift) / u_tilde / (n_pos * n_neg)
    loss, grad = _weighted_pairs(len(s), pos, neg, coef, value, slope)
    new_state["u"] = table
    return loss, grad, {}, new_state


# --------------------------------------------------------------------------- 4. SOTAs (KL, 2-way)

def init_tpauc_kl(num_samples):
    """{"u": (num_samples, 2) zeros [u~, c]; "w": (2,) zeros [w~, d]}, w = w~ exp(d)."""
    return {"u": np.zeros((num_samples, 2)), "w": np.zeros(2)}


def tpauc_kl(scores, labels, index, state, *, tau, lam, gammas, margin, surrogate_name, scale,
             stop_gradient_scores=None):
    """One SOTAs step (two-way pAUC), stable shifted form.

    u as in ``pauc_dro`` with gamma0; per positive position i, v_i = (lam/tau) log u_i;
    d_new = max(max_i v_i, d_old + log((1-g1) w~_old)) (the rule of u);
    w~_new = (1-g1) w~_old exp(d_old - d_new) + g1 mean_i exp(v_i - d_new);
    weight_ij = u_i^(lam/tau - 1) exp(z_ij) / w (in logs);
    L = mean_{n+ x n-} weight_ij l_ij.
    """
    gamma0, gamma1 = gammas
    s, positive, idx, frozen = _batch(scores, labels, index, stop_gradient_scores)
    new_state = _copy_state(state)
    pos, neg, value, slope, frozen_value = _pairs(
        s, frozen, positive, surrogate_name=surrogate_name, margin=margin, scale=scale)
    if len(pos) == 0 or len(neg) == 0:
        return 0.0, np.zeros(len(s)), {}, new_state
    z = frozen_value / lam
    table = _update_shifted_u(new_state["u"], idx, pos, z, gamma0)
    ratio = lam / tau
    log_u = np.array([np.log(table[idx[i], 0]) + table[idx[i], 1] for i in pos])
    v = ratio * log_u
    w_old, d_old = new_state["w"]
    d_new = _shift(d_old, w_old, gamma1, v.max())
    w_new = _carried(d_old, w_old, gamma1, d_new) + gamma1 * np.mean(np.exp(v - d_new))
    n_pos, n_neg = len(pos), len(neg)
    coef = np.zeros((n_pos, n_neg))
    for a in range(n_pos):
        for b in range(n_neg):
            exponent = (ratio - 1) * log_u[a] + z[a, b] - np.log(w_new) - d_new
            coef[a, b] = np.exp(exponent) / (n_pos * n_neg)
    loss, grad = _weighted_pairs(len(s), pos, neg, coef, value, slope)
    new_state["u"] = table
    new_state["w"] = np.array([w_new, d_new])
    return loss, grad, {}, new_state


# --------------------------------------------------------------------------- 5. STACO (2-way CVaR)

def init_tpauc_cvar(num_samples):
    """{"u": (num_samples, 3) rows [u=1, s1=0, dual=1]; "s2": () 0}."""
    table = np.zeros((num_samples, 3))
    table[:, 0], table[:, 2] = 1.0, 1.0
    return {"u": table, "s2": np.array(0.0)}


def tpauc_cvar(scores, labels, index, state, *, threshold, alpha, beta0, beta1, theta0, theta1,
               surrogate_name, scale, stop_gradient_scores=None):
    """One STACO step (two-way pAUC via double CVaR); the surrogate's margin is ``threshold``.

    Order (LibAUC 2.0.1's tpAUC_CVaR_loss): p1_ij = 1{l_ij > s1_old}; tp_i = mean_j(l_ij p1_ij)
    / theta1 / theta0; u <- s1_old + mean_j max(l - s1_old, 0) / theta1; dual <- clip(dual +
    alpha (u - s2_old) / theta0, 0, 1); L = mean_i dual_i tp_i (new dual);
    s1 <- s1 - beta0 (dual / theta0)(1 - mean_j p1_ij / theta1);
    s2 <- s2 - beta1 (1 - mean_i dual_i / theta0). Row quantities pooled over duplicates.
    """
    s, positive, idx, frozen = _batch(scores, labels, index, stop_gradient_scores)
    new_state = _copy_state(state)
    pos, neg, value, slope, frozen_value = _pairs(
        s, frozen, positive, surrogate_name=surrogate_name, margin=threshold, scale=scale)
    if len(pos) == 0 or len(neg) == 0:
        return 0.0, np.zeros(len(s)), {}, new_state
    old, table = new_state["u"].copy(), new_state["u"]
    s2_old = float(new_state["s2"])
    n_pos, n_neg = len(pos), len(neg)
    mask = np.zeros((n_pos, n_neg))
    for a, i in enumerate(pos):
        for b in range(n_neg):
            mask[a, b] = 1.0 if frozen_value[a, b] > old[idx[i], 1] else 0.0
    groups = _groups(idx, pos)
    for k, rows in groups:
        s1_old = old[k, 1]
        excess = np.mean([np.mean(np.maximum(frozen_value[a] - s1_old, 0.0)) for a in rows])
        table[k, 0] = s1_old + excess / theta1
        table[k, 2] = min(max(old[k, 2] + alpha * (table[k, 0] - s2_old) / theta0, 0.0), 1.0)
    dual = np.array([table[idx[i], 2] for i in pos])
    coef = dual[:, None] * mask / (theta1 * theta0 * n_pos * n_neg)
    loss, grad = _weighted_pairs(len(s), pos, neg, coef, value, slope)
    for k, rows in groups:
        hit_rate = np.mean([mask[a].mean() for a in rows])
        table[k, 1] = old[k, 1] - beta0 * (table[k, 2] / theta0) * (1 - hit_rate / theta1)
    new_state["s2"] = np.array(s2_old - beta1 * (1 - dual.mean() / theta0))
    return loss, grad, {}, new_state


# --------------------------------------------------------------------------- 6. compositional AUC

_BCE_EPS = 1e-12


def compositional_auc(scores, labels, a, b, alpha, step, *, k, margin, version, imratio=None):
    """One CompositionalAUCLoss step: BCE on probabilities if step mod 2k < k, else AUC-M.

    BCE_i = -(y log(clip(s)) + (1-y) log(1 - clip(s))), clip to [1e-12, 1 - 1e-12] (the
    clip's gradient is 1 inside, inclusive of the bounds, 0 outside). AUC-M is
    ``tests._reference.aucm_loss``. grad_params = {"a", "b", "alpha"} (zeros on BCE steps);
    new_state = {"step": step + 1}.
    """
    s, positive, _, _ = _batch(scores, labels)
    new_state = {"step": np.array(int(step) + 1)}
    if int(step) % (2 * k) < k:
        y = positive.astype(np.float64)
        n = len(s)
        loss, grad = 0.0, np.zeros(n)
        for i in range(n):
            p = min(max(s[i], _BCE_EPS), 1 - _BCE_EPS)
            inside = 1.0 if _BCE_EPS <= s[i] <= 1 - _BCE_EPS else 0.0
            loss -= y[i] * np.log(p) + (1 - y[i]) * np.log(1 - p)
            grad[i] = -inside * (y[i] / p - (1 - y[i]) / (1 - p))
        zero = np.float64(0.0)
        return float(loss / n), grad / n, {"a": zero, "b": zero, "alpha": zero}, new_state
    loss, grad, g_a, g_b, g_alpha = aucm_loss(s, positive.astype(np.int64), a, b, alpha,
                                              margin=margin, version=version, imratio=imratio)
    params = {"a": np.float64(g_a), "b": np.float64(g_b), "alpha": np.float64(g_alpha)}
    return float(loss), grad, params, new_state


# --------------------------------------------------------------------------- 7-8. CE and focal

def _bce_with_logits(z, y):
    """Stable BCE_i = max(z, 0) - y z + log1p(exp(-|z|)) and sigmoid(z)."""
    small = np.exp(-np.abs(z))  # in (0, 1]: never overflows
    bce = np.maximum(z, 0.0) - y * z + np.log1p(small)
    sig = np.where(z >= 0, 1 / (1 + small), small / (1 + small))
    return bce, sig


def cross_entropy(logits, labels):
    """L = mean_i BCE-with-logits; gradient (sigmoid(z) - y) / B."""
    z, positive, _, _ = _batch(logits, labels)
    y = positive.astype(np.float64)
    bce, sig = _bce_with_logits(z, y)
    return float(bce.mean()), (sig - y) / len(z), {}, {}


def focal(logits, labels, *, alpha, gamma):
    """L = mean_i a_i (1 - p_t,i)^gamma BCE_i, a_i = alpha (y=1) or 1 - alpha (y=0),
    p_t = exp(-BCE) (xrisk's per-sample weight; LibAUC 2.0.1 reverses alpha).

    d FL / dz = a g [(1-p_t)^gamma + gamma p_t BCE (1-p_t)^(gamma-1)], g = sigmoid(z) - y
    (the second term tends to 0 as p_t -> 1, and is 0 for gamma = 0).
    """
    z, positive, _, _ = _batch(logits, labels)
    y = positive.astype(np.float64)
    n = len(z)
    bce, sig = _bce_with_logits(z, y)
    loss, grad = 0.0, np.zeros(n)
    for i in range(n):
        weight = alpha if positive[i] else 1 - alpha
        p_t = np.exp(-bce[i])
        miss = -np.expm1(-bce[i])  # 1 - p_t without cancellation
        loss += weight * miss**gamma * bce[i]
        second = gamma * p_t * bce[i] * miss ** (gamma - 1) if gamma > 0 and miss > 0 else 0.0
        grad[i] = weight * (sig[i] - y[i]) * (miss**gamma + second)
    return float(loss / n), grad / n, {}, {}
