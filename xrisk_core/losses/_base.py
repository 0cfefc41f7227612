r"""The loss protocol: what every X-risk loss definition declares, and the one ``apply``.

A loss definition is a frozen, validated set of hyper-parameters plus declarations that the
adapters, the validation and the test harness read, so that no adapter, optimizer or test holds
per-loss code:

- :meth:`~LossDefinition.inputs`: the batch inputs, in call order — name, shape in named
  dimensions, kind (``score``, ``label``, ``index`` into a key space, ``relevance``, ``data``);
- :meth:`~LossDefinition.state_tables`: the state, one :class:`StateTable` per entry — the key
  space it is indexed by (``sample``, ``query``, ``interaction``, ...), the shape of one row and
  its initial value. Per-key dual variables with a closed-form rule (SOPA's thresholds, K-SONG's
  λ_q, iSogCLR's τ_i) are state rows too, written in O(batch); a table keyed by a product of
  two spaces (the multi-label (label, sample) tables) declares it in
  :meth:`~LossDefinition.derived_keys`, so that sharded state owns its rows by sample;
- :meth:`~LossDefinition.auxiliaries`: trainable auxiliaries with their *role* for the
  optimizer (descent or ascent, projection bounds) — optimizers never know them by name.

``apply(state, *inputs, params=...)`` binds and validates the inputs against the declarations,
then calls the loss's ``_loss`` with a :class:`Step` (backend, namespace, guarded row writes).

Validation has two layers. Static checks (names, ranks, named dimensions, dtypes) always run.
Value checks (labels in {0, 1}, finite scores, every index inside its key space) raise on
concrete arrays and, because a traced array (under ``jax.jit``, ``jax.grad``, ``tf.function``,
``torch.compile``) cannot raise, they are also computed *inside* the step: a batch that fails
them returns a NaN loss and writes no state row (an out-of-range index never wraps or clamps
onto a real row). ``xrisk.set_checks("raise")`` makes those in-graph checks raise too, with
each framework's assertion (see :mod:`xrisk._validation`); :meth:`LossDefinition.check_batch`
runs the host checks on a batch before it enters a compiled step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

from .. import _validation
from .._config import Configured
from .._domain import Domain, Relation, Size
from .._registry import register
from .._state import StateTable, allocate_state, axis_size, write_rows
from .._typing import Array
from ..backends import backend_of

__all__ = [
    "Auxiliary",
    "Domain",
    "Input",
    "Relation",
    "Size",
    "LossDefinition",
    "NO_PARAMS",
    "NoParams",
    "NoState",
    "Step",
    "StateTable",
    "state_update",
    "INPUT_KINDS",
    "LOSSES",
    "ROLES",
]


#: What each input kind means; the value checks of :mod:`xrisk._validation` follow it.
INPUT_KINDS = {
    "score": "floating model outputs, finite (differentiable)",
    "label": "binary labels in {0, 1}",
    "partial_label": "binary labels in {0, 1}; NaN (floating dtypes) marks a missing label",
    "index": "integer keys in [0, size of the input's key space)",
    "relevance": "graded relevance, finite and >= 0",
    "data": "finite floating data that is not differentiated (counts, ideal DCG)",
}

#: Roles of trainable auxiliaries, read by the optimizers.
ROLES = ("descent", "ascent")


class Input(NamedTuple):
    """Declaration of one batch input.

    Attributes
    ----------
    name : str
        Argument name (also a keyword of ``apply`` and of the adapters' calls).
    shape : tuple of str
        Named dimensions. A name that :meth:`LossDefinition.dims` fixes (e.g.
        ``"num_labels"``) must have that size; any other name (``"batch"``, ``"queries"``,
        ``"candidates"``, ``"features"``) is free but must agree across the inputs of one call.
        A 1-D input also accepts shape (n, 1).
    kind : str
        One of :data:`INPUT_KINDS`.
    keys : str or None
        For ``index`` inputs: the key space it indexes (see :meth:`LossDefinition.key_spaces`).
    optional : bool
        Whether the input may be omitted (``None``).
    interval : (float, float) or None
        For ``score`` inputs: the range the math expects (e.g. ``(0.0, 1.0)`` for losses of
        probabilities). A host-checked batch outside it gets one :class:`xrisk.InputWarning`
        per loss (such values are valid, but usually logits passed by mistake).
    domain : Domain or None
        The values the input may take (:class:`xrisk._domain.Domain`), checked by the one
        validator; values outside it raise (eager) or give a NaN loss and no state write
        (traced). ``None``: the kind's domain (:func:`xrisk._validation.declared_domain`:
        finite reals for scores and data, {0, 1} for labels, finite reals >= 0 for relevance,
        integers in [0, size of the key space) for an index). A declared domain narrows the
        kind's, e.g. ``domain=POSITIVE_COUNT`` for a count given as floats.
    """

    name: str
    shape: tuple[str, ...]
    kind: str
    keys: str | None = None
    optional: bool = False
    interval: tuple[float, float] | None = None
    domain: Domain | None = None


class Auxiliary(NamedTuple):
    """Declaration of one trainable auxiliary (a parameter the optimizer updates).

    Attributes
    ----------
    shape : tuple of int
    role : {"descent", "ascent"}
        Descent auxiliaries join the model's parameters; ascent ones (dual variables) take the
        optimizer's projected ascent step along :meth:`LossDefinition.ascent_direction`.
    fill : float
        Initial value.
    lower, upper : float or None
        Projection bounds applied after each ascent step.
    """

    shape: tuple[int, ...] = ()
    role: str = "descent"
    fill: float = 0.0
    lower: float | None = None
    upper: float | None = None

    def project(self, x: Array, xp: Any) -> Array:
        """``x`` clipped to ``[lower, upper]`` (``x`` itself without bounds): the projection
        of every ascent step, whichever optimizer takes it.

        Examples
        --------
        >>> import numpy as np, array_api_compat.numpy as xp
        >>> Auxiliary(role="ascent", lower=0.0).project(np.array([-0.3, 0.2]), xp).tolist()
        [0.0, 0.2]
        """
        if self.lower is None and self.upper is None:
            return x
        return xp.clip(x, self.lower, self.upper)


class NoState(NamedTuple):
    """State of a loss without per-key state."""


class NoParams(NamedTuple):
    """Parameters of a loss without trainable auxiliaries."""


#: The parameters of every loss without trainable auxiliaries.
NO_PARAMS = NoParams()


class Step:
    """What the math of one ``apply`` call works with: backend, namespace and guarded writes.

    Attributes
    ----------
    backend : module
        The backend of the inputs (``stop_gradient``, ``write_rows``, ...).
    xp : namespace
        Array-API namespace of the inputs.
    valid : array of shape () (bool), or None
        Whether the batch passed the in-graph value checks (and, where its size is known only
        at run time, is not empty); when false, :meth:`write_rows` writes nothing and
        ``apply`` returns NaN (0 for an empty batch). ``None`` when the values were checked on
        the host (a bad batch raised before the step).
    host : dict
        The numpy values of the inputs that were checked on the host (see
        :class:`xrisk._validation.CheckedBatch`), by input name; empty when traced.
    """

    def __init__(self, backend: Any, xp: Any, valid: Array | None,
                 host: Mapping[str, Any] | None = None) -> None:
        self.backend = backend
        self.xp = xp
        self.valid = valid
        self.host = host or {}

    def stop(self, x: Array) -> Array:
        """The backend's stop-gradient (LibAUC's ``.detach()``)."""
        return self.backend.stop_gradient(x)

    def unmoved_as_gathered(self, new: Array, gathered: Array, moved: Array) -> Array:
        """``new`` rows in the dtype of ``gathered`` (the rows read from the table), with the
        rows where ``moved`` is false exactly as gathered.

        A loss computes in the scores' dtype; a row it does not move, written back through
        that dtype, would lose the digits of a wider table (float64 state, float32 scores).
        ``moved`` broadcasts against the rows. No operation when the dtypes agree.
        """
        if new.dtype == gathered.dtype:
            return new
        return self.xp.where(moved, self.xp.astype(new, gathered.dtype), gathered)

    def write_rows(self, table: Array, index: Array, new: Array, *,
                   equal_duplicates: bool = False) -> Array:
        """``table`` with rows ``index`` set to ``new`` — or left as they are for a bad batch.

        ``index`` may have any shape; ``new`` has shape ``index.shape + row``. The guard of a
        bad batch reads the table's own rows at ``index`` rather than rows the loss gathered:
        a loss reads its rows in its compute dtype, and float32 rows written back into a
        float64 table would change its digits.
        Duplicate indices follow :func:`xrisk._state.write_rows` (the last position wins); a
        loss whose rows for one index are equal by construction passes
        ``equal_duplicates=True`` to skip resolving them (a sort of the index). Callers rebind
        the result.
        """
        xp = self.xp
        rows = new
        flat_index = index
        if len(index.shape) != 1:  # reshape only when needed: each one is an op eagerly
            flat_index = xp.reshape(index, (-1,))
            rows = xp.reshape(rows, (axis_size(flat_index), *table.shape[1:]))
        if self.valid is not None:  # traced: a bad batch writes every row back bit for bit
            if rows.dtype != table.dtype:
                rows = xp.astype(rows, table.dtype)
            rows = xp.where(self.valid, rows, xp.take(table, flat_index, axis=0))
        return write_rows(self.backend, table, flat_index, rows, xp=xp,
                          equal_duplicates=equal_duplicates)


def state_update(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a pure ``(self, state, *args) -> new_state`` method of a definition (a schedule
    step such as MIDAM's ``update_smoothing``) that the adapters expose: torch and TensorFlow
    write the new state into their containers, JAX returns it
    (``tools/generate_adapters.py`` writes those methods from this one's signature)."""
    method.state_update = True  # type: ignore[attr-defined]
    return method


