r"""Multi-label losses: AUC-M, mean AP and partial AUC, one binary problem per label.

Every loss here takes scores and labels of shape (B, K) (K = ``num_labels``), the dataset
index (B,) of every row and, optionally, the task id (B,) of every row as the
:class:`~xrisk.samplers.TriSampler` yields it (``index, task = batch``). The objective is the
mean over labels of the single-label objective of each label column, and the math of each
label is the single-label loss's own (:class:`~xrisk.AUCMLoss`, :class:`~xrisk.APLoss`,
the :func:`~xrisk.pAUCLoss` family), run once per label:

- **missing labels**: a NaN in the (floating) label matrix is a missing label. That entry is
  left out of its label's loss, gradient and state, exactly as if the row were not in the
  batch for that label; it is never a negative. Integer or bool labels have no missing entry.
- **task**: with ``task`` given, only the labels that appear in it are *active* (LibAUC's
  ``task_id``): each active label uses every row of the batch, the loss is the mean over the
  active labels, and inactive labels are left untouched. Without it every label is active.
- **state**: per-sample tables are keyed by (label, sample): the row of sample ``i`` for
  label ``t`` is ``t * num_samples + i`` (reshape an exported table to
  ``(num_labels, num_samples, ...)`` to read it per label); global entries of the
  single-label loss (SOTAs' ``w``, STACO's ``s2``) get one row per label. So every label's
  state is its own.
- a label without a positive (or, for the pairwise losses, without a negative) in the batch
  contributes 0 with a zero gradient and keeps its state; the mean still divides by the
  number of active labels, so each label keeps the weight 1/K of the objective.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from .._arguments import check_choice, check_count, check_fraction, check_positive
from .._state import StateTable
from .._typing import Array, in_dtype
from ._base import Auxiliary, Input, LossDefinition, NoState, Sharding, Step
from ._binary import label_pairs
from .ap import APLoss
from .auc import AUCMLoss, AUCMParams, aucm_value
from .pauc import PAUC_MODES, _PairwiseLoss, pauc_class

__all__ = [
    "MultiLabelAUCMLoss",
    "MultiLabelAUCMParams",
    "MultiLabelpAUCLoss",
    "meanAveragePrecisionLoss",
]



class _MultiLabelLoss(LossDefinition):
    """Inputs, sizes and label columns shared by the multi-label losses."""

    num_labels: int
    num_samples: int | None = None
    score_interval: tuple[float, float] | None = (0.0, 1.0)

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("batch", "num_labels"), "score", interval=self.score_interval),
            Input("labels", ("batch", "num_labels"), "partial_label"),
            Input("index", ("batch",), "index", keys="sample",
                  optional=self.num_samples is None),
            Input("task", ("batch",), "index", keys="label", optional=True),
        )

    def dims(self) -> dict[str, int]:
        return {"num_labels": self.num_labels}

    def key_spaces(self) -> dict[str, int | None]:
        spaces: dict[str, int | None] = {"sample": self.num_samples, "label": self.num_labels}
        if self.num_samples is not None:
            spaces["label_sample"] = self.num_labels * self.num_samples
        return spaces

    def _columns(self, step: Step, scores: Array, labels: Array, task: Array | None,
                 ) -> tuple[Array, Array | None, Any]:
        """``(labels, active, count)``: the labels (B, K) in the scores' dtype with NaN at
        every missing entry and throughout each inactive label; ``active`` (K,) 1.0 / 0.0
        (``None`` without ``task``: all active); ``count`` the number of active labels (>= 1).
        """
        xp = step.xp
        values = in_dtype(labels, scores.dtype, xp)
        if task is None:
            return values, None, self.num_labels
        ids = xp.arange(self.num_labels, dtype=task.dtype)
        hits = xp.astype(xp.expand_dims(task, 1) == xp.expand_dims(ids, 0), scores.dtype)
        active = xp.max(hits, axis=0)  # (K,): the batch is not empty here
        values = xp.where(xp.expand_dims(active, 0) > 0, values,
                          xp.full_like(values, float("nan")))
        return values, active, xp.clip(xp.sum(active), 1, None)


# --------------------------------------------------------------------------- AUC-M

class MultiLabelAUCMParams(NamedTuple):
    """Trainable auxiliaries of :class:`MultiLabelAUCMLoss`, each of shape (num_labels,)."""

    a: Array  #: (K,) — per label, estimate of the mean positive score
    b: Array  #: (K,) — per label, estimate of the mean negative score
    alpha: Array  #: (K,) — per label, dual variable kept >= 0 by the optimizer


class MultiLabelAUCMLoss(_MultiLabelLoss):
    r"""Multi-label AUC-margin loss: the mean over labels of :class:`AUCMLoss`, with per-label
    auxiliaries a, b, alpha of shape (num_labels,), trained with :class:`xrisk.optim.PESG`.

    Parameters
    ----------
    num_labels : int
        Number of labels K (columns of the scores and labels).
    margin : float, default 1.0
        Margin :math:`m` (scores are expected in [0, 1], e.g. sigmoid outputs).
    version : {"v1", "v2"}, default "v1"
        As :class:`AUCMLoss`, per label.
    imratio : float or None, default None
        Positive ratio p of v1, shared by every label; ``None`` uses each label's ratio in the
        batch (among its observed entries).

    Notes
    -----
    With :math:`L^{AUCM}` the objective of :class:`AUCMLoss` on one label column,

    .. math:: L = \frac1{|A|}\sum_{t\in A} L^{AUCM}(s_{:,t}, y_{:,t};\ a_t, b_t, \alpha_t)

    over the active labels A (all labels, or those in ``task``), each on the rows whose label
    t is observed (not NaN). PESG descends on a and b and ascends on alpha, label by label:
    :math:`\alpha_t \leftarrow \Pi_{\ge 0}(\alpha_t + \eta(2(m + b_t - a_t) - 2\alpha_t))`.
    ``index`` is optional (no state).

    *Margin*: v1 uses :math:`p(1-p)\,m` as :class:`AUCMLoss` and the paper do. LibAUC
    2.0.1's ``MultiLabelAUCMLoss`` v1 drops the margin from that term (LibAUC issue #35:
    it behaves as m = 1 whatever ``margin`` is); for m = 1 the two agree. LibAUC keeps its
    a, b, alpha as plain tensors, which ``state_dict()`` and ``.to()`` miss: here they are
    trainable auxiliaries that the adapters hold as parameters and export with the state.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = MultiLabelAUCMLoss(2, version="v2")
    >>> params = MultiLabelAUCMParams(np.full(2, 0.3), np.full(2, 0.2), np.full(2, 0.5))
    >>> scores = np.array([[0.1, 0.9], [0.4, 0.2], [0.35, 0.6], [0.8, 0.3]])
    >>> labels = np.array([[0, 1], [0, 0], [1, np.nan], [1, 0]])  # one missing label
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), scores, labels, params=params)
    >>> round(float(value), 5)  # mean of AUCMLoss's example (0.57625) and label 1 (0.465)
    0.52063
    """

    params_type = MultiLabelAUCMParams

    def __init__(self, num_labels: int, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None) -> None:
        owner = "MultiLabelAUCMLoss"
        self.num_labels = check_count(owner, "num_labels", num_labels)
        self.margin = check_positive(owner, "margin", margin)
        self.version = check_choice(owner, "version", version, ("v1", "v2"))
        self.imratio = None if imratio is None else check_fraction(owner, "imratio", imratio)

    def auxiliaries(self) -> dict[str, Auxiliary]:
        shape = (self.num_labels,)
        return {"a": Auxiliary(shape), "b": Auxiliary(shape),
                "alpha": Auxiliary(shape, role="ascent", lower=0.0)}

    def ascent_direction(self, params: MultiLabelAUCMParams) -> dict[str, Array]:
        """PESG's closed-form ascent of every label's alpha: AUC-M's, elementwise."""
        return AUCMLoss.ascent_direction(self, params)  # type: ignore[arg-type]

    def _loss(self, step: Step, state: NoState, params: MultiLabelAUCMParams, scores: Array,
              labels: Array, index: Array | None, task: Array | None,
              ) -> tuple[Array, NoState]:
        xp = step.xp
        values, _, count = self._columns(step, scores, labels, task)
        # The same fields a, b, alpha, each (K,): aucm_value reduces over axis 0 per label.
        per_label = aucm_value(scores, values, AUCMParams(*params), margin=self.margin,
                               version=self.version, imratio=self.imratio, xp=xp, axis=0)
        # A label without an observed entry (all missing, or inactive) is not in the batch:
        # it adds 0, as an empty batch of AUCMLoss does (its masked means alone would leave
        # 2 alpha m - alpha^2).
        present = xp.max(xp.astype(values == values, scores.dtype), axis=0)
        return xp.sum(per_label * present) / count, state


