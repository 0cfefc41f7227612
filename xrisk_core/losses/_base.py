r"""The loss protocol: what every X-risk loss definition declares, and its math.

A loss definition is a frozen, validated set of hyper-parameters plus declarations that the
adapters, the validation and the test harness read, so that no adapter, optimizer or test holds
per-loss code:

- :meth:`~LossDefinition.inputs`: the batch inputs, in call order — name, shape in named
  dimensions, kind (``score``, ``label``, ``index`` into a key space, ``relevance``, ``data``);
- :meth:`~LossDefinition.state_tables`: the state, one :class:`StateTable` per entry — the key
  space it is indexed by (``sample``, ``query``, ``interaction``, ...), the shape of one row and
  its initial value. Per-key dual variables with a closed-form rule (SOPA's thresholds, K-SONG's
  λ_q, iSogCLR's τ_i) are state rows too, written in O(batch); a table keyed by a product of
  two spaces (the multi-label (label, sample) tables) declares it in its
  :class:`Sharding` (``LossDefinition.sharding``), so that sharded state owns its rows by
  sample;
- :meth:`~LossDefinition.auxiliaries`: trainable auxiliaries with their *role* for the
  optimizer (descent or ascent, projection bounds) — optimizers never know them by name.

A definition's math is its ``_loss(step, state, params, **inputs)``. Applying it to a batch
is one free function for every loss, :func:`xrisk._apply.apply` (``definition.apply(state,
*inputs, params=...)`` calls it): it binds and validates the inputs against the declarations,
casts them to one compute dtype, answers an empty batch, then calls ``_loss`` with a
:class:`Step` (backend, namespace, guarded row writes).

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
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from .._config import Configured
from .._domain import Domain, Relation, Size
from .._registry import register
from .._state import StateTable, allocate_state, axis_size, write_rows
from .._typing import Array

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
    "Sharding",
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
        (traced). ``None``: the kind's domain (:func:`xrisk._value_checks.declared_domain`:
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

    def with_host(self, **readings: Any) -> Step:
        """This step with ``readings`` in place of the host readings of those inputs
        (``None`` drops one): a loss that runs another's math on a part of its inputs (a
        label column) passes that part's reading, or none."""
        host = {**self.host, **readings}
        return Step(self.backend, self.xp, self.valid,
                    {name: value for name, value in host.items() if value is not None})

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


class Sharding(NamedTuple):
    """How sharded state (:mod:`xrisk.distributed`) owns a loss's table rows: declared data,
    which the distributed module reads; the definition holds no distributed code.

    By default every table of a key space that a required index input addresses is sharded
    by its keys, and the rest (global entries, small tables read whole) is replicated. A loss
    declares more only where that rule needs it, as its class attribute ``sharding``.

    Attributes
    ----------
    derived : mapping of str to (str, str)
        Derived key space -> ``(outer, inner)``, the two key spaces it is the product of. A
        table keyed by a derived space holds one row per pair of keys, at row ``outer *
        size(inner) + inner`` (row-major), and a step reaches those rows through the index
        inputs of ``inner`` (the multi-label tables: ``"label_sample": ("label",
        "sample")``, row ``t * num_samples + i``). Sharded state owns such rows by their inner
        key (the rows of one sample for every label live on that sample's owner). A derived
        space the loss's :meth:`~LossDefinition.key_spaces` lacks (an option left it out) is
        ignored.
    sizes : mapping of str to str
        Inner key space -> the constructor argument that sets its size. A sharded step runs
        on compact tables of the batch's rows; where a derived table's row depends on the size
        of its inner space, it runs on the loss rebuilt with that argument set to the compact
        size (``loss_fn.replace(num_samples=m)``). Every inner space of ``derived`` needs one
        (checked when the class is defined).
    replicated : tuple of str
        Key spaces kept replicated although an index input addresses them (a loss that
        reaches their rows otherwise than through its index inputs).

    Examples
    --------
    >>> import xrisk
    >>> xrisk.meanAveragePrecisionLoss.sharding.derived["label_sample"]
    ('label', 'sample')
    >>> xrisk.APLoss.sharding == Sharding()
    True
    """

    derived: Mapping[str, tuple[str, str]] = MappingProxyType({})
    sizes: Mapping[str, str] = MappingProxyType({})
    replicated: tuple[str, ...] = ()


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
_DECLARATIONS = ("inputs", "dims", "key_spaces", "state_tables", "auxiliaries", "relations")


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


def _check_sharding(cls: type[LossDefinition]) -> None:
    """Refuse, when a loss class is defined (not a private base, ``_Name``), a
    :class:`Sharding` declaration that :mod:`xrisk.distributed` could not follow: an inner
    space of a derived key without the constructor argument that sizes it."""
    sharding = cls.sharding
    if not sharding.derived or cls.__name__.startswith("_"):  # a private base: no constructor
        return
    parameters = [name for name in inspect.signature(cls.__init__).parameters if name != "self"]
    for space, (_, inner) in sharding.derived.items():
        argument = sharding.sizes.get(inner)
        if argument is None or argument not in parameters:
            raise TypeError(
                f"{cls.__name__}.sharding declares the derived key space {space!r} over "
                f"{inner!r} but sizes {inner!r} by {argument!r}; expected a constructor "
                f"argument of {cls.__name__} (one of {parameters}). Fix: declare "
                f"Sharding(derived=..., sizes={{{inner!r}: 'num_samples'}}) with the argument "
                f"that sets the size of {inner!r}.")


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

    #: How sharded state owns the rows of this loss's tables (:class:`Sharding`).
    sharding: ClassVar[Sharding] = Sharding()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_sharding(cls)
        register(LOSSES, cls)
        for name in _DECLARATIONS:
            method = cls.__dict__.get(name)
            if method is not None and not hasattr(method, "__wrapped__"):
                setattr(cls, name, _declaration(method))

    # -- declarations -------------------------------------------------------------------
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

    # -- application: one free function, xrisk._apply ----------------------------------------
    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Match positional and keyword inputs to :meth:`inputs`; ``None`` for omitted ones
        (:func:`xrisk._apply.bind`)."""
        from .._apply import bind

        return bind(self, args, kwargs)

    def apply(self, state: Any, *inputs: Array, params: Any = NO_PARAMS,
              **named: Array) -> tuple[Array, Any]:
        """Return ``(loss, new_state)`` for one mini-batch: :func:`xrisk._apply.apply` of
        this definition.

        ``inputs`` follow :meth:`inputs` (positionally or by name); ``params`` holds the
        trainable auxiliaries (``init_params``). See the class docstring for the math. The
        loss computes in one float dtype (the widest of the score inputs, half precision
        counted as the loss's float dtype), and a batch without examples returns 0 and
        changes no state.
        """
        from .._apply import apply

        return apply(self, state, *inputs, params=params, **named)

    #: ``_loss(step, state, params, **inputs) -> (loss, new_state)``: the math, implemented
    #: by each loss with its declared inputs as keyword parameters.
    _loss: Callable[..., tuple[Array, Any]]

    def check_batch(self, *inputs: Array, **named: Array) -> None:
        """Run every check of :meth:`apply` on one batch now, on the host; raise if it fails
        (:func:`xrisk._apply.check_batch`).

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
        from .._apply import check_batch

        check_batch(self, *inputs, **named)

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
