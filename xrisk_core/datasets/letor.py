"""The LightGBM learning-to-rank example set (shipped), as query-grouped features."""

from __future__ import annotations

import gzip
import io

import numpy as np

from ._files import data_file

__all__ = ["load_lightgbm_rank"]

_NUM_FEATURES = 300


def load_lightgbm_rank(split: str = "train") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LightGBM's lambdarank example: documents with 300 features and graded relevance 0-4.

    Parameters
    ----------
    split : {"train", "test"}, default "train"
        train: 3,005 documents in 201 queries; test: 768 documents in 50 queries.

    Returns
    -------
    features : numpy.ndarray of float64, shape (num_documents, 300)
    relevance : numpy.ndarray of int64, shape (num_documents,)
    query_ids : numpy.ndarray of int64, shape (num_documents,)
        Query of each document, ``0 .. num_queries - 1`` in file order (documents of a query
        are contiguous). Pass to :func:`xrisk.metrics.ndcg_at_k` as ``query_ids``.

    Examples
    --------
    >>> from xrisk.datasets import load_lightgbm_rank
    >>> x, rel, qid = load_lightgbm_rank("test")
    >>> x.shape, int(qid.max()) + 1
    ((768, 300), 50)
    """
    if split not in ("train", "test"):
        raise ValueError(f"load_lightgbm_rank: split={split!r}; expected 'train' or 'test'.")
    from sklearn.datasets import load_svmlight_file  # here: scikit-learn takes seconds to import

    raw = gzip.decompress(data_file("lightgbm_rank", f"rank.{split}.gz").read_bytes())
    features, labels = load_svmlight_file(io.BytesIO(raw), n_features=_NUM_FEATURES)
    sizes = np.loadtxt(data_file("lightgbm_rank", f"rank.{split}.query"), dtype=np.int64, ndmin=1)
    query_ids = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    return np.asarray(features.toarray(), dtype=np.float64), labels.astype(np.int64), query_ids
