"""Independent numpy float64 references of the ranking losses (one step, plain loops).

Written from the math of LibAUC 2.0.1's ``ListwiseCELoss`` and ``NDCGLoss`` (SONG, K-SONG) with
xrisk's documented choices (per-row log-shift of listwise CE, masks of padded positives,
pooled duplicates, the chain-rule factor alpha of K-SONG 'theo'). No xrisk code is used.
Each function returns ``(loss, d loss / d scores, new state)``.
"""

from __future__ import annotations

import math

import numpy as np

from tests._reference import surrogate


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def _valid_mask(mask, shape):
    return np.ones(shape, dtype=bool) if mask is None else np.asarray(mask).astype(bool)


def _groups(keys, keep):
    """key -> list of flat positions that are kept."""
    out = {}
    for pos, (key, kept) in enumerate(zip(keys, keep, strict=True)):
        if kept:
            out.setdefault(int(key), []).append(pos)
    return out


def listwise_ce_step(u, scores, interaction, mask=None, *, gamma):
    """One ListwiseCELoss step; ``u`` (N, 2) holds [u~, c] with u = u~ exp(c)."""
    s = np.asarray(scores, dtype=np.float64)
    interaction = np.asarray(interaction)
    q_count, p_count = interaction.shape
    m_count = s.shape[1] - p_count
    valid = _valid_mask(mask, interaction.shape)
    d = s[:, None, p_count:] - s[:, :p_count, None]  # (Q, P, M)
    u = np.array(u, dtype=np.float64)
    flat_d = d.reshape(-1, m_count)
    for key, members in _groups(interaction.reshape(-1), valid.reshape(-1)).items():
        largest = max(flat_d[i].max() for i in members)
        tilde, shift = u[key]
        carry = (1 - gamma) * tilde
        if carry > 0:
            candidate = shift + math.log(carry)
            new_shift = max(largest, candidate)
            carried = math.exp(candidate - new_shift)
        else:
            new_shift, carried = largest, 0.0
        fresh = np.mean([np.mean(np.exp(flat_d[i] - new_shift)) for i in members])
        u[key] = (carried + gamma * fresh, new_shift)
    rows = max(int(valid.any(axis=1).sum()), 1)
    loss, grad = 0.0, np.zeros_like(s)
    for q in range(q_count):
        for i in range(p_count):
            if not valid[q, i]:
                continue
            tilde, shift = u[interaction[q, i]]
            for j in range(m_count):
                w = math.exp(d[q, i, j] - shift) / tilde / rows
                loss += w * d[q, i, j]
                grad[q, p_count + j] += w
                grad[q, i] -= w
    return loss, grad, {"u": u}