#: Every loss definition, by public class name, in the order of definition (filled by
#: :meth:`LossDefinition.__init_subclass__`).
LOSSES: dict[str, type[LossDefinition]] = {}

#: The declaration methods, computed once per definition (see :func:`_declaration`).
_DECLARATIONS = ("inputs", "dims", "key_spaces", "state_tables", "auxiliaries", "derived_keys",
                 "relations")


@functools.lru_cache(maxsize=256)
def _container_names(state_fields: tuple[str, ...], params_fields: tuple[str, ...],
                     ) -> tuple[str, ...]:
    """The names of a loss's state and auxiliary entries in errors (``state.u``,
    ``params.a``): built once per pair of container types, not at every step."""
    return (*(f"state.{f}" for f in state_fields), *(f"params.{f}" for f in params_fields))


def _declaration(method: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``method`` evaluated once per (frozen) definition, then read from a cache.

    Declarations depend on the hyper-parameters only, which are frozen after ``__init__``, and
    every step reads them several times (binding, checks, containers): built anew each time
    they cost a few microseconds per read, a noticeable part of an eager step at small
    batches. Dicts are returned as copies, so a caller that edits one cannot change the
    declaration. Calls during ``__init__`` are not cached. Keyed by the method's qualified
    name: an override calling ``super()`` caches both results.
    """
    key = method.__qualname__

    @functools.wraps(method)
    def declared(self: Any) -> Any:
        if not self._frozen:
            return method(self)
        cache = self.__dict__.get("_declared")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_declared", cache)  # the instance is frozen
        value = cache.get(key)
        if value is None:
            value = cache[key] = method(self)
        return dict(value) if type(value) is dict else value

    return declared


class LossDefinition(Configured):
    """Base class of the framework-neutral loss definitions (see the module docstring).

    Subclasses set ``state_type`` / ``params_type`` (NamedTuple classes whose fields follow
    :meth:`state_tables` / :meth:`auxiliaries`), implement the declarations and
    ``_loss(step, state, params, **inputs) -> (loss, new_state)``, and validate every
    hyper-parameter in ``__init__``. A public subclass enters :data:`LOSSES` as it is
    defined (:mod:`xrisk._registry`).
    """

    # An instance attribute with a class default: a loss whose state fields depend on its
    # options (NDCGLoss's top_k, the contrastive temperature scheme) sets it in ``__init__``.
    state_type: type = NoState
    params_type: ClassVar[type] = NoParams
    _libauc_names = True  # LibAUC argument names raise naming ours (xrisk._libauc_names)
    #: The modes under which a front door builds this loss (``pAUCLoss("SOPA")``, ...).
    modes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(LOSSES, cls)
        for name in _DECLARATIONS:
            method = cls.__dict__.get(name)
            if method is not None and not hasattr(method, "__wrapped__"):
                setattr(cls, name, _declaration(method))

    # -- declarations -------------------------------------------------------------------
    def _fill_declarations(self) -> None:
        """Evaluate every declaration once now, so that later reads find them cached.

        The adapters call it when they wrap a definition: a first step then reads the cache
        instead of filling it, which would otherwise happen inside the first
        ``torch.compile``'d call and make the second call recompile.
        """
        for name in _DECLARATIONS:
            getattr(self, name)()

    def inputs(self) -> tuple[Input, ...]:
        """The batch inputs of ``apply``, in call order."""
        raise NotImplementedError

    def dims(self) -> dict[str, int]:
        """Named dimensions of fixed size (e.g. ``{"num_labels": 5}``)."""
        return {}

    def relations(self) -> tuple[Relation, ...]:
        """Relations that the inputs of every row must satisfy beyond each input's domain
        (:class:`xrisk._domain.Relation`), e.g. ``Relation("num_relevant", "<=",
        "num_candidates")``; checked by the same validator as the domains. Default: none."""
        return ()

    def key_spaces(self) -> dict[str, int | None]:
        """Size of every key space that index inputs and state tables use (``None``: an
        index that no state table uses, only checked to be >= 0)."""
        return {}

    def table_sizes(self) -> dict[str, int]:
        """Sizes of the key spaces that have one (those a state table may be keyed by)."""
        return {name: size for name, size in self.key_spaces().items() if size is not None}

    def state_tables(self) -> dict[str, StateTable]:
        """Name -> :class:`StateTable` of every state entry, in ``state_type`` order."""
        return {}

    def derived_keys(self) -> dict[str, tuple[str, str]]:
        """Derived key space -> ``(outer, inner)``, the two key spaces it is the product of.

        A table keyed by a derived space holds one row per pair of keys, at row
        ``outer * size(inner) + inner`` (row-major), and a step reaches those rows through
        the index inputs of ``inner`` (the multi-label tables: ``"label_sample": ("label",
        "sample")``, row ``t * num_samples + i``). Sharded state (:mod:`xrisk.distributed`)
        owns such rows by their inner key (the rows of one sample for every label live on
        that sample's owner) and runs the step on :meth:`resized`. Default: none.
        """
        return {}

    def resized(self, sizes: Mapping[str, int]) -> LossDefinition:
        """This loss with the key spaces ``sizes`` (name -> size) given another size.

        Sharded state runs a step on compact tables of the batch's rows
        (:func:`xrisk.distributed.apply_compact`); where a derived table's row depends on the
        size of its inner space (:meth:`derived_keys`), the step must run on the loss resized
        to the compact size. The default returns ``self`` (the math of a loss without derived
        keys does not depend on the sizes; index bounds that a smaller space still satisfies
        aside); a loss that declares derived keys overrides it, e.g. with
        ``self.replace(num_samples=sizes["sample"])``.
        """
        derived = sorted(space for space, (_, inner) in self.derived_keys().items()
                         if inner in sizes)
        if derived:
            raise NotImplementedError(
                f"{self.name} declares the derived key spaces {derived} but does not override "
                "resized(); expected an override that rebuilds the loss for the given sizes. "
                "Fix: define resized() in the loss (e.g. return self.replace(num_samples=...)).")
        return self

    def row_keys(self) -> dict[str, tuple[str, ...]]:
        """Key space -> the index inputs whose values are the rows a step reads and writes in
        the tables of that space.

        Sharded state (:mod:`xrisk.distributed`) fetches only those rows, renumbered into a
        compact table, so the step must address the space's tables through these inputs
        alone. The default takes every key space of a state table addressed by a required
        index input, where a table of a derived space counts for the inner space
        (:meth:`derived_keys`); tables of other spaces (small per-label tables read whole)
        stay replicated. A loss that addresses a space's rows otherwise overrides this to
        leave that space out.
        """
        derived = self.derived_keys()
        spaces = {derived[table.keys][1] if table.keys in derived else table.keys
                  for table in self.state_tables().values() if table.keys}
        out: dict[str, tuple[str, ...]] = {}
        for spec in self.inputs():
            if spec.kind == "index" and spec.keys in spaces and not spec.optional:
                out[spec.keys] = (*out.get(spec.keys, ()), spec.name)
        return out

    def auxiliaries(self) -> dict[str, Auxiliary]:
        """Name -> :class:`Auxiliary` of every trainable auxiliary, in ``params_type`` order."""
        return {}

    def ascent_direction(self, params: Any) -> dict[str, Array]:
        """Closed-form ascent direction of each ``ascent`` auxiliary at ``params``.

        Optimizers call it with the auxiliaries *after* the descent step (LibAUC's order) and
        move each ascent auxiliary by ``lr * direction``, then project it onto its bounds.
        """
        ascent = [name for name, aux in self.auxiliaries().items() if aux.role == "ascent"]
        if ascent:
            raise NotImplementedError(f"{self.name} declares ascent auxiliaries {ascent}.")
        return {}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Concrete shape of every state entry and auxiliary, by name."""
        spaces = self.table_sizes()
        shapes = {name: table.shape(spaces) for name, table in self.state_tables().items()}
        shapes.update({name: aux.shape for name, aux in self.auxiliaries().items()})
        return shapes

    # -- pure functions -----------------------------------------------------------------
    def init(self, *, xp: Any, dtype: Any = None, device: Any = None) -> Any:
        """Allocate the initial state in namespace ``xp`` (default dtype ``xp.float32``)."""
        values = allocate_state(self.state_tables(), self.table_sizes(), xp=xp,
                                dtype=dtype or xp.float32, device=device)
        return self.state_type(**values)

    def init_params(self, *, xp: Any, dtype: Any = None, device: Any = None) -> Any:
        """Allocate the initial trainable auxiliaries in namespace ``xp``."""
        tables = {name: StateTable(None, aux.shape, aux.fill)
                  for name, aux in self.auxiliaries().items()}
        values = allocate_state(tables, {}, xp=xp, dtype=dtype or xp.float32, device=device)
        return self.params_type(**values)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Match positional and keyword inputs to :meth:`inputs`; ``None`` for omitted ones."""
        declared = self.inputs()
        names = [spec.name for spec in declared]
        if len(args) > len(names):
            raise TypeError(
                f"{self.name}: got {len(args)} positional inputs; expected at most "
                f"{len(names)}: {', '.join(names)}."
            )
        bound = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(
                    f"{self.name}: unexpected input {name!r}; expected inputs {names}."
                )
            if name in bound:
                raise TypeError(f"{self.name}: input {name!r} given twice.")
            bound[name] = value
        for spec in declared:
            if bound.get(spec.name) is None and not spec.optional:
                raise _validation.missing_input(self.name, spec)
        return {name: bound.get(name) for name in names}

    def apply(self, state: Any, *inputs: Array, params: Any = NO_PARAMS,
              **named: Array) -> tuple[Array, Any]:
        """Return ``(loss, new_state)`` for one mini-batch.

        ``inputs`` follow :meth:`inputs` (positionally or by name); ``params`` holds the
        trainable auxiliaries (``init_params``). See the class docstring for the math.

        The loss computes in one float dtype, :meth:`_compute_dtype`: before any state is read,
        every floating score and data input and every floating auxiliary is cast to it (a
        no-op where the dtypes agree), so mixed inputs (a float64 view beside a float32 one,
        float64 scores beside float32 auxiliaries, float16 scores) work in every framework.
        The returned loss has that dtype, and gradients flow back to each input in its own.
        A batch without examples returns 0 and changes no state.
        """
        bound = self.bind(inputs, named)
        self._check_containers(state, params)
        present = [value for value in bound.values() if value is not None]
        names = [name for name, value in bound.items() if value is not None]
        backend = backend_of(*present, *state, *params,
                             names=(*names, *_container_names(state._fields, params._fields)))
        xp = backend.namespace
        checked, valid, empty, host = _validation.check_inputs(self, backend, bound, xp=xp)
        checked, params = self._in_compute_dtype(checked, state, params, xp)
        if empty is True:
            return self._empty_loss(checked, params, xp), state
        params = self._saddle_point(backend, params, xp)
        # ``empty`` is an array where sizes are known only at run time (the inputs were padded
        # to one row, see xrisk._validation): an empty batch then writes nothing and gives 0.
        step = Step(backend, xp, valid if empty is False else valid & ~empty, host)
        loss, new_state = self._loss(step, state, params, **checked)
        if valid is None:
            return loss, new_state
        new_state = self._whole_tables_kept(step, state, new_state)
        if empty is not False:
            loss = xp.where(empty, xp.zeros_like(loss), loss)
        return xp.where(valid, loss, xp.full_like(loss, float("nan"))), new_state

    def _saddle_point(self, backend: Any, params: Any, xp: Any) -> Any:
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
        their own closed-form ascent (:meth:`ascent_direction`) and never read this gradient;
        they keep :math:`\alpha` inside its bounds, where :math:`\Pi(\alpha) + (\alpha -
        \alpha)` is :math:`\alpha` bit for bit, so their steps are unchanged.
        """
        specs = self.auxiliaries()
        if not any(spec.role == "ascent" for spec in specs.values()):
            return params
        new = {}
        for name, spec in specs.items():
            if spec.role == "ascent":
                value = getattr(params, name)
                held = backend.stop_gradient(value)
                # value Π(α) + 0 exactly; gradient -1 (the reversal) through (held - value)
                new[name] = spec.project(held, xp) + (held - value)
        return params._replace(**new)

    #: ``_loss(step, state, params, **inputs) -> (loss, new_state)``: the math, implemented
    #: by each loss with its declared inputs as keyword parameters.
    _loss: Callable[..., tuple[Array, Any]]

    def _whole_tables_kept(self, step: Step, state: Any, new_state: Any) -> Any:
        """``new_state`` with every table that no index input addresses row by row exactly
        as given where the batch failed the in-graph checks.

        Tables of the key spaces in :meth:`row_keys` are written through
        :meth:`Step.write_rows`, which guards each row. The others come back whole from the
        loss: loss-wide entries (a schedule counter, a smoothing factor, tpAUC-KL's w) and
        the per-label rows of the multi-label losses (keyed by ``"label"``, stacked label by
        label). A loss that computed one through the scores' dtype would hand back a float64
        entry rounded to float32, so a bad batch selects the given one. These tables are
        O(1) or O(labels): selecting them costs nothing noticeable.
        """
        xp = step.xp
        addressed = set(self.row_keys())
        derived = self.derived_keys()
        fields = new_state._asdict()
        for name, table in self.state_tables().items():
            space = derived[table.keys][1] if table.keys in derived else table.keys
            if space not in addressed:
                old, new = getattr(state, name), fields[name]
                if new.dtype != old.dtype:
                    new = xp.astype(new, old.dtype)
                fields[name] = xp.where(step.valid, new, old)
        return type(new_state)(**fields)

    def _compute_dtype(self, inputs: Mapping[str, Array], containers: tuple[Array, ...],
                       xp: Any) -> Any:
        """The float dtype one ``apply`` computes in: the widest dtype of the score inputs,
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

        Examples
        --------
        >>> import numpy as np, xrisk
        >>> loss_fn = xrisk.AUCMLoss()
        >>> params = loss_fn.init_params(xp=np, dtype=np.float64)
        >>> loss_fn._compute_dtype({"scores": np.zeros(2, np.float16)}, params, np)
        dtype('float64')
        >>> loss_fn._compute_dtype({"scores": np.zeros(2, np.float32)}, params, np)
        dtype('float32')
        """
        loss_dtype = None
        widest = None
        for spec in self.inputs():
            x = inputs.get(spec.name)
            if spec.kind != "score" or x is None:
                continue
            dtype = x.dtype
            if xp.finfo(dtype).bits < 32:
                if loss_dtype is None:
                    loss_dtype = next((v.dtype for v in containers
                                       if xp.isdtype(v.dtype, "real floating")), xp.float32)
                dtype = loss_dtype
            if widest is None or xp.finfo(dtype).bits > xp.finfo(widest).bits:
                widest = dtype
        return widest

    def _in_compute_dtype(self, checked: dict[str, Array], state: Any, params: Any, xp: Any,
                          ) -> tuple[dict[str, Array], Any]:
        """The checked inputs and the auxiliaries, their floating score and data inputs and
        floating auxiliaries cast to :meth:`_compute_dtype` (state tables are not: a loss
        reads its rows in the scores' dtype and writes them back in the tables').

        One rule for every loss, applied before any state row is read or written: TensorFlow
        does not promote mixed float dtypes (float64 scores against float32 auxiliaries or
        a float32 view raise in the middle of a step), torch's matmul refuses them, and
        data inputs (counts, ideal DCG: never differentiated) given as float64 numpy arrays
        must meet float32 scores. The casts are differentiable: gradients reach every input
        and auxiliary in its own dtype. Auxiliaries are O(1) or O(labels), so casting them
        costs nothing noticeable.
        """
        dtype = self._compute_dtype(checked, (*state, *params), xp)
        if dtype is None:
            return checked, params
        cast = dict(checked)
        for spec in self.inputs():
            x = cast[spec.name]
            if (spec.kind in ("score", "data") and x is not None
                    and xp.isdtype(x.dtype, "real floating") and x.dtype != dtype):
                cast[spec.name] = xp.astype(x, dtype)
        if any(xp.isdtype(v.dtype, "real floating") and v.dtype != dtype for v in params):
            params = type(params)(*(xp.astype(v, dtype) if xp.isdtype(v.dtype, "real floating")
                                    and v.dtype != dtype else v for v in params))
        return cast, params

    def _empty_loss(self, checked: dict[str, Array], params: Any, xp: Any) -> Array:
        """The loss of a batch without examples: 0, in the scores' dtype, connected to the
        scores and the trainable auxiliaries so that every framework returns finite zero
        gradients (not ``None``) and optimizers see an ordinary step."""
        scores = next(v for spec in self.inputs() if spec.kind == "score"
                      for v in [checked[spec.name]] if v is not None)
        zero = xp.sum(scores) * 0
        for value in params:
            if xp.isdtype(value.dtype, "real floating"):
                zero = zero + xp.astype(xp.sum(value), zero.dtype) * 0
        return zero

    def check_batch(self, *inputs: Array, **named: Array) -> None:
        """Run every check of :meth:`apply` on one batch now, on the host; raise if it fails.

        ``apply`` raises by itself on host-readable arrays; call this on the batch *before* a
        compiled step (``jax.jit``, ``tf.function``), where the checks can only turn a bad
        batch into a NaN loss. It also catches what a framework's conversion would hide: JAX
        without ``jax_enable_x64`` turns a numpy int64 index into int32 at the jit boundary,
        so 2**32 becomes 0 — check the numpy batch first.

        Raises
        ------
        ValueError, TypeError
            As :meth:`apply`.
        """
        bound = self.bind(inputs, named)
        present = {name: value for name, value in bound.items() if value is not None}
        backend = backend_of(*present.values(), names=tuple(present))
        _validation.check_inputs(self, backend, bound, xp=backend.namespace)

    def upgrade_state(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """An exported state in an older layout, converted to this version's keys.

        ``load_state`` of every adapter calls it before validating; the default returns the
        arrays unchanged. A loss whose state layout changed overrides it to convert (or to
        raise, saying how to convert) the old keys.
        """
        return dict(arrays)

    def state_meaning(self) -> dict[str, Any]:
        """The hyper-parameters that give this loss's stored numbers their meaning.

        An export names its loss and these values (:func:`xrisk._adapter_support.state_metadata`),
        and ``load_state`` refuses an export whose values differ unless told to reinterpret
        it. They are the options that fix what a stored number encodes: the variant (a
        multi-label loss's per-label loss, K-SONG's K) and the temperature that scales a
        stored exponential (``u = mean exp(l / lam)`` read with another ``lam`` is a
        different quantity). Options that only steer the updates (step sizes, moving-average
        weights, margins, bounds) are left out: changing them between runs is legitimate and
        the state carries over. Sizes are left out too: the shapes check them. The values
        are JSON numbers, strings, booleans or ``None``. Default: none.
        """
        return {}

    def _check_containers(self, state: Any, params: Any) -> None:
        for value, kind, what in ((state, self.state_type, "state"),
                                  (params, self.params_type, "params")):
            if not isinstance(value, kind):
                raise TypeError(
                    f"{self.name}: {what} is {type(value).__name__}; expected "
                    f"{kind.__name__}. Fix: create it with loss_fn.init() / "
                    "loss_fn.init_params() of this loss."
                )