# --------------------------------------------------------------------------- per-label state

class _PerLabelLoss(_MultiLabelLoss):
    """A single-label loss with per-sample state, run on every label column.

    ``self.inner`` is the single-label definition, built with ``num_samples = num_labels *
    num_samples`` so that its tables are the (label, sample) tables; its state type is this
    loss's. Label t's positions address rows ``t * num_samples + index`` and the label's row
    of every global entry; each subclass runs every label at once (mAP through APLoss's
    ``label_losses``, multi-label pAUC through the pairwise losses' ``_pair_loss``).
    """

    # The per-label tables: row t * num_samples + i of sample i for label t.
    sharding = Sharding(derived={"label_sample": ("label", "sample")},
                        sizes={"sample": "num_samples"})

    inner: LossDefinition
    num_samples: int  # set by every subclass's __init__ (the per-label tables need it)

    def _bind_inner(self, inner: LossDefinition) -> None:
        self.inner = inner
        self.state_type = inner.state_type  # the same fields, keyed by (label, sample)
        # The scores the single-label math expects: probabilities for AP, any for pAUC.
        self.score_interval = getattr(inner, "score_interval", None)

    def state_tables(self) -> dict[str, StateTable]:
        return {name: table._replace(keys="label_sample" if table.keys == "sample" else "label")
                for name, table in self.inner.state_tables().items()}

    def state_meaning(self) -> dict[str, Any]:
        # Row t * num_samples + i of label t: num_labels fixes the layout (num_labels *
        # num_samples rows may split another way), the per-label loss what each row holds.
        return {"num_labels": self.num_labels, "per_label_loss": self.inner.name,
                **self.inner.state_meaning()}

    @staticmethod
    def _host_columns(step: Step, task: Array | None) -> np.ndarray | None:
        """The labels (B, K) as read on the host, NaN throughout each label ``task`` leaves
        out (as :meth:`_columns`), for the single-label math's host paths; ``None`` where
        the labels (or a given ``task``) were not read there."""
        labels = step.host.get("labels")
        if labels is None or task is None:
            return labels
        tasks = step.host.get("task")
        if tasks is None:
            return None
        labels = np.asarray(labels, dtype=np.float64)
        active = np.zeros(labels.shape[1], dtype=bool)
        active[np.asarray(tasks).reshape(-1)] = True
        return np.where(active, labels, np.nan)


