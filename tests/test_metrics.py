"""Metrics: agreement with scikit-learn and brute-force numpy definitions; bad input."""

from __future__ import annotations

import doctest
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, ndcg_score, roc_auc_score

from xrisk.metrics import (
    auroc,
    average_precision,
    evaluate,
    ideal_dcg,
    map_at_k,
    ndcg_at_k,
    one_way_partial_auroc,
    precision_at_k,
    recall_at_k,
    two_way_partial_auroc,
)


def scored(n_pos, n_neg, seed, ties=False):
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.array([1] * n_pos + [0] * n_neg))
    s = rng.normal(size=y.size) + 0.8 * y
    if ties:
        s = np.round(s, 1)
    return y, s


def pair_area(y, s, top_neg, bottom_pos):
    """Brute force: share of (positive, negative) pairs ranked right, over the chosen subsets,
    normalised by n_pos * n_neg (ties count one half)."""
    pos, neg = np.sort(s[y == 1]), np.sort(s[y == 0])[::-1]
    pos, neg = pos[:bottom_pos], neg[:top_neg]
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / ((y == 1).sum() * (y == 0).sum())


# -- classification ------------------------------------------------------------------------


@pytest.mark.parametrize("ties", [False, True])
def test_auroc_and_ap_match_sklearn(ties):
    y, s = scored(17, 60, 1, ties)
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_multilabel_reductions():
    y1, s1 = scored(10, 30, 2)
    y2, s2 = scored(5, 35, 3)
    y = np.column_stack([y1, y2, np.zeros(40, dtype=int), np.ones(40, dtype=int)])
    s = np.column_stack([s1, s2, s1, s2])
    per = auroc(y, s, average=None)
    assert per[:2] == pytest.approx([roc_auc_score(y1, s1), roc_auc_score(y2, s2)])
    assert np.isnan(per[2:]).all()
    assert auroc(y, s) == pytest.approx(np.mean(per[:2]))
    ap = average_precision(y, s, average=None)
    assert np.isnan(ap[2]) and ap[3] == pytest.approx(1.0)  # no positives: undefined (LibAUC: 0)
    assert average_precision(y, s) == pytest.approx(np.mean(ap[[0, 1, 3]]))
    pauc = one_way_partial_auroc(y, s, max_fpr=0.3, scale="mcclish", average=None)
    assert pauc[0] == pytest.approx(roc_auc_score(y1, s1, max_fpr=0.3))


@pytest.mark.parametrize("beta", [0.05, 0.1, 0.3, 0.5, 0.77, 1.0])
@pytest.mark.parametrize("ties", [False, True])
def test_one_way_mcclish_matches_sklearn(beta, ties):
    y, s = scored(23, 57, 4, ties)
    expected = roc_auc_score(y, s, max_fpr=beta) if beta < 1 else roc_auc_score(y, s)
    assert one_way_partial_auroc(y, s, max_fpr=beta, scale="mcclish") == pytest.approx(expected)


@pytest.mark.parametrize("top", [1, 5, 12, 40])
def test_one_way_raw_is_the_pair_count(top):
    y, s = scored(20, 40, 5)
    beta = top / 40
    raw = one_way_partial_auroc(y, s, max_fpr=beta, scale="raw")
    assert raw == pytest.approx(pair_area(y, s, top, 20))
    assert one_way_partial_auroc(y, s, max_fpr=beta) == pytest.approx(raw / beta)


@pytest.mark.parametrize(("top", "bottom"), [(1, 1), (4, 10), (40, 20), (40, 1), (1, 20), (7, 3)])
def test_two_way_is_auc_of_hard_subsets(top, bottom):
    y, s = scored(20, 40, 6)
    beta, alpha = top / 40, 1 - bottom / 20
    raw = two_way_partial_auroc(y, s, max_fpr=beta, min_tpr=alpha, scale="raw")
    assert raw == pytest.approx(pair_area(y, s, top, bottom))
    normalized = two_way_partial_auroc(y, s, max_fpr=beta, min_tpr=alpha)
    assert normalized == pytest.approx(raw / (beta * (1 - alpha)))


def test_two_way_edges_b16():
    y, s = scored(3, 5, 7)
    assert two_way_partial_auroc(y, s, max_fpr=1.0, min_tpr=0.0) == pytest.approx(auroc(y, s))
    one = one_way_partial_auroc(y, s, max_fpr=0.4)
    assert two_way_partial_auroc(y, s, max_fpr=0.4, min_tpr=0.0) == pytest.approx(one)
    # selections equal to a whole class and a single positive: defined, no crash
    for beta, alpha in [(1.0, 0.01), (0.01, 0.99), (0.2, 0.5)]:
        value = two_way_partial_auroc(y, s, max_fpr=beta, min_tpr=alpha)
        assert 0.0 <= value <= 1.0
    assert two_way_partial_auroc([1, 0], [0.9, 0.1], max_fpr=0.5, min_tpr=0.5) == 1.0


