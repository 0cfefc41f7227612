"""Evaluation metrics that accept numpy, torch, TensorFlow and JAX arrays.

Classification (labels in {0, 1}, shape (N,) or (N, T) with macro reduction):
:func:`auroc`, :func:`average_precision`, :func:`one_way_partial_auroc` (raw, normalised or
McClish-standardised), :func:`two_way_partial_auroc`. Ranking (per query): :func:`ndcg_at_k`,
:func:`map_at_k`, :func:`precision_at_k`, :func:`recall_at_k`, :func:`ideal_dcg`.
All in one: :func:`evaluate`. Arrays are converted to numpy (no framework is imported) and
scikit-learn computes the ROC and PR quantities.

Batch by batch: :mod:`xrisk.metrics.streaming` (``update``/``compute``/``reset``/``merge``,
equal to these functions on the concatenated batches), with torchmetrics, Keras and pure JAX
versions in ``xrisk.torch.metrics``, ``xrisk.tensorflow.metrics`` and ``xrisk.jax.metrics``.
"""

from .._inputs import to_numpy
from . import streaming
from .classification import auroc, average_precision, one_way_partial_auroc, two_way_partial_auroc
from .evaluate import METRIC_NAMES, evaluate
from .ranking import ideal_dcg, map_at_k, ndcg_at_k, precision_at_k, recall_at_k

__all__ = [
    "auroc",
    "average_precision",
    "one_way_partial_auroc",
    "two_way_partial_auroc",
    "ndcg_at_k",
    "map_at_k",
    "precision_at_k",
    "recall_at_k",
    "ideal_dcg",
    "evaluate",
    "METRIC_NAMES",
    "to_numpy",
    "streaming",
]
