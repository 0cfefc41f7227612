"""Multi-label classification in the runner: every Tox21 assay at once, missing labels masked.

A multi-label recipe (``method: ml_soap``, ``ml_pesg``, ``ml_sopas`` or ``ml_bce``;
``task: multilabel`` follows) trains an MLP with one logit per label on Morgan fingerprints
of the Tox21 molecules (``data.fingerprint_bits``; RDKit) with

- ``ml_soap``: :class:`xrisk.meanAveragePrecisionLoss` (SOAP on every label) and SOAP;
- ``ml_pesg``: :class:`xrisk.MultiLabelAUCMLoss` (AUC-M per label) and PESG;
- ``ml_sopas``: :class:`xrisk.MultiLabelpAUCLoss` (one-way pAUC, KL-DRO, per label) and SOPAs;
- ``ml_bce``: the per-label binary cross-entropy, the baseline (also the warm-up's loss).

A molecule the assay did not test has a missing label (NaN): the X-risk losses leave it out
of their loss, gradient and state, and the cross-entropy masks it. A metric (``auroc``,
``ap``, ``pauc``, ``tpauc``) is the mean over the labels of the metric on the molecules each
label was measured on, labels with a single class in the split left out.

The molecules are split at random from the seed (``test_size``, then ``validation_size`` of
the rest); ``data.limit`` keeps a seeded subset. ``data.task`` does not apply (all 12 tasks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import Splits, _limited
from .engine import BinaryTask, main_stages, make_sampler, phases, session_class
from .models import layers_weights, mlp_weights
from .recipe import Recipe

__all__ = ["MultiLabelTask", "label_metrics", "load_multilabel"]


def load_multilabel(section: Any, *, seed: int, dtype: str) -> Splits:
    """Tox21's fingerprints (N, bits) and label matrix (N, 12), NaN where not tested, split
    at random from ``seed``.

    Examples
    --------
    >>> from xrisk.runner.recipe import parse_recipe
    >>> from xrisk.runner.multilabel import load_multilabel
    >>> recipe = parse_recipe({"data": {"name": "tox21", "limit": 200,
    ...                                 "fingerprint_bits": 64}, "method": "ml_soap"})
    >>> splits = load_multilabel(recipe.data, seed=0, dtype="float32")
    >>> splits.x_train.shape[1], splits.y_train.shape[1]
    (64, 12)
    """
    from sklearn.model_selection import train_test_split

    from xrisk.datasets import load_tox21, morgan_fingerprints

    smiles, labels = load_tox21()
    rows = _limited(section, len(smiles), seed)
    if rows is not None:
        smiles, labels = smiles[rows], labels[rows]
    x, parsed = morgan_fingerprints(smiles, num_bits=section.fingerprint_bits)
    x, y = x[parsed].astype(np.float64), labels[parsed].astype(np.float64)
    x_rest, x_test, y_rest, y_test = train_test_split(x, y, test_size=section.test_size,
                                                      random_state=seed)
    if section.validation_size > 0:
        x_train, x_val, y_train, y_val = train_test_split(
            x_rest, y_rest, test_size=section.validation_size, random_state=seed)
    else:
        x_train, y_train, x_val, y_val = x_rest, y_rest, x_rest[:0], y_rest[:0]
    cast = np.dtype(dtype)
    return Splits(*(np.ascontiguousarray(a, dtype=cast) for a in
                    (x_train, y_train, x_val, y_val, x_test, y_test)))


def label_metrics(recipe: Recipe, labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Each metric of the recipe, averaged over the labels with both classes among the
    molecules the label was measured on (NaN labels left out).

    >>> import numpy as np
    >>> from xrisk.runner.recipe import parse_recipe
    >>> recipe = parse_recipe({"data": {"name": "tox21"}, "method": "ml_bce"})
    >>> labels = np.array([[1, 0], [0, np.nan], [1, 1], [0, 1]])
    >>> scores = np.array([[0.9, 0.2], [0.1, 0.5], [0.8, 0.3], [0.2, 0.1]])
    >>> label_metrics(recipe, labels, scores)["auroc"]  # label 0: 1.0; label 1: 0.5
    0.75
    """
    from xrisk.metrics import evaluate

    names = list(dict.fromkeys([*recipe.evaluation.metrics, recipe.metric]))
    sums: dict[str, list[float]] = {name: [] for name in names}
    for column in range(labels.shape[1] if labels.ndim == 2 else 0):
        tested = ~np.isnan(labels[:, column])
        y = labels[tested, column]
        if y.size == 0 or y.min() == y.max():
            continue
        values = evaluate(y.astype(np.int64), scores[tested, column], metrics=names,
                          max_fpr=recipe.evaluation.max_fpr, min_tpr=recipe.evaluation.min_tpr)
        for name in names:
            sums[name].append(float(values[name]))
    return {name: float(np.mean(v)) for name, v in sums.items() if v}


class MultiLabelTask(BinaryTask):
    """Multi-label runs in :func:`xrisk.runner.engine.run_seed`'s loop: the binary task's
    session with one logit per label, random batches, per-label metrics averaged."""

    reinit_stream = 4

    def __init__(self, recipe: Recipe, seed: int) -> None:
        self.recipe = recipe
        self.splits = splits = load_multilabel(recipe.data, seed=seed, dtype=recipe.dtype)
        num_labels = splits.y_train.shape[1]
        weights = layers_weights(mlp_weights(splits.x_train.shape[1], recipe.model.hidden,
                                             num_labels, seed=seed, dtype=recipe.dtype))
        self.session = session_class(recipe.framework)(
            splits, weights, model="mlp", activation=recipe.model.activation,
            dtype=recipe.dtype, seed=seed)
        self.warmup, self.main = phases(recipe)
        # random batches of molecules (a dual sampler needs one label per molecule)
        self.sampler = make_sampler(recipe, splits.y_train[:, 0], seed)
        self.stages = main_stages(recipe)

    def score(self, labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
        """The recipe's metrics, each averaged over the labels (:func:`label_metrics`)."""
        return label_metrics(self.recipe, labels, logits)