# --------------------------------------------------------------------------- mean AP

class meanAveragePrecisionLoss(_PerLabelLoss):  # noqa: N801  (LibAUC's name)
    r"""Mean average precision (mAP) loss: :class:`APLoss` (SOAP) on every label, with state
    keyed by (label, sample).

    Parameters
    ----------
    num_labels : int
        Number of labels K.
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving averages, in (0, 1].
    margin : float, default 1.0
        Margin :math:`m` of the surrogate (scores are expected in [0, 1]).
    surrogate : str, default "squared_hinge"
        Pairwise surrogate, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    The objective is the mean over labels of APLoss's surrogate of :math:`-\mathrm{AP}`,

    .. math::

        F = \frac1K\sum_{t}\Bigl(-\frac1{n_{+,t}}\sum_{i\in P_t}
            \frac{f_{\mathrm{pos},i,t}}{f_{\mathrm{all},i,t}}\Bigr),

    the inner sums of label t running over the rows whose label t is observed. Label t runs
    :class:`APLoss`'s step (pooled duplicate positives, moving averages updated first, weights
    from the updated estimators) on column t, with the estimators of sample i in row
    ``t * num_samples + i`` of ``u`` (num_labels * num_samples, 2): column 0 ``u_all``,
    column 1 ``u_pos``. The loss is the mean over the active labels. With ``gamma = 1`` and
    the whole data set in one batch its gradient is that of F.

    Feed it from a :class:`~xrisk.samplers.TriSampler`: ``index, task = batch``, then
    ``loss_fn(scores, labels, index, task)`` with the model's scores (B, K) and labels (B, K)
    of the rows ``index``; each task of the batch is an active label computed on all B rows
    (LibAUC's ``task_id``). Without ``task`` every label is active.

    Differences from LibAUC 2.0.1 (``meanAveragePrecisionLoss`` / ``mAPLoss``): missing
    labels (NaN) are supported; a label without a positive in the batch contributes 0
    (LibAUC: NaN); duplicate indices are pooled as in :class:`APLoss`; ``top_k`` is not
    implemented; the state is one (K * N, 2) table instead of ``u_all`` and ``u_pos`` of
    shape (K, N, 1). As in LibAUC, ``index`` holds every row's index (LibAUC raises
    ``UnboundLocalError`` on an index of the positives only; here it is a shape error).

    References
    ----------
    Qi, Luo, Xu, Ji, Yang. "Stochastic Optimization of Areas Under Precision-Recall Curves
    with Provable Convergence", NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = meanAveragePrecisionLoss(2, num_samples=4)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> scores = np.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]])
    >>> labels = np.array([[1, 0], [0, 1], [1, np.nan], [0, 1]])
    >>> value, state = loss_fn.apply(state, scores, labels, np.array([0, 1, 2, 3]))
    >>> state.u.reshape(2, 4, 2)[0, :, 0].round(4).tolist()  # label 0: as APLoss's example
    [0.4118, 0.0, 0.8303, 0.0]
    """

    inner: APLoss

    def __init__(self, num_labels: int, num_samples: int, *, gamma: float = 0.9,
                 margin: float = 1.0, surrogate: str = "squared_hinge",
                 scale: float = 1.0) -> None:
        owner = "meanAveragePrecisionLoss"
        self.num_labels = check_count(owner, "num_labels", num_labels)
        self.num_samples = check_count(owner, "num_samples", num_samples)
        inner = APLoss(self.num_labels * self.num_samples, gamma=gamma, margin=margin,
                       surrogate=surrogate, scale=scale)
        self.gamma, self.margin = inner.gamma, inner.margin
        self.surrogate, self.scale = inner.surrogate, inner.scale
        self._bind_inner(inner)

    def _loss(self, step: Step, state: Any, params: Any, scores: Array, labels: Array,
              index: Array, task: Array | None) -> tuple[Array, Any]:
        # All K labels in one call of APLoss's math (its ``stride`` form): the work per
        # position runs on the K * B positions at once, the (B, B) pair work label by label,
        # and labels never share a row. Each label's loss is the single-label loss on its
        # column, bit for bit; they are added in label order, as label-by-label calls were.
        values, _, count = self._columns(step, scores, labels, task)
        step = step.with_host(labels=self._host_columns(step, task))  # task's NaN columns
        losses, new_state = self.inner.label_losses(step, state, scores, values, index,
                                                    stride=self.num_samples)
        total = losses[0]
        for value in losses[1:]:
            total = total + value
        return total / count, new_state


