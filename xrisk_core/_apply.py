r"""Applying a loss definition to one batch: the one free function every caller goes through.

A definition (:class:`xrisk.LossDefinition`) holds declarations and math; this module holds
what runs around the math on every step, the same for every loss:

1. :func:`bind` matches positional and keyword inputs to the declared ``inputs()``;
2. the containers are checked (``state`` / ``params`` of the definition's types) and the
   backend found from the arrays;
3. the batch is validated against the declarations (:func:`xrisk._validation.check_inputs`:
   static checks, then value checks on the host or in the graph);
4. score, data and auxiliary arrays are cast to one compute dtype (:func:`compute_dtype`);
5. an empty batch returns 0 without reading a row; otherwise the ascent auxiliaries are
   replaced by their projected saddle point and the definition's ``_loss`` runs with a
   :class:`~xrisk.losses.Step`;
6. a batch that failed the in-graph checks gives NaN and keeps every table as it was.

The adapters (torch, TensorFlow, JAX) and :mod:`xrisk.distributed` call :func:`apply`;
``definition.apply(...)`` is the same function, kept as the definition's public method.
What depends on the declarations only (names, score inputs, ascent auxiliaries, the tables
read whole) is worked out once per definition (:func:`plan`) rather than at every step.

>>> import numpy as np, xrisk
>>> from xrisk._apply import apply
>>> loss_fn = xrisk.APLoss(num_samples=4)
>>> value, state = apply(loss_fn, loss_fn.init(xp=np), np.array([0.9, 0.2]), np.array([1, 0]),
...                      np.array([0, 1]))
>>> round(float(state.u[0, 0]), 4)  # 0.9 * (1 + 0.09) / 2, as LibAUC's first step
0.4905
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from . import _validation
from ._typing import Array
from .backends import backend_of
from .losses._base import _DECLARATIONS, NO_PARAMS, Auxiliary, Input, LossDefinition, Step

__all__ = ["apply", "bind", "check_batch", "compute_dtype", "owning_space", "plan", "prepare",
           "row_keys"]


class Plan(NamedTuple):
    """What :func:`apply` reads of a definition's declarations at every step, derived once.

    Attributes
    ----------
    specs : tuple of Input
        The declared inputs, in call order.
    names : tuple of str
        Their names.
    required : tuple of Input
        The inputs that may not be omitted.
    scores : tuple of str
        The ``score`` inputs (their dtype decides the compute dtype).
    castable : tuple of str
        The ``score`` and ``data`` inputs, cast to the compute dtype.
    ascent : tuple of (str, Auxiliary)
        The ascent auxiliaries (replaced by their projected saddle point).
    containers : tuple of str
        ``state.<field>`` and ``params.<field>``: the names of the containers in errors.
    whole : tuple of str
        The state tables that no index input addresses row by row (kept whole, see
        :func:`_whole_tables_kept`).
    """

    specs: tuple[Input, ...]
    names: tuple[str, ...]
    required: tuple[Input, ...]
    scores: tuple[str, ...]
    castable: tuple[str, ...]
    ascent: tuple[tuple[str, Auxiliary], ...]
    containers: tuple[str, ...]
    whole: tuple[str, ...]


def row_keys(definition: LossDefinition) -> dict[str, tuple[str, ...]]:
    """Key space -> the index inputs whose values are the rows a step reads and writes in
    the tables of that space.

    Every key space of a state table that a required index input addresses, where a table
    of a derived space (the loss's :class:`~xrisk.losses.Sharding` declaration) counts for
    its inner space, less the spaces the declaration keeps replicated. A bad traced batch
    keeps the tables of other spaces whole (:func:`apply`); sharded state
    (:mod:`xrisk.distributed`) fetches only these rows, renumbered into a compact table.

    Examples
    --------
    >>> import xrisk
    >>> row_keys(xrisk.APLoss(num_samples=4))
    {'sample': ('index',)}
    >>> row_keys(xrisk.meanAveragePrecisionLoss(3, num_samples=4))
    {'sample': ('index',)}
    """
    derived, kept = definition.sharding.derived, definition.sharding.replicated
    spaces = {owning_space(derived, table.keys) for table in definition.state_tables().values()
              if table.keys}
    out: dict[str, tuple[str, ...]] = {}
    for spec in definition.inputs():
        space = spec.keys
        if (spec.kind == "index" and space is not None and space in spaces
                and space not in kept and not spec.optional):
            out[space] = (*out.get(space, ()), spec.name)
    return out


def owning_space(derived: Mapping[str, tuple[str, str]], keys: str | None) -> str | None:
    """The key space whose keys own the rows of a table keyed by ``keys``: the inner space
    of a derived key (``derived``, a loss's ``sharding.derived``), else ``keys`` itself."""
    return derived[keys][1] if keys is not None and keys in derived else keys


def plan(definition: LossDefinition) -> Plan:
    """The :class:`Plan` of ``definition``, built at its first step and then kept on it
    (definitions are frozen: their declarations cannot change)."""
    built = definition.__dict__.get("_apply_plan")
    if built is not None:
        return built
    specs = definition.inputs()
    addressed = set(row_keys(definition))
    derived = definition.sharding.derived
    built = Plan(
        specs=specs,
        names=tuple(spec.name for spec in specs),
        required=tuple(spec for spec in specs if not spec.optional),
        scores=tuple(spec.name for spec in specs if spec.kind == "score"),
        castable=tuple(spec.name for spec in specs if spec.kind in ("score", "data")),
        ascent=tuple((name, aux) for name, aux in definition.auxiliaries().items()
                     if aux.role == "ascent"),
        containers=(*(f"state.{f}" for f in getattr(definition.state_type, "_fields", ())),
                    *(f"params.{f}" for f in getattr(definition.params_type, "_fields", ()))),
        whole=tuple(name for name, table in definition.state_tables().items()
                    if owning_space(derived, table.keys) not in addressed),
    )
    if definition._frozen:  # a definition still in its __init__ may change
        object.__setattr__(definition, "_apply_plan", built)
    return built


def bind(definition: LossDefinition, args: tuple[Any, ...], kwargs: Mapping[str, Any],
         ) -> dict[str, Any]:
    """Match positional and keyword inputs to ``definition.inputs()``; ``None`` for omitted
    ones, in declaration order.

    Raises
    ------
    TypeError
        Too many positional inputs, an unknown name, or an input given twice.
    ValueError
        A required input missing.

    Examples
    --------
    >>> import numpy as np, xrisk
    >>> bound = bind(xrisk.APLoss(num_samples=4), (np.zeros(2), np.ones(2)),
    ...              {"index": np.arange(2)})
    >>> list(bound)
    ['scores', 'labels', 'index']
    """
    return _bind(definition, plan(definition), args, kwargs)


def _bind(definition: LossDefinition, declared: Plan, args: tuple[Any, ...],
          kwargs: Mapping[str, Any]) -> dict[str, Any]:
    names = declared.names
    if not kwargs and len(args) == len(names):  # every input given in order: the usual call
        bound = dict(zip(names, args))
        for spec in declared.required:
            if bound[spec.name] is None:
                raise _validation.missing_input(definition.name, spec)
        return bound
    if len(args) > len(names):
        raise TypeError(
            f"{definition.name}: got {len(args)} positional inputs; expected at most "
            f"{len(names)}: {', '.join(names)}."
        )
    bound = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(
                f"{definition.name}: unexpected input {name!r}; expected inputs {list(names)}."
            )
        if name in bound:
            raise TypeError(f"{definition.name}: input {name!r} given twice.")
        bound[name] = value
    for spec in declared.required:
        if bound.get(spec.name) is None:
            raise _validation.missing_input(definition.name, spec)
    if len(bound) == len(names) and not kwargs:  # every input given in order
        return bound
    return {name: bound.get(name) for name in names}


def apply(definition: LossDefinition, state: Any, *inputs: Array, params: Any = NO_PARAMS,
          **named: Array) -> tuple[Array, Any]:
    """Return ``(loss, new_state)`` of ``definition`` for one mini-batch.

    ``inputs`` follow ``definition.inputs()`` (positionally or by name); ``params`` holds the
    trainable auxiliaries (``definition.init_params``).

    The loss computes in one float dtype, :func:`compute_dtype`: before any state is read,
    every floating score and data input and every floating auxiliary is cast to it (a no-op
    where the dtypes agree), so mixed inputs (a float64 view beside a float32 one, float64
    scores beside float32 auxiliaries, float16 scores) work in every framework. The returned
    loss has that dtype, and gradients flow back to each input in its own. A batch without
    examples returns 0 and changes no state.

    Raises
    ------
    TypeError, ValueError
        Inputs that do not bind (:func:`bind`), containers of another loss, or a batch that
        fails the checks (see :mod:`xrisk._validation`).
    """
    declared = plan(definition)
    bound = _bind(definition, declared, inputs, named)
    if not (isinstance(state, definition.state_type)
            and isinstance(params, definition.params_type)):
        _check_containers(definition, state, params)  # raises, naming the container
    present = [value for value in bound.values() if value is not None]
    try:
        backend = backend_of(*present, *state, *params)
    except TypeError:  # again with every argument's name, for the error
        names = [name for name, value in bound.items() if value is not None]
        backend_of(*present, *state, *params, names=(*names, *declared.containers))
        raise
    xp = backend.namespace
    checked, valid, empty, host = _validation.check_inputs(definition, backend, bound, xp=xp)
    checked, params = _in_compute_dtype(declared, checked, state, params, xp)
    if empty is True:
        return _empty_loss(declared, checked, params, xp), state
    if declared.ascent:
        params = _saddle_point(declared, backend, params, xp)
    # ``empty`` is an array where sizes are known only at run time (the inputs were padded
    # to one row, see xrisk._validation): an empty batch then writes nothing and gives 0.
    step = Step(backend, xp, valid if empty is False else valid & ~empty, host)
    loss, new_state = definition._loss(step, state, params, **checked)
    if valid is None:
        return loss, new_state
    new_state = _whole_tables_kept(declared, step, state, new_state)
    if empty is not False:
        loss = xp.where(empty, xp.zeros_like(loss), loss)
    return xp.where(valid, loss, xp.full_like(loss, float("nan"))), new_state


def check_batch(definition: LossDefinition, *inputs: Array, **named: Array) -> None:
    """Run every check of :func:`apply` on one batch now, on the host; raise if it fails.

    ``apply`` raises by itself on host-readable arrays; call this on the batch *before* a
    compiled step (``jax.jit``, ``tf.function``), where the checks can only turn a bad batch
    into a NaN loss. It also catches what a framework's conversion would hide: JAX without
    ``jax_enable_x64`` turns a numpy int64 index into int32 at the jit boundary, so 2**32
    becomes 0 — check the numpy batch first.

    Raises
    ------
    ValueError, TypeError
        As :func:`apply`.
    """
    bound = bind(definition, inputs, named)
    present = {name: value for name, value in bound.items() if value is not None}
    backend = backend_of(*present.values(), names=tuple(present))
    _validation.check_inputs(definition, backend, bound, xp=backend.namespace)


def _check_containers(definition: LossDefinition, state: Any, params: Any) -> None:
    for value, kind, what in ((state, definition.state_type, "state"),
                              (params, definition.params_type, "params")):
        if not isinstance(value, kind):
            raise TypeError(
                f"{definition.name}: {what} is {type(value).__name__}; expected "
                f"{kind.__name__}. Fix: create it with loss_fn.init() / "
                "loss_fn.init_params() of this loss."
            )


def _saddle_point(declared: Plan, backend: Any, params: Any, xp: Any) -> Any:
    r"""``params`` with each ``ascent`` auxiliary :math:`\alpha` replaced by
    :math:`\Pi(\alpha)` (its projection onto ``[lower, upper]``, :meth:`Auxiliary.project`)
    whose gradient is :math:`-1` with respect to :math:`\alpha`.

    So the loss's value is :math:`L(\Pi(\alpha))` and the gradient every framework reports
    for :math:`\alpha` is :math:`-\partial L/\partial\alpha` at :math:`\Pi(\alpha)`: any
    descent optimizer (``torch.optim.Adam``, ``optax.adam``, a Keras optimizer, a
    hand-written SGD loop) ascends on the dual variables, the saddle-point update of the
    min-max problem, and a stored value outside the bounds counts as its projection
    (the adapters also project the stored value after a foreign optimizer's step where
    the framework allows it: see the README's min-max section). The xrisk optimizers take
    their own closed-form ascent (``ascent_direction``) and never read this gradient;
    they keep :math:`\alpha` inside its bounds, where :math:`\Pi(\alpha) + (\alpha -
    \alpha)` is :math:`\alpha` bit for bit, so their steps are unchanged.
    """
    new = {}
    for name, spec in declared.ascent:
        value = getattr(params, name)
        held = backend.stop_gradient(value)
        # value Π(α) + 0 exactly; gradient -1 (the reversal) through (held - value)
        new[name] = spec.project(held, xp) + (held - value)
    return params._replace(**new)


def _whole_tables_kept(declared: Plan, step: Step, state: Any, new_state: Any) -> Any:
    """``new_state`` with every table that no index input addresses row by row exactly
    as given where the batch failed the in-graph checks.

    Tables of the key spaces in :func:`row_keys` are written through
    :meth:`Step.write_rows`, which guards each row. The others come back whole from the
    loss: loss-wide entries (a schedule counter, a smoothing factor, tpAUC-KL's w) and
    the per-label rows of the multi-label losses (keyed by ``"label"``, stacked label by
    label). A loss that computed one through the scores' dtype would hand back a float64
    entry rounded to float32, so a bad batch selects the given one. These tables are
    O(1) or O(labels): selecting them costs nothing noticeable.
    """
    if not declared.whole:
        return new_state
    xp = step.xp
    fields = new_state._asdict()
    for name in declared.whole:
        old, new = getattr(state, name), fields[name]
        if new.dtype != old.dtype:
            new = xp.astype(new, old.dtype)
        fields[name] = xp.where(step.valid, new, old)
    return type(new_state)(**fields)


def compute_dtype(definition: LossDefinition, inputs: Mapping[str, Array],
                  containers: tuple[Array, ...], xp: Any) -> Any:
    """The float dtype one :func:`apply` computes in: the widest dtype of the score inputs,
    each of fewer than 32 bits counted as the loss's float dtype.

    The loss's float dtype is that of its state and auxiliaries (``containers``; the
    adapters allocate both in the loss's ``dtype``), float32 without any. So

    - scores of one dtype of 32 or 64 bits compute in it (a float32 model under a float64
      state: float32 math, the rows cast to the tables' dtype when written);
    - half-precision scores (float16, bfloat16) compute in the loss's float dtype, as
      mixed-precision training computes its losses: their sums over a batch overflow or
      underflow (float16 tops at 65504, its normal numbers start at 6e-5);
    - score inputs of several dtypes (a float64 view beside a float32 one) compute in the
      widest, the one that loses no digit of any input.

    ``None`` when no score input is present.

    Examples
    --------
    >>> import numpy as np, xrisk
    >>> loss_fn = xrisk.AUCMLoss()
    >>> params = loss_fn.init_params(xp=np, dtype=np.float64)
    >>> compute_dtype(loss_fn, {"scores": np.zeros(2, np.float16)}, params, np)
    dtype('float64')
    >>> compute_dtype(loss_fn, {"scores": np.zeros(2, np.float32)}, params, np)
    dtype('float32')
    """
    return _widest_score_dtype(plan(definition), inputs, containers, xp)


def _widest_score_dtype(declared: Plan, inputs: Mapping[str, Array],
                        containers: tuple[Array, ...], xp: Any) -> Any:
    loss_dtype = None
    widest = None
    for name in declared.scores:
        x = inputs.get(name)
        if x is None:
            continue
        dtype = x.dtype
        if xp.finfo(dtype).bits < 32:
            if loss_dtype is None:
                loss_dtype = next((v.dtype for v in containers
                                   if xp.isdtype(v.dtype, "real floating")), xp.float32)
            dtype = loss_dtype
        if widest is None or (dtype != widest and xp.finfo(dtype).bits > xp.finfo(widest).bits):
            widest = dtype
    return widest


def _in_compute_dtype(declared: Plan, checked: dict[str, Array], state: Any, params: Any,
                      xp: Any) -> tuple[dict[str, Array], Any]:
    """The checked inputs and the auxiliaries, their floating score and data inputs and
    floating auxiliaries cast to :func:`compute_dtype` (state tables are not: a loss reads
    its rows in the scores' dtype and writes them back in the tables').

    One rule for every loss, applied before any state row is read or written: TensorFlow
    does not promote mixed float dtypes (float64 scores against float32 auxiliaries or a
    float32 view raise in the middle of a step), torch's matmul refuses them, and data
    inputs (counts, ideal DCG: never differentiated) given as float64 numpy arrays must
    meet float32 scores. The casts are differentiable: gradients reach every input and
    auxiliary in its own dtype. Auxiliaries are O(1) or O(labels), so casting them costs
    nothing noticeable.
    """
    dtype = _widest_score_dtype(declared, checked, (*state, *params), xp)
    if dtype is None:
        return checked, params
    cast = None
    for name in declared.castable:
        x = checked[name]
        if x is not None and x.dtype != dtype and xp.isdtype(x.dtype, "real floating"):
            if cast is None:
                cast = dict(checked)
            cast[name] = xp.astype(x, dtype)
    if any(v.dtype != dtype and xp.isdtype(v.dtype, "real floating") for v in params):
        params = type(params)(*(xp.astype(v, dtype) if xp.isdtype(v.dtype, "real floating")
                                and v.dtype != dtype else v for v in params))
    return checked if cast is None else cast, params


def _empty_loss(declared: Plan, checked: dict[str, Array], params: Any, xp: Any) -> Array:
    """The loss of a batch without examples: 0, in the scores' dtype, connected to the
    scores and the trainable auxiliaries so that every framework returns finite zero
    gradients (not ``None``) and optimizers see an ordinary step."""
    scores = next(checked[name] for name in declared.scores if checked[name] is not None)
    zero = xp.sum(scores) * 0
    for value in params:
        if xp.isdtype(value.dtype, "real floating"):
            zero = zero + xp.astype(xp.sum(value), zero.dtype) * 0
    return zero


def prepare(definition: LossDefinition) -> None:
    """Evaluate every declaration of ``definition`` and its :class:`Plan` once now, so that
    later steps read them cached.

    The adapters call it when they wrap a definition: a first step then reads the caches
    instead of filling them, which would otherwise happen inside the first
    ``torch.compile``'d call and make the second call recompile.
    """
    for name in _DECLARATIONS:
        getattr(definition, name)()
    plan(definition)
