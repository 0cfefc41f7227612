"""Independent numpy float64 references of the multi-label losses (AUC-M, mAP, partial AUC).

They share no code with xrisk. Each one is written from the *definition* of the multi-label
objective, not from xrisk's implementation: label t is its own binary problem on the rows
whose label t is observed (a NaN label is dropped, as if the row were not in the batch), run
with the single-label numpy references of ``tests._reference`` and
``tests._reference_classification`` on a plain Python loop over labels; its state lives in
rows ``t * num_samples + i`` of the (label, sample) tables and in row t of the per-label
global entries. With ``task`` given only the labels that appear in it are active. The loss
is the mean over the active labels (all of them without ``task``); a label without an
observed row contributes nothing.

Every function returns ``(loss, grad_scores (B, K), grad_params, new_state)``.
"""

from __future__ import annotations

import numpy as np

from tests import _reference, _reference_classification

__all__ = ["multilabel_aucm", "mean_ap", "multilabel_pauc", "PAUC_STEPS"]


def _labels(scores, labels, task):
    """float64 scores (B, K), float labels (B, K) with NaN kept, active labels, their count."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    num_labels = s.shape[1]
    if task is None:
        active = np.ones(num_labels, dtype=bool)
        count = num_labels
    else:
        active = np.isin(np.arange(num_labels), np.asarray(task).reshape(-1))
        count = max(int(active.sum()), 1)
    return s, y, active, count


def _observed(y, t):
    """Positions whose label t is observed (not NaN), and those labels as ints."""
    rows = np.flatnonzero(~np.isnan(y[:, t]))
    return rows, y[rows, t].astype(np.int64)


def multilabel_aucm(scores, labels, params, *, margin, version, imratio, task=None):
    """Mean over the active labels of AUC-M on each label's observed rows, with a_t, b_t,
    alpha_t; gradients with respect to scores and to a, b, alpha (each (K,))."""
    s, y, active, count = _labels(scores, labels, task)
    num_labels = s.shape[1]
    loss, grad = 0.0, np.zeros_like(s)
    grads = {name: np.zeros(num_labels) for name in ("a", "b", "alpha")}
    for t in range(num_labels):
        rows, y_t = _observed(y, t)
        if not active[t] or rows.size == 0:
            continue
        value, g, g_a, g_b, g_alpha = _reference.aucm_loss(
            s[rows, t], y_t, float(params["a"][t]), float(params["b"][t]),
            float(params["alpha"][t]), margin=margin, version=version, imratio=imratio)
        loss += value
        grad[rows, t] += g
        grads["a"][t], grads["b"][t], grads["alpha"][t] = g_a, g_b, g_alpha
    return loss / count, grad / count, {k: v / count for k, v in grads.items()}, {}


def _per_label(step, scores, labels, index, task, state, *, num_samples, per_label=()):
    """Run ``step(scores, labels, index, state) -> (loss, grad, new_state)`` on every active
    label's observed rows, index shifted to the label's rows of the tables."""
    s, y, active, count = _labels(scores, labels, task)
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    new_state = {k: np.array(v, dtype=np.float64) for k, v in state.items()}
    loss, grad = 0.0, np.zeros_like(s)
    for t in range(s.shape[1]):
        rows, y_t = _observed(y, t)
        if not active[t] or rows.size == 0:
            continue
        own = {k: (v[t] if k in per_label else v) for k, v in new_state.items()}
        value, g, after = step(s[rows, t], y_t, index[rows] + t * num_samples, own)
        loss += value
        grad[rows, t] += g
        for k, v in after.items():
            if k in per_label:
                new_state[k][t] = v
            else:
                new_state[k] = np.array(v, dtype=np.float64)
    return loss / count, grad / count, {}, new_state


def mean_ap(scores, labels, index, state, *, num_samples, gamma, margin, surrogate_name,
            scale, task=None):
    """Mean over labels of one SOAP (APLoss) step per label; state {"u": (K*N, 2)}."""
    def step(s, y, idx, own):
        value, g, u_all, u_pos = _reference.ap_step(
            own["u"][:, 0], own["u"][:, 1], s, y, idx, gamma=gamma, margin=margin,
            surrogate_name=surrogate_name, scale=scale)
        return value, g, {"u": np.stack([u_all, u_pos], axis=1)}
    return _per_label(step, scores, labels, index, task, state, num_samples=num_samples)


def _pauc_step(function, **options):
    def step(s, y, idx, own):
        value, g, _, after = function(s, y, idx, own, **options)
        return value, g, after
    return step


#: mode -> (single-label reference, its global (per-label) state fields, option names
#: (reference keyword <- definition attribute)).
PAUC_STEPS = {
    "SOPA": (_reference_classification.pauc_cvar, (),
             {"beta": "beta", "eta": "eta", "margin": "margin"}),
    "SOPAs": (_reference_classification.pauc_dro, (),
              {"gamma": "gamma", "lam": "lam", "margin": "margin"}),
    "SOTAs": (_reference_classification.tpauc_kl, ("w",),
              {"tau": "tau", "lam": "lam", "gammas": "gammas", "margin": "margin"}),
    "STACO": (_reference_classification.tpauc_cvar, ("s2",),
              {"threshold": "margin", "alpha": "alpha", "beta0": "beta_0", "beta1": "beta_1",
               "theta0": "theta_0", "theta1": "theta_1"}),
}
PAUC_STEPS["1w"], PAUC_STEPS["2w"] = PAUC_STEPS["SOPAs"], PAUC_STEPS["SOTAs"]


def multilabel_pauc(scores, labels, index, state, *, mode, num_samples, options,
                    surrogate_name, scale, task=None):
    """Mean over labels of one step of the ``mode`` pAUC loss per label; ``options`` maps the
    single-label reference's keyword names to values."""
    function, per_label, _ = PAUC_STEPS[mode]
    step = _pauc_step(function, surrogate_name=surrogate_name, scale=scale, **options)
    return _per_label(step, scores, labels, index, task, state, num_samples=num_samples,
                      per_label=per_label)