@settings(max_examples=30, deadline=None)
@given(n_pos=st.integers(1, 12), n_neg=st.integers(1, 12), seed=st.integers(0, 999),
       beta=st.floats(0.01, 1.0), alpha=st.floats(0.0, 0.99))  # fmt: skip
def test_partial_auc_bounds(n_pos, n_neg, seed, beta, alpha):
    y, s = scored(n_pos, n_neg, seed, ties=True)
    one = one_way_partial_auroc(y, s, max_fpr=beta, scale="raw")
    two = two_way_partial_auroc(y, s, max_fpr=beta, min_tpr=alpha, scale="raw")
    assert -1e-12 <= two <= one + 1e-12 <= beta + 2e-12
    assert two <= beta * (1 - alpha) + 1e-12


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: auroc([1, 1, 1], [0.1, 0.2, 0.3]), "single class"),
        (lambda: auroc([1, 0, 2], [0.1, 0.2, 0.3]), r"contains \[2\]"),
        (lambda: auroc([1, 0, np.nan], [0.1, 0.2, 0.3]), "NaN"),
        (lambda: auroc([1, 0, 0], [0.1, np.nan, 0.3]), "non-finite"),
        (lambda: auroc([1, 0, 0], [0.1, 0.3]), "shape"),
        (lambda: average_precision([0, 0], [0.1, 0.2]), "single class"),
        (lambda: one_way_partial_auroc([1, 0], [1, 0], max_fpr=0.0), "max_fpr=0.0"),
        (lambda: one_way_partial_auroc([1, 0], [1, 0], max_fpr=1.5), "max_fpr=1.5"),
        (lambda: one_way_partial_auroc([1, 0], [1, 0], max_fpr=0.5, scale="x"), "scale='x'"),
        (lambda: two_way_partial_auroc([1, 0], [1, 0], max_fpr=0.5, min_tpr=1.0), "min_tpr=1.0"),
        (lambda: auroc([1, 0], [1, 0], average="micro"), "average='micro'"),
        (lambda: auroc(np.zeros((3, 2)), np.zeros((3, 2))), "no label column"),
    ],
)
def test_classification_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -- ranking -------------------------------------------------------------------------------


def brute_ranking(rel, score, k, ties="pessimistic"):
    """Per query: (dcg_exp, idcg_exp, precision, recall, ap) with textbook loops."""
    out = []
    for r, s in zip(rel, score, strict=True):
        order = sorted(
            range(len(r)), key=lambda i: (-s[i], r[i] if ties == "pessimistic" else -r[i])
        )
        ranked = [r[i] for i in order]
        dcg = sum((2 ** ranked[i] - 1) / math.log2(i + 2) for i in range(min(k, len(r))))
        best = sorted(r, reverse=True)
        idcg = sum((2 ** best[i] - 1) / math.log2(i + 2) for i in range(min(k, len(r))))
        hits = [ranked[i] > 0 for i in range(min(k, len(r)))]
        total = sum(x > 0 for x in r)
        ap = sum(sum(hits[: i + 1]) / (i + 1) for i in range(len(hits)) if hits[i])
        out.append((dcg, idcg, sum(hits) / k, sum(hits) / total if total else np.nan,
                    ap / min(total, k) if total else np.nan))  # fmt: skip
    return np.array(out)


@pytest.mark.parametrize("k", [1, 3, 10, 50])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_ranking_metrics_match_brute_force(k, ties):
    rng = np.random.default_rng(k)
    rel = rng.integers(0, 4, size=(12, 20)) * (rng.random((12, 20)) < 0.4)
    rel[0] = 0  # a query without relevant items
    score = np.round(rng.normal(size=(12, 20)), 1)  # with ties
    ref = brute_ranking(rel, score, k, ties)
    defined = ref[:, 1] > 0
    ndcg = ndcg_at_k(rel, score, k, ties=ties, average=None)
    np.testing.assert_allclose(ndcg[defined], ref[defined, 0] / ref[defined, 1])
    assert np.isnan(ndcg[~defined]).all()
    assert ndcg_at_k(rel, score, k, ties=ties) == pytest.approx(
        np.mean(ref[defined, 0] / ref[defined, 1])
    )
    np.testing.assert_allclose(precision_at_k(rel, score, k, ties=ties, average=None), ref[:, 2])
    np.testing.assert_allclose(recall_at_k(rel, score, k, ties=ties, average=None), ref[:, 3])
    np.testing.assert_allclose(map_at_k(rel, score, k, ties=ties, average=None), ref[:, 4])
    assert map_at_k(rel, score, k, ties=ties, no_relevant="zero") == pytest.approx(
        np.nan_to_num(ref[:, 4]).mean()
    )
    np.testing.assert_allclose(ideal_dcg(rel, k), ref[:, 1])