def ndcg_step(state, scores, relevance, query, interaction, num_relevant, ideal_dcg,
              mask=None, num_candidates=None, *, num_items, gamma0, gamma1=0.9, eta0=0.01,
              margin=1.0, top_k=None, top_k_version="theo", tau_1=0.01, tau_2=1e-4,
              sigmoid_alpha=2.0, surrogate_name="squared_hinge", scale=1.0):
    """One NDCGLoss step (SONG, or K-SONG with ``top_k``); state keys u, lambda_q, s_q."""
    s = np.asarray(scores, dtype=np.float64)
    interaction, query = np.asarray(interaction), np.asarray(query)
    q_count, p_count = interaction.shape
    c_count = s.shape[1]
    valid = _valid_mask(mask, interaction.shape)
    col_valid = np.ones((q_count, c_count), dtype=bool)
    col_valid[:, :p_count] = valid
    n_cand = col_valid.sum(axis=1).astype(np.float64)
    size = (np.full(q_count, float(num_items)) if num_items is not None
            else np.asarray(num_candidates, dtype=np.float64).reshape(-1))
    rel = np.asarray(relevance, dtype=np.float64)
    gain = 2.0 ** rel - 1

    # g and its derivatives
    g = np.zeros((q_count, p_count))
    slope_pairs = np.zeros((q_count, p_count, c_count))
    for q in range(q_count):
        for i in range(p_count):
            value, slope = surrogate(surrogate_name, s[q, i] - s[q], margin, scale)
            g[q, i] = np.sum(value * col_valid[q]) / n_cand[q]
            slope_pairs[q, i] = slope * col_valid[q] / n_cand[q]

    u = np.array(state["u"], dtype=np.float64)
    for key, members in _groups(interaction.reshape(-1), valid.reshape(-1)).items():
        u[key] = (1 - gamma0) * u[key] + gamma0 * np.mean([g.reshape(-1)[i] for i in members])
    if top_k is not None:
        lambda_q = np.array(state["lambda_q"], dtype=np.float64)
        s_q = np.array(state["s_q"], dtype=np.float64)

    eps = np.finfo(np.float64).eps
    u_batch = u[interaction]
    log_rank = np.maximum(np.log1p(size[:, None] * u_batch), eps)
    slope_f = gain * size[:, None] * math.log(2) / (log_rank**2 * (1 + size[:, None] * u_batch))
    weight = slope_f.copy()
    extra_w = np.zeros((q_count, p_count))  # coefficient of (h_qi - implicit_q)
    implicit_coef = np.zeros((q_count, c_count))  # d implicit_q / d h_qj
    if top_k is not None:
        old_lambda = lambda_q[query]
        above = _sigmoid((s - old_lambda[:, None]) / tau_1)
        rate = np.sum(above * col_valid, axis=1) / n_cand
        estimate = top_k / size + tau_2 * old_lambda - rate
        groups = {}
        for r, key in enumerate(query):
            groups.setdefault(int(key), []).append(r)
        for key, rows in groups.items():
            lambda_q[key] = lambda_q[key] - eta0 * np.mean(estimate[rows])
        psi = _sigmoid(sigmoid_alpha * (s[:, :p_count] - old_lambda[:, None]))
        weight = slope_f * psi
        below = _sigmoid(-(s - old_lambda[:, None]) / tau_1)  # 1 - above, no cancellation
        curvature = above * below / tau_1 * col_valid
        s_estimate = tau_2 + curvature.sum(axis=1) / n_cand
        for key, rows in groups.items():  # tracked in both variants, used by 'theo'
            s_q[key] = gamma1 * np.mean(s_estimate[rows]) + (1 - gamma1) * s_q[key]
        if top_k_version == "theo":
            s_new = s_q[query]
            implicit_coef = curvature / (n_cand * s_new)[:, None]
            f_value = -gain * math.log(2) / log_rank
            psi_low = _sigmoid(-sigmoid_alpha * (s[:, :p_count] - old_lambda[:, None]))
            extra_w = sigmoid_alpha * psi * psi_low * f_value

    outer = np.asarray(num_relevant, dtype=np.float64) / np.asarray(ideal_dcg, dtype=np.float64)
    rows = max(int(valid.any(axis=1).sum()), 1)
    loss, grad = 0.0, np.zeros_like(s)
    for q in range(q_count):
        n_valid = max(int(valid[q].sum()), 1)
        implicit = np.sum(implicit_coef[q] * s[q])
        for i in range(p_count):
            if not valid[q, i]:
                continue
            c = outer[q] / n_valid / rows
            loss += c * (weight[q, i] * g[q, i] + extra_w[q, i] * (s[q, i] - implicit))
            # d g_qi / d h: +slope at i (sum over j), -slope at each j
            grad[q, i] += c * weight[q, i] * slope_pairs[q, i].sum()
            grad[q] -= c * weight[q, i] * slope_pairs[q, i]
            grad[q, i] += c * extra_w[q, i]
            grad[q] -= c * extra_w[q, i] * implicit_coef[q]
    if top_k is None:
        return loss, grad, {"u": u}
    return loss, grad, {"u": u, "lambda_q": lambda_q, "s_q": s_q}


def song_objective(scores, relevance, num_relevant, ideal_dcg, *, num_items, margin=1.0,
                   surrogate_name="squared_hinge", scale=1.0):
    """SONG's objective F on full candidate lists (no padding): mean over queries of
    |S_q^+| / Z_q * mean_i -(2^y - 1) / log2(1 + N g_qi)."""
    s = np.asarray(scores, dtype=np.float64)
    q_count, p_count = np.asarray(relevance).shape
    total = 0.0
    for q in range(q_count):
        terms = []
        for i in range(p_count):
            value, _ = surrogate(surrogate_name, s[q, i] - s[q], margin, scale)
            g = value.mean()
            terms.append(-(2.0 ** relevance[q, i] - 1) / math.log2(1 + num_items * g))
        total += num_relevant[q] / ideal_dcg[q] * np.mean(terms)
    return total / q_count
