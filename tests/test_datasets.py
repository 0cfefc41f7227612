"""Datasets: shapes and counts of every loader, the MovieLens protocol, generators, bad input."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

from xrisk.datasets import (
    ImbalancedDataGenerator,
    IndexedDataset,
    augment_images,
    contrastive_views,
    load_breast_cancer,
    load_digits,
    load_lightgbm_rank,
    load_mnist_5k,
    load_movielens,
)
from xrisk.metrics import ideal_dcg, ndcg_at_k
from xrisk.samplers import TriSampler


def test_imbalanced_generator_libauc_vector():
    # LibAUC 2.0.1's generator on arange(100), 10 classes, imratio 0.1 -> 55 samples, 5 positives
    x, y = ImbalancedDataGenerator(0.1, seed=0).transform(np.arange(100), np.arange(100) % 10)
    assert x.shape == (55,) and y.dtype == np.int64 and int(y.sum()) == 5
    assert ((x % 10 >= 5) == (y == 1)).all()  # classes 5..9 are positive
    again = ImbalancedDataGenerator(0.1, seed=0).transform(np.arange(100), np.arange(100) % 10)
    np.testing.assert_array_equal(x, again[0])
    other = ImbalancedDataGenerator(0.1, seed=1).transform(np.arange(100), np.arange(100) % 10)
    assert not np.array_equal(x, other[0])
    x, y = ImbalancedDataGenerator(0.5, shuffle=False).transform(np.arange(10), np.arange(10) % 2)
    np.testing.assert_array_equal(y, np.arange(10) % 2)


@pytest.mark.parametrize(
    ("ratio", "targets", "match"),
    [
        (0.0, np.arange(10) % 2, "imratio=0.0"),
        (0.7, np.arange(10) % 2, "imratio=0.7"),
        (0.1, np.zeros(10, dtype=int), "single class"),
        (0.1, -(np.arange(10) % 2), "negative"),
        (0.1, np.arange(10) % 2 + 0.5, "non-integer"),
        (0.4, np.array([0] * 9 + [1]), "positives exist"),
    ],
)
def test_imbalanced_generator_bad_input(ratio, targets, match):
    with pytest.raises(ValueError, match=match):
        ImbalancedDataGenerator(seed=0).transform(np.arange(10), targets, imratio=ratio)


def test_breast_cancer_and_digits():
    x, y = load_breast_cancer()
    assert x.shape == (569, 30) and x.dtype == np.float64 and int(y.sum()) == 212
    x, y = load_breast_cancer(imratio=0.05, seed=1)
    assert int((y == 0).sum()) == 357 and int(y.sum()) == int(0.05 / 0.95 * 357)
    x, y = load_digits(positive_class=3)
    assert x.shape == (1797, 64) and int(y.sum()) == 183 and x.max() <= 1.0
    x, y = load_digits(positive_class=0, imratio=0.02)
    assert y.mean() == pytest.approx(0.02, abs=0.002)
    with pytest.raises(ValueError, match="positive_class=10"):
        load_digits(positive_class=10)


def test_mnist_5k():
    images, digits = load_mnist_5k()
    assert images.shape == (5000, 28, 28) and images.dtype == np.float64
    assert 0.0 <= images.min() and images.max() <= 1.0
    np.testing.assert_array_equal(np.bincount(digits), [500] * 10)
    images, y = load_mnist_5k(positive_class=4, imratio=0.01, seed=2)
    assert int((y == 0).sum()) == 4500 and int(y.sum()) == int(0.01 / 0.99 * 4500)
    with pytest.raises(ValueError, match="needs a positive_class"):
        load_mnist_5k(imratio=0.1)


def test_contrastive_views_are_pure_per_index():
    images, _ = load_mnist_5k()
    a1, b1 = contrastive_views(images, np.array([3, 7, 9]), seed=1, epoch=2)
    a2, _ = contrastive_views(images, np.array([9, 3]), seed=1, epoch=2)
    np.testing.assert_array_equal(a1[[2, 0]], a2)  # same example, same view, any batch
    assert not np.allclose(a1, b1)
    a3, _ = contrastive_views(images, np.array([3, 7, 9]), seed=1, epoch=3)
    assert not np.allclose(a1, a3)
    shifted = augment_images(images[:4], seed=0, noise_std=0.0, contrast=(1.0, 1.0))
    assert shifted.shape == (4, 28, 28)
    assert np.allclose(shifted.sum(axis=(1, 2)), images[:4].sum(axis=(1, 2)), rtol=0.2)
    with pytest.raises(IndexError, match="beyond the data"):
        contrastive_views(images, np.array([5000]))


def test_movielens_protocol():
    data = load_movielens()
    assert (data.num_users, data.num_items) == (610, 9724)
    train, val, test = (data.interactions(s) for s in ("train", "val", "test"))
    assert test.shape == val.shape == (3050, 3)
    assert train.shape[0] + 2 * 3050 == 100_836
    assert np.bincount(test[:, 0].astype(int), minlength=610).tolist() == [5] * 610
    for split in (train, val, test):  # no (user, movie) pair appears in two splits
        assert split[:, 2].min() >= 0.5 and split[:, 2].max() <= 5.0
    keys = [set(map(tuple, s[:, :2].astype(int).tolist())) for s in (train, val, test)]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    # ideal DCG of the training ratings, precomputed
    user = 17
    ratings = train[train[:, 0] == user, 2]
    assert data.ideal_dcg_train[user] == pytest.approx(ideal_dcg(ratings)[0])
    items, relevance, users = data.eval_candidates("test", num_negatives=50, seed=0)
    assert items.shape == relevance.shape == (610, 55) and users.tolist() == list(range(610))
    rated = set(map(tuple, np.concatenate([train, val, test])[:, :2].astype(int).tolist()))
    assert all((u, i) not in rated for u in range(0, 610, 37) for i in items[u, 5:])
    assert (relevance[:, :5] > 0).all() and (relevance[:, 5:] == 0).all()
    perfect = ndcg_at_k(relevance, relevance + 1e-3 * np.arange(55)[::-1], 10)
    assert perfect == pytest.approx(1.0)
    sampler = TriSampler(train, 10, num_sampled_tasks=61, num_pos=5, mode="ranking",
                         num_items=data.num_items)  # fmt: skip
    assert len(sampler) == 10
    with pytest.raises(ValueError, match="split='dev'"):
        data.interactions("dev")


def test_movielens_time_order():
    data = load_movielens()
    from xrisk.datasets.movielens import _read_ratings

    table = _read_ratings()
    first_user = table[table[:, 0] == data.user_ids[0]]
    latest = np.sort(first_user[:, 3])[-5:]
    test_movies = data.movie_ids[data.interactions("test")[:5, 1].astype(int)]
    picked = first_user[np.isin(first_user[:, 1], test_movies), 3]
    np.testing.assert_array_equal(np.sort(picked), latest)


def test_lightgbm_rank():
    x, rel, qid = load_lightgbm_rank("train")
    assert x.shape == (3005, 300) and rel.shape == qid.shape == (3005,)
    assert int(qid.max()) + 1 == 201 and set(np.unique(rel)) <= {0, 1, 2, 3, 4}
    assert (np.diff(qid) >= 0).all()
    x, rel, qid = load_lightgbm_rank("test")
    assert x.shape == (768, 300) and int(qid.max()) + 1 == 50
    value = ndcg_at_k(rel, x[:, 0], 5, query_ids=qid, no_relevant="zero")
    assert 0.0 <= value <= 1.0
    with pytest.raises(ValueError, match="split='valid'"):
        load_lightgbm_rank("valid")


def test_indexed_dataset():
    ds = IndexedDataset(np.arange(12).reshape(6, 2), np.array([0, 1] * 3), transform=lambda v: -v)
    x, y, i = ds[4]
    assert x.tolist() == [-8, -9] and int(y) == 0 and i == 4
    assert ds[(2, 1)][2] == (2, 1)
    xb, yb, ib = ds.batch([5, 0])
    assert xb.tolist() == [[-10, -11], [0, -1]] and ib.tolist() == [5, 0]
    with pytest.raises(IndexError, match=r"\[6\] are beyond the data"):
        ds.batch([6])
    with pytest.raises(ValueError, match="negative"):
        ds[-1]
    with pytest.raises(ValueError, match="5 rows but targets has 6"):
        IndexedDataset(np.zeros((5, 2)), np.zeros(6))


@pytest.mark.parametrize(
    "module", ["imbalanced", "tabular", "mnist", "movielens", "letor", "indexed"]
)
def test_docstring_examples(module):
    mod = importlib.import_module(f"xrisk.datasets.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