@pytest.mark.parametrize("k", [1, 5, 20])
def test_ndcg_linear_gain_matches_sklearn(k):
    rng = np.random.default_rng(0)
    rel = rng.integers(0, 5, size=(8, 20))
    rel[:, 0] = 1
    score = rng.normal(size=(8, 20))  # no ties
    ours = ndcg_at_k(rel, score, k, gain="linear")
    assert ours == pytest.approx(ndcg_score(rel, score, k=k))


def test_ties_rule_and_no_relevant_rules():
    rel, score = [[1, 0, 0, 1]], [[0.5, 0.5, 0.5, 0.5]]
    assert precision_at_k(rel, score, 2) == 0.0  # pessimistic: relevant items last
    assert precision_at_k(rel, score, 2, ties="optimistic") == 1.0
    empty = [[0, 0, 0]], [[0.1, 0.2, 0.3]]
    assert ndcg_at_k(*empty, 2, no_relevant="zero") == 0.0
    assert ndcg_at_k(*empty, 2, no_relevant="one") == 1.0
    with pytest.raises(ValueError, match="no query has a relevant item"):
        ndcg_at_k(*empty, 2)


def test_query_ids_equal_padded_rows():
    rng = np.random.default_rng(3)
    sizes = [3, 7, 5]
    qid = np.repeat([10, 4, 7], sizes)
    rel = rng.integers(0, 3, size=qid.size)
    score = rng.normal(size=qid.size)
    flat = ndcg_at_k(rel, score, 4, query_ids=qid, average=None)
    for value, q in zip(flat, [4, 7, 10], strict=True):  # queries in sorted id order
        one = ndcg_at_k(rel[qid == q][None], score[qid == q][None], 4, no_relevant="zero")
        assert value == pytest.approx(one) or (np.isnan(value) and one == 0.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 0), "k=0"),
        (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 2.5), "k=2.5"),
        (lambda: ndcg_at_k(np.zeros((2, 0)), np.zeros((2, 0)), 1), "empty queries"),
        (lambda: ndcg_at_k([[1, -1]], [[0.1, 0.2]], 1), r"relevance contains \[-1.0\]"),
        (lambda: ndcg_at_k([[1, 0]], [[0.1, np.nan]], 1), "NaN"),
        (lambda: ndcg_at_k([[1, 0]], [[0.1]], 1), "shape"),
        (lambda: ndcg_at_k([1, 0], [0.1, 0.2], 1, query_ids=[0]), "query_ids"),
        (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 1, ties="random"), "ties='random'"),
        (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 1, gain="log"), "gain='log'"),
    ],
)
def test_ranking_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -- evaluate and frameworks ---------------------------------------------------------------


def test_evaluate_all_in_one():
    y, s = scored(10, 30, 8)
    result = evaluate(y, s, metrics=["auroc", "ap", "pauc", "pauc_raw", "pauc_mcclish", "tpauc"],
                      max_fpr=0.3, min_tpr=0.2)  # fmt: skip
    assert list(result) == ["auroc", "ap", "pauc", "pauc_raw", "pauc_mcclish", "tpauc"]
    assert result["pauc_mcclish"] == pytest.approx(roc_auc_score(y, s, max_fpr=0.3))
    rel = np.array([[3, 0, 1, 0]])
    score = np.array([[0.1, 0.4, 0.9, 0.2]])
    ranking = evaluate(rel, score, metrics=["ndcg@2", "map@3", "precision@1", "recall@4"])
    assert ranking["precision@1"] == 1.0 and ranking["recall@4"] == 1.0
    with pytest.raises(ValueError, match="needs max_fpr"):
        evaluate(y, s, metrics=["pauc"])
    with pytest.raises(ValueError, match="unknown metric 'ndcg@x'"):
        evaluate(rel, score, metrics=["ndcg@x"])


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_metrics_accept_framework_arrays(framework):
    y, s = scored(15, 45, 9)
    rel = np.abs(np.round(s.reshape(6, 10), 0))
    if framework == "torch":
        torch = pytest.importorskip("torch")
        convert = lambda a: torch.tensor(a, requires_grad=a.dtype == np.float64)  # noqa: E731
    else:
        jnp = pytest.importorskip("jax.numpy")
        convert = jnp.asarray
    assert auroc(convert(y), convert(s)) == pytest.approx(roc_auc_score(y, s))
    value = two_way_partial_auroc(convert(y), convert(s), max_fpr=0.5, min_tpr=0.3)
    assert value == pytest.approx(two_way_partial_auroc(y, s, max_fpr=0.5, min_tpr=0.3))
    got = ndcg_at_k(convert(rel), convert(s.reshape(6, 10)), 5, no_relevant="zero")
    assert got == pytest.approx(ndcg_at_k(rel, s.reshape(6, 10), 5, no_relevant="zero"))


def test_brute_force_helper_sanity():
    # the pair-count helper agrees with sklearn's full AUROC
    y, s = scored(6, 9, 10, ties=True)
    assert pair_area(y, s, 9, 6) == pytest.approx(roc_auc_score(y, s))


@pytest.mark.parametrize("module", ["classification", "ranking", "evaluate"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"xrisk.metrics.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