# --------------------------------------------------------------------------- partial AUC

#: Arguments of a pAUC class that are not its options here: MultiLabelpAUCLoss sets the
#: per-label table size and takes the surrogate's own arguments once for every mode.
_SHARED_ARGUMENTS = ("num_samples", "surrogate", "scale")


def _pauc_options() -> dict[type, dict[str, inspect.Parameter]]:
    """Each pAUC class's options (its keyword arguments but the shared ones), from its
    signature: the defaults are the class's own."""
    return {cls: {name: parameter for name, parameter in inspect.signature(cls).parameters.items()
                  if name not in _SHARED_ARGUMENTS}
            for cls in dict.fromkeys(PAUC_MODES.values())}


class MultiLabelpAUCLoss(_PerLabelLoss):
    r"""Multi-label partial AUC: the ``mode`` loss of :func:`pAUCLoss` on every label, each
    label with its own state.

    Parameters
    ----------
    num_labels : int
        Number of labels K.
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    mode : {"SOPA", "SOPAs", "1w", "SOTAs", "2w", "STACO"}, default "1w"
        The single-label loss, as :func:`pAUCLoss`: ``"SOPA"`` :class:`pAUC_CVaR_Loss`,
        ``"SOPAs"``/``"1w"`` :class:`pAUC_DRO_Loss`, ``"SOTAs"``/``"2w"``
        :class:`tpAUC_KL_Loss`, ``"STACO"`` :class:`tpAUC_CVaR_Loss`.
    **options
        The options of that loss (see its class), ``None`` for its default (the class's).
        An option the mode does not take must stay ``None``. {mode_options}
    surrogate : str, default "squared_hinge"
        Pairwise surrogate, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    The loss is the mean over the active labels of the single-label loss on each label
    column (rows with a missing label left out). The state has the fields of the
    single-label loss's state: per-sample tables keyed by (label, sample) (row
    ``t * num_samples + i``) and one row per label of its global entries (SOTAs' ``w`` is
    (K, 2), STACO's ``s2`` is (K,)).

    Differences from LibAUC 2.0.1 (``MultiLabelpAUCLoss``): ``"STACO"`` works (LibAUC raises
    "Out of options!"); SOTAs keeps one ``w`` per label (LibAUC shares one ``w`` across
    labels, so each label's weights depend on the others'); missing labels (NaN) are
    supported; a label without a positive or a negative in the batch contributes 0 and keeps
    its state.

    References
    ----------
    Zhu, Li, Wang, Wu, Yang. "When AUC meets DRO: Optimizing Partial AUC for Deep Learning
    with Non-Convex Convergence Guarantee", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = MultiLabelpAUCLoss(2, num_samples=4, mode="SOTAs", tau=0.5)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> scores = np.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]])
    >>> labels = np.array([[1, 0], [0, 1], [1, np.nan], [0, 1]])
    >>> value, state = loss_fn.apply(state, scores, labels, np.array([0, 1, 2, 3]))
    >>> w = state.w[:, 0] * np.exp(state.w[:, 1])  # one w per label; label 0: tpAUC_KL_Loss's
    >>> state.w.shape, round(float(w[0]), 4)
    ((2, 2), 1.5257)
    """

    def __init__(self, num_labels: int, num_samples: int, *, mode: str = "1w",
                 surrogate: str = "squared_hinge", scale: float = 1.0,
                 **options: Any) -> None:
        # The signature (``inspect.signature``, the adapters' classes) names every option of
        # every mode, built from the pAUC classes' signatures below this class.
        owner = "MultiLabelpAUCLoss"
        self.num_labels = check_count(owner, "num_labels", num_labels)
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.mode = check_choice(owner, "mode", mode, tuple(PAUC_MODES),
                                 fix="pass e.g. mode='1w' (SOPAs) or mode='STACO'")
        every = _pauc_options()
        known = {name for taken in every.values() for name in taken}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}; "
                            f"expected the options {sorted(known)} of the pAUC losses.")
        defaults = every[PAUC_MODES[self.mode]]
        given = {name: value for name, value in options.items() if value is not None}
        unused = sorted(name for name in given if name not in defaults)
        if unused:
            raise ValueError(
                f"{owner}: mode={self.mode!r} got {', '.join(f'{n}={given[n]!r}' for n in unused)}"
                f"; expected only the options of that mode: {sorted(defaults)}. Fix: drop "
                f"{', '.join(unused)}, or pick the mode that takes them."
            )
        build: Callable[..., _PairwiseLoss] = pauc_class(self.mode)  # its own signature
        try:
            inner = build(self.num_labels * self.num_samples, surrogate=surrogate, scale=scale,
                          **given)
        except ValueError as error:  # name the class the user built
            raise ValueError(f"{owner}(mode={self.mode!r}): {error}") from None
        for name in known:
            setattr(self, name, getattr(inner, name) if name in defaults else None)
        self.surrogate, self.scale = inner.surrogate, inner.scale
        self._bind_inner(inner)


    def _loss(self, step: Step, state: Any, params: Any, scores: Array, labels: Array,
              index: Array, task: Array | None) -> tuple[Array, Any]:
        # The label columns in as few passes as fit PAIRS_PER_PASS (label_pairs): each with
        # its labels' rows of the tables (row t * num_samples + index) and their rows of every
        # global entry; the single-label math sums the labels' losses.
        xp = step.xp
        values, _, count = self._columns(step, scores, labels, task)
        columns = self._host_columns(step, task)
        inner = cast(_PairwiseLoss, self.inner)
        per_label = {name for name, table in inner.state_tables().items() if table.keys is None}
        tables = state._asdict()
        pieces: dict[str, list[Array]] = {name: [] for name in per_label}
        chunks = self._label_chunks(scores, columns if step.valid is None else None)
        total = None
        for start, stop in chunks:
            one = stop - start == 1  # the single-label pairs of that column
            whole = len(chunks) == 1 and not one
            taken = start if one else slice(start, stop)
            part = step.with_host(labels=None if columns is None else columns[:, taken])
            if one:
                pairs = inner._pairs(part, scores[:, start], values[:, start])
            else:
                pairs = label_pairs(part, scores if whole else scores[:, taken],
                                    values if whole else values[:, taken],
                                    stride=self.num_samples, surrogate=inner.surrogate,
                                    margin=inner.margin, scale=inner.scale)
            rows = inner.positive_rows(part, index if start == 0
                                       else index + start * self.num_samples, pairs)
            value, new = inner._pair_loss(part, inner.state_type(**{
                name: entry if whole or name not in per_label else entry[taken]
                for name, entry in tables.items()}), pairs, rows)
            for name, entry in new._asdict().items():
                if name in per_label and not whole:
                    pieces[name].append(xp.expand_dims(entry, 0) if one else entry)
                else:
                    tables[name] = entry
            total = value if total is None else total + value
        for name, entries in pieces.items():
            if entries:
                tables[name] = xp.concat(entries, axis=0)
        return total / count, self.state_type(**tables)

    def _label_chunks(self, scores: Array, columns: np.ndarray | None) -> list[tuple[int, int]]:
        """The label columns in consecutive chunks ``[start, stop)``, each pairing at most
        :data:`PAIRS_PER_PASS` entries (a single label may exceed it): counted from the host
        labels ``columns`` (B, K) where the pairs are compact, else K B x B blocks (a batch
        size known only at run time: one label per chunk)."""
        labels = self.num_labels
        if columns is not None:  # compact: sum n+ rows by the largest n- columns
            positives = np.sum(columns == 1, axis=0)
            negatives = np.sum(columns == 0, axis=0)
            chunks, start, rows, width = [], 0, 0, 0
            for t in range(labels):
                rows, width = rows + positives[t], max(width, negatives[t])
                if rows * width > PAIRS_PER_PASS and t > start:
                    chunks.append((start, t))
                    start, rows, width = t, positives[t], negatives[t]
            return [*chunks, (start, labels)]
        size = scores.shape[0]
        width = 1 if size is None else max(1, PAIRS_PER_PASS // (size * size))
        return [(start, min(start + width, labels)) for start in range(0, labels, width)]


#: Pair entries one pass of MultiLabelpAUCLoss pairs at most: its label columns go in chunks
#: under it, a label alone where its pairs exceed it. One pass over every label saves
#: operators (K-fold), but each of the ~25 operators over the pairs then streams the whole
#: matrix through memory, where 256 KB (float32) stays in cache. One CPU thread, 10 labels,
#: loss and gradient: torch eager at B = 512 took 12.2 ms in chunks of 2**18 entries and
#: 7.6 label by label; jax.jit 35.6 ms in one pass, 9.4 label by label.
PAIRS_PER_PASS = 2**16


def _multilabel_pauc_signature() -> inspect.Signature:
    """MultiLabelpAUCLoss's signature: ``**options`` spelled out as every pAUC class's
    options in order of first appearance, each ``None`` by default."""
    base = inspect.signature(MultiLabelpAUCLoss.__init__)
    head = [p for name, p in base.parameters.items() if name not in ("self", "options")]
    options: dict[str, inspect.Parameter] = {}
    for taken in _pauc_options().values():
        for name, parameter in taken.items():
            options.setdefault(name, parameter.replace(
                default=None, annotation=f"{parameter.annotation} | None"))
    at = [p.name for p in head].index("surrogate")
    return base.replace(parameters=[*head[:at], *options.values(), *head[at:]])


def _mode_options_text() -> str:
    return textwrap.fill("; ".join(
        f"{'/'.join(m for m in PAUC_MODES if PAUC_MODES[m] is cls)} takes "
        + ", ".join(f"{name} (default {p.default!r})" for name, p in taken.items())
        for cls, taken in _pauc_options().items()) + ".", 88, subsequent_indent=" " * 8)


MultiLabelpAUCLoss.__signature__ = _multilabel_pauc_signature()
MultiLabelpAUCLoss.__doc__ = (MultiLabelpAUCLoss.__doc__ or "").replace(
    "{mode_options}", _mode_options_text())
