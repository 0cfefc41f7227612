"""JAX losses: pure ``init`` / ``apply`` objects, one per core loss definition.

``apply`` is the core's pure function, so it works under ``jax.jit`` (hyper-parameters are
static), ``jax.grad(..., has_aux=True)`` and ``donate_argnums`` on the state, whose rows are
written with ``.at[].set`` and updated in place by XLA when the buffer is donated.
:class:`StatefulLoss` keeps the state for eager use. Each class below only fixes its
constructor signature and its examples (written by ``tools/generate_adapters.py`` from the
core signatures); :class:`XRiskLoss` reads the rest from the core definition's declarations.

Bad batches: concrete CPU arrays are checked on the host and raise; inside a jitted or
differentiated step the checks run in the graph, and a bad batch returns a NaN loss and leaves
every state row unchanged. One thing happens *before* xrisk sees a jitted batch: without
``jax_enable_x64``, JAX converts a numpy int64 index to int32 at the jit boundary, so
2**32 + 3 silently becomes row 3. Check host batches first — :meth:`XRiskLoss.check_batch`
(which :class:`StatefulLoss` calls on every batch) — or enable x64. To make the in-graph
checks raise instead of returning NaN, compile the step with :func:`checked` (the error
carries the step's outputs, so a donated state is not lost), or turn on
``xrisk.set_checks("raise")`` before tracing (a host callback raises inside the jitted step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

import xrisk
from xrisk import LossDefinition
from xrisk.adapter_api import (
    apply_loss,
    bind_inputs,
    check_batch,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    exported_state,
    guard_init,
    prepare_definition,
    refuse_assignment,
)
from xrisk.backends.jax import functional_checks
from xrisk.losses import NO_PARAMS
from xrisk.losses.midam import midam_class
from xrisk.losses.pauc import pauc_class

from .distributed import check_call as check_distributed_call

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", "StatefulLoss", "checked", *xrisk.LOSSES, "pAUCLoss", "MIDAMLoss"]

DType: TypeAlias = str | Any | None
Device: TypeAlias = Any


#: This adapter's class of each core definition (the front doors build by it).
ADAPTED: dict[type[LossDefinition], type[XRiskLoss]] = {}


class XRiskLoss:
    """Base of the JAX losses: a core definition with pure ``init`` / ``apply``.

    ``apply(state, *inputs, params=...)`` takes the inputs the definition declares (e.g.
    scores, labels, index), positionally or by name, and returns ``(loss, new_state)``.
    """

    definition_type: ClassVar[type[LossDefinition]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "definition_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.definition_type)
            ADAPTED[cls.definition_type] = cls
        if "__init__" in cls.__dict__:  # LibAUC names (data_len=, surr_loss=, ...) name ours
            cls.__init__ = guard_init(cls.__init__)  # type: ignore[method-assign]

    def __init__(self, definition: LossDefinition, *, dtype: DType = None,
                 device: Device = None) -> None:
        prepare_definition(definition)  # declarations cached once, not while jit traces
        self.definition = definition
        if dtype is None:  # the framework's default float: float64 only under jax_enable_x64
            dtype = "float64" if jax.config.read("jax_enable_x64") else "float32"
        self.dtype = jnp.dtype(dtype_name(definition.name, dtype))
        self.device = device
        self._steps: dict[str, Callable] = {}  # StatefulLoss's compiled steps, by check mode

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        object.__setattr__(self, name, value)

    def _place(self, tree: Any) -> Any:
        return tree if self.device is None else jax.device_put(tree, self.device)

    def init(self) -> Any:
        """The initial state: a NamedTuple of arrays with shapes fixed at construction."""
        return self._place(self.definition.init(xp=jnp, dtype=self.dtype))

    def init_params(self) -> Any:
        """The initial trainable auxiliaries (e.g. ``AUCMParams``), to train with the model."""
        return self._place(self.definition.init_params(xp=jnp, dtype=self.dtype))

    def apply(self, state: Any, *inputs: Any, params: Any = NO_PARAMS,
              **named: Any) -> tuple[jax.Array, Any]:
        """Pure step: ``(loss, new_state)``; see the class docstring for the math.

        Under ``jax.jit`` a bad batch returns NaN and leaves the state unchanged; check host
        batches with :meth:`check_batch` before the jitted step (see the module docstring).
        numpy inputs are taken as ``jax.jit`` takes them (converted to JAX arrays), eagerly
        and inside a traced step alike.
        """
        inputs, named = self._from_numpy(inputs, named)
        check_distributed_call(self, inputs, named)  # warns on a device's part in shard_map
        return apply_loss(self.definition, state, *inputs, params=params, **named)

    def _from_numpy(self, inputs: tuple, named: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        """numpy inputs as JAX arrays, as ``jax.jit`` converts its numpy arguments, so eager
        and jitted calls take the same batches; a numpy index is first checked against int32,
        which the conversion would silently wrap without ``jax_enable_x64``."""
        def is_numpy(value: Any) -> bool:
            return isinstance(value, np.ndarray | np.generic)

        if not any(map(is_numpy, (*inputs, *named.values()))):
            return inputs, named
        self._check_index_fits(bind_inputs(self.definition, inputs, named), only_numpy=True)
        return (tuple(jnp.asarray(v) if is_numpy(v) else v for v in inputs),
                {k: jnp.asarray(v) if is_numpy(v) else v for k, v in named.items()})

    def _check_index_fits(self, bound: Mapping[str, Any], *, only_numpy: bool = False) -> None:
        """Raise if an index input holds a value beyond int32 while ``jax_enable_x64`` is off."""
        if jax.config.read("jax_enable_x64"):
            return
        for spec in self.definition.inputs():
            value = bound[spec.name]
            if spec.kind != "index" or value is None or not np.size(value):
                continue
            if only_numpy and not isinstance(value, np.ndarray | np.generic):
                continue
            largest = np.max(np.asarray(value))
            if largest > np.iinfo(np.int32).max:  # reachable for key spaces beyond 2**31 only
                raise ValueError(
                    f"{self.definition.name}: {spec.name} holds {largest}, beyond int32, the "
                    "index dtype of JAX while jax_enable_x64 is off; expected indices < 2**31. "
                    "Fix: jax.config.update('jax_enable_x64', True) before creating arrays."
                )

    def check_batch(self, *inputs: Any, **named: Any) -> None:
        """Check a host batch (numpy or JAX CPU arrays) before a jitted step; raise if bad.

        Inside ``jax.jit`` the checks of :meth:`apply` can only turn a bad batch into a NaN
        loss, and without ``jax_enable_x64`` JAX converts a numpy int64 index to int32 before
        any xrisk code runs (2**32 + 3 becomes 3). Call this on the numpy batch before the
        jitted step; :class:`StatefulLoss` does on every call.

        Raises
        ------
        ValueError, TypeError
            As :meth:`apply` on host arrays; also an index that does not fit JAX's int32
            while ``jax_enable_x64`` is off.
        """
        check_batch(self.definition, *inputs, **named)
        self._check_index_fits(bind_inputs(self.definition, inputs, named))

    def export_state(self, state: Any, params: Any = NO_PARAMS) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral).

        Each array is a writable copy in its entry's dtype, except bfloat16, which numpy
        lacks: it is exported as float32, exactly. The ``"__xrisk__"`` entry names the loss,
        its meaning-giving hyper-parameters and the format (see the README's checkpoint
        format); ``np.savez`` stores the dict as it is.
        """
        backend = xrisk.backends.get_backend("jax")
        values = {**state._asdict(), **params._asdict()}
        return exported_state(self.definition, {
            name: np.array(backend.to_numpy(value), copy=True) for name, value in values.items()})

    def load_state(self, arrays: Mapping[str, Any], *,
                   reinterpret: bool = False) -> tuple[Any, Any]:
        """``(state, params)`` from a dict of ``export_state`` of any framework.

        The export must name this loss and its meaning-giving hyper-parameters (its
        ``"__xrisk__"`` metadata), and every entry is checked first (keys, shapes, values in
        their declared domains; see :func:`xrisk.adapter_api.checked_state_arrays`); a
        float export of more precision than the loss is rounded with a
        :class:`xrisk.StateCastWarning`. ``reinterpret=True`` loads the arrays of another
        loss's export (or of an export without metadata whose layout several losses share,
        or of arrays made by hand) as this loss's state, on purpose: keys, shapes and
        domains are still checked.
        """
        definition = self.definition
        # Shapes and dtypes of the targets, without allocating them.
        templates = (jax.eval_shape(lambda: definition.init(xp=jnp, dtype=self.dtype)),
                     jax.eval_shape(lambda: definition.init_params(xp=jnp, dtype=self.dtype)))
        dtypes = {name: jnp.dtype(leaf.dtype).name
                  for template in templates for name, leaf in template._asdict().items()}
        checked = checked_state_arrays(definition, arrays, dtypes, reinterpret=reinterpret)

        def build(template: Any) -> Any:
            return type(template)(**{name: jnp.asarray(checked[name], dtype=leaf.dtype)
                                     for name, leaf in template._asdict().items()})

        return self._place(build(templates[0])), self._place(build(templates[1]))

    def _stateful_step(self) -> tuple[Callable, str]:
        """The jitted ``(state, params, inputs) -> (loss, state)`` of :class:`StatefulLoss`,
        state donated, compiled once per check mode (the mode is read while tracing)."""
        mode = xrisk.get_checks()
        step = self._steps.get(mode)
        if step is None:
            definition = self.definition

            def run(state: Any, params: Any, inputs: tuple) -> tuple[jax.Array, Any]:
                return apply_loss(definition, state, *inputs, params=params)

            if mode == "raise":  # the failed checks come back as checkify's error value
                checkified = checkify.checkify(run)

                def run_checked(state: Any, params: Any, inputs: tuple) -> Any:
                    with functional_checks():  # read while jit traces
                        return checkified(state, params, inputs)

                step = jax.jit(run_checked, donate_argnums=0)
            else:
                step = jax.jit(run, donate_argnums=0)
            self._steps[mode] = step
        return step, mode

    def __repr__(self) -> str:
        return f"xrisk.jax.{self.definition!r}"


class StatefulLoss:
    """Eager convenience: keeps a loss's state (and auxiliaries) between calls.

    Each call checks the batch on the host first (numpy or JAX CPU arrays: a bad value raises
    before JAX converts anything, so a numpy int64 index is never truncated silently), then
    runs one jitted step with the state donated, compiled once per loss and batch shape: a
    call costs O(batch) whatever ``num_samples`` is. Batches on an accelerator are not read
    back; they get the in-graph checks (NaN loss, state unchanged; an error under
    ``xrisk.set_checks("raise")``).

    The state buffers are donated to each step: read the state through ``.state`` after a
    call (or ``loss.export_state(wrapper.state)`` for a copy), not through arrays kept from
    before it.

    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.StatefulLoss(xr.APLoss(num_samples=4))
    >>> value = loss_fn(jnp.array([0.9, 0.2]), jnp.array([1, 0]), jnp.array([0, 1]))
    >>> round(float(loss_fn.state.u[0, 0]), 4)  # 0.9 * (1 + 0.09) / 2
    0.4905
    """

    def __init__(self, loss: XRiskLoss) -> None:
        self.loss = loss
        self.state = loss.init()
        self.params = loss.init_params()

    def __call__(self, *inputs: Any, **named: Any) -> jax.Array:
        bound = bind_inputs(self.loss.definition, inputs, named)
        present = {name: value for name, value in bound.items() if value is not None}
        if all(_on_host(value) for value in present.values()):
            # Zero-copy numpy views of CPU arrays: the checks read each input once. The core's
            # check_batch is called from here, as XRiskLoss.check_batch calls it, so a warning
            # about the batch names the user's line at the same fixed stack level.
            host = {name: np.asarray(value) for name, value in present.items()}
            check_batch(self.loss.definition, **host)
            self.loss._check_index_fits(bind_inputs(self.loss.definition, (), host))
        step, mode = self.loss._stateful_step()
        if mode != "raise":
            value, self.state = step(self.state, self.params, tuple(bound.values()))
            return value
        error, outputs = step(self.state, self.params, tuple(bound.values()))
        value, self.state = outputs  # kept before raising: a bad batch leaves it unchanged
        _raise_failed_check(error, outputs)
        return value


def _on_host(value: Any) -> bool:
    """Whether the values of ``value`` can be read without a device transfer."""
    if isinstance(value, jax.Array):
        return xrisk.backends.get_backend("jax").inspectable(value)
    return isinstance(value, np.ndarray | np.generic)


def checked(fn: Callable, **jit_options: Any) -> Callable:
    """``jax.jit`` of ``fn`` whose xrisk input checks raise instead of returning NaN.

    Under plain ``jax.jit`` a bad batch (label outside {0, 1}, index outside the key space,
    non-finite score) gives a NaN loss and leaves the state unchanged, because a traced value
    cannot raise. ``checked`` traces ``fn`` under ``xrisk.set_checks("raise")`` and
    functionalizes those checks with ``jax.experimental.checkify``, so a bad batch raises
    ``ValueError`` after the step, naming the input, the first offending value and the fix.
    It reads the error flag back to the host every step: a debugging mode. (A plain
    ``jax.jit`` traced under ``xrisk.set_checks("raise")`` raises too, from a host callback,
    but its outputs — and a donated state — are then lost.)

    Parameters
    ----------
    fn : callable
        The step function, **not** jitted (``checked`` compiles it; a function jitted before
        would keep the trace it made without checks).
    **jit_options
        Passed to ``jax.jit`` (e.g. ``donate_argnums=0``).

    Returns
    -------
    callable
        Same arguments and outputs as ``fn``. When it raises, the error's ``outputs``
        attribute holds ``fn``'s outputs: their state equals the input state (a bad batch
        writes no row), which matters when that input was donated.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.APLoss(num_samples=4)
    >>> step = xr.checked(loss_fn.apply)
    >>> try:
    ...     step(loss_fn.init(), jnp.array([0.9, 0.2]), jnp.array([1, 0]), jnp.array([0, 9]))
    ... except ValueError as error:
    ...     print(str(error).split(";")[0])
    APLoss: index values are outside [0, sample count=4) (checked inside a traced or compiled step)
    """
    checkified = checkify.checkify(fn)

    def traced(*args: Any, **kwargs: Any) -> Any:
        # Both are read while jit traces, then compiled in: the checks raise, as checkify's.
        with xrisk.set_checks("raise"), functional_checks():
            return checkified(*args, **kwargs)

    compiled = jax.jit(traced, **jit_options)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        error, outputs = compiled(*args, **kwargs)
        _raise_failed_check(error, outputs)
        return outputs

    return run


def _raise_failed_check(error: Any, outputs: Any) -> None:
    """Raise the first failed check of a checkified step as a ValueError carrying the
    step's ``outputs`` (whose state a bad batch left unchanged)."""
    message = error.get()
    if message is not None:
        exception = ValueError(message)
        exception.outputs = outputs  # type: ignore[attr-defined]
        raise exception


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

class APLoss(XRiskLoss):
    """Average-precision loss (SOAP) with pure ``init`` / ``apply`` for JAX.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.APLoss(num_samples=6)
    >>> state = loss_fn.init()
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> loss, state = step(state, jnp.array([0.9, 0.2, 0.6, 0.4]), jnp.array([1, 0, 1, 0]),
    ...                    jnp.array([0, 1, 2, 3]))
    >>> [round(float(u), 3) for u in state.u[:4, 0]]  # u_all of the first four samples
    [0.412, 0.0, 0.83, 0.0]
    """

    definition_type = xrisk.APLoss
    definition: xrisk.APLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, gamma: float = 0.9, margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.APLoss(num_samples, gamma=gamma, margin=margin, surrogate=surrogate,
                                  scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class AUCMLoss(XRiskLoss):
    """AUC-margin min-max loss with pure ``init`` / ``apply`` for JAX; a, b, alpha are the
    ``AUCMParams`` from ``init_params()``, trained with :class:`xrisk.jax.PESG`.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.AUCMLoss(version="v2")
    >>> params = loss_fn.init_params()._replace(a=jnp.asarray(0.3), b=jnp.asarray(0.2),
    ...                                         alpha=jnp.asarray(0.5))
    >>> loss, _ = loss_fn.apply(loss_fn.init(), jnp.array([0.1, 0.4, 0.35, 0.8]),
    ...                         jnp.array([0, 0, 1, 1]), params=params)
    >>> round(float(loss), 5)
    0.57625
    """

    definition_type = xrisk.AUCMLoss
    definition: xrisk.AUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, margin: float = 1.0, version: str = "v1", imratio: float | None = None,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class PairwiseAUCLoss(XRiskLoss):
    """Pairwise AUC loss (mean surrogate over positive-negative pairs) with pure ``init`` /
    ``apply`` for JAX; the state is empty.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.PairwiseAUCLoss(surrogate="squared_hinge")
    >>> loss, _ = jax.jit(loss_fn.apply)(loss_fn.init(), jnp.array([0.9, 0.2, 0.6, 0.4]),
    ...                                  jnp.array([1, 0, 1, 0]))
    >>> round(float(loss), 4)
    0.335
    """

    definition_type = xrisk.PairwiseAUCLoss
    definition: xrisk.PairwiseAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, surrogate: str = "logistic", margin: float = 1.0, scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.PairwiseAUCLoss(surrogate=surrogate, margin=margin, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class CrossEntropyLoss(XRiskLoss):
    """Binary cross-entropy of logits with pure ``init`` / ``apply`` for JAX; the state is
    empty.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.CrossEntropyLoss()
    >>> logits = jnp.array([0.0, 100.0, -100.0])  # float32, stable
    >>> labels = jnp.array([1, 0, 0])
    >>> (loss, _), grad = jax.value_and_grad(loss_fn.apply, argnums=1, has_aux=True)(
    ...     loss_fn.init(), logits, labels)
    >>> round(float(loss), 4), [round(float(g), 4) for g in grad]
    (33.5644, [-0.1667, 0.3333, 0.0])
    """

    definition_type = xrisk.CrossEntropyLoss
    definition: xrisk.CrossEntropyLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.CrossEntropyLoss()
        super().__init__(definition, dtype=dtype, device=device)


class FocalLoss(XRiskLoss):
    """Focal loss of logits with pure ``init`` / ``apply`` for JAX; the state is empty.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.FocalLoss(alpha=0.25, gamma=2.0)
    >>> loss, _ = loss_fn.apply(loss_fn.init(), jnp.array([0.0, 0.0]), jnp.array([1, 0]))
    >>> round(float(loss), 6)
    0.086643
    """

    definition_type = xrisk.FocalLoss
    definition: xrisk.FocalLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, alpha: float = 0.25, gamma: float = 2.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.FocalLoss(alpha=alpha, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class CompositionalAUCLoss(XRiskLoss):
    """Compositional AUC loss (k cross-entropy steps, then k AUC-M steps) with pure
    ``init`` / ``apply`` for JAX: the state holds the int32 call counter ``step``; a, b,
    alpha are the ``AUCMParams`` from ``init_params()``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.CompositionalAUCLoss(k=1, version="v2")
    >>> params = loss_fn.init_params()._replace(a=jnp.asarray(0.3), b=jnp.asarray(0.2),
    ...                                         alpha=jnp.asarray(0.5))
    >>> scores, labels = jnp.array([0.1, 0.4, 0.35, 0.8]), jnp.array([0, 0, 1, 1])
    >>> step = jax.jit(loss_fn.apply)
    >>> ce, state = step(loss_fn.init(), scores, labels, params=params)  # step 0: BCE
    >>> auc, state = step(state, scores, labels, params=params)  # step 1: AUC-M
    >>> round(float(ce), 5), round(float(auc), 5), int(state.step)
    (0.47229, 0.57625, 2)
    """

    definition_type = xrisk.CompositionalAUCLoss
    definition: xrisk.CompositionalAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, k: int = 1, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.CompositionalAUCLoss(k=k, margin=margin, version=version,
                                                imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class GlobalContrastiveLoss(XRiskLoss):
    """Unimodal global contrastive loss (SogCLR; iSogCLR with individual temperatures) with
    pure ``init`` / ``apply`` for JAX; the shifted estimators ``u`` = [u~, c] (u = u~ exp(c))
    and the individual temperatures ``temperature`` = [tau_i, momentum] live in the
    state.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.GlobalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0)
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> loss, state = step(loss_fn.init(), x, x[::-1], jnp.array([0, 1, 3]))
    >>> u = state.u[:, 0] * jnp.exp(state.u[:, 1])  # u = u~ exp(c) of every sample
    >>> round(float(loss), 4), [round(float(v), 4) for v in u]
    (0.0288, [4.1656, 2.9765, 0.0, 4.1656, 0.0])
    """

    definition_type = xrisk.GlobalContrastiveLoss
    definition: xrisk.GlobalContrastiveLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 0.1, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.05,
                 tau_max: float = 0.7, rho: float = 0.3, eta: float = 0.01, beta: float = 0.9,
                 normalize: bool = True, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.GlobalContrastiveLoss(num_samples, tau=tau, gamma=gamma,
                                                 gamma_schedule=gamma_schedule,
                                                 gamma_decay_epochs=gamma_decay_epochs, epoch=epoch,
                                                 temperature_scheme=temperature_scheme,
                                                 tau_min=tau_min, tau_max=tau_max, rho=rho, eta=eta,
                                                 beta=beta, normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class BimodalContrastiveLoss(XRiskLoss):
    """Bimodal (image-text) global contrastive loss with pure ``init`` / ``apply`` for JAX; one
    estimator table per direction, ``u_image`` and ``u_text`` (and ``temperature_image``,
    ``temperature_text`` with individual temperatures), in the state.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.BimodalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0)
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> image = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> text = jnp.array([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]])
    >>> loss, state = step(loss_fn.init(), image, text, jnp.array([0, 1, 3]))
    >>> u = state.u_image[:, 0] * jnp.exp(state.u_image[:, 1])  # image anchors
    >>> round(float(loss), 4), [round(float(v), 4) for v in u[:2]]
    (-0.0295, [0.8469, 0.2923])
    """

    definition_type = xrisk.BimodalContrastiveLoss
    definition: xrisk.BimodalContrastiveLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 0.01, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.005,
                 tau_max: float = 0.05, rho: float = 6.0, eta: float = 0.01, beta: float = 0.9,
                 negative_reduction: str = "mean", normalize: bool = True, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.BimodalContrastiveLoss(num_samples, tau=tau, gamma=gamma,
                                                  gamma_schedule=gamma_schedule,
                                                  gamma_decay_epochs=gamma_decay_epochs,
                                                  epoch=epoch,
                                                  temperature_scheme=temperature_scheme,
                                                  tau_min=tau_min, tau_max=tau_max, rho=rho,
                                                  eta=eta, beta=beta,
                                                  negative_reduction=negative_reduction,
                                                  normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class InfoNCELoss(XRiskLoss):
    """In-batch InfoNCE (SimCLR, CLIP) with pure ``init`` / ``apply`` for JAX, the baseline of the
    global contrastive losses (no state).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.InfoNCELoss(tau=0.5)
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> loss, _ = jax.jit(loss_fn.apply)(loss_fn.init(), x, x[::-1])
    >>> round(float(loss), 4)
    1.5032
    """

    definition_type = xrisk.InfoNCELoss
    definition: xrisk.InfoNCELoss  # the type __init__ builds (typed methods)

    def __init__(self, *, tau: float = 0.1, within_view: bool = True, normalize: bool = True,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.InfoNCELoss(tau=tau, within_view=within_view, normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class EntLossClassification(XRiskLoss):
    """Compositional entropy loss for extreme classification (SCENT or SOX) with pure
    ``init`` / ``apply`` for JAX.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.EntLossClassification(num_samples=4, mode="SOX")
    >>> def loss(logits, state):  # z_k - z_y with label 1
    ...     return loss_fn.apply(state, logits - logits[:, 1:2], jnp.array([3]))
    >>> grad, state = jax.grad(loss, has_aux=True)(jnp.array([[2.0, 0.0, 1.0]]),
    ...                                            loss_fn.init())
    >>> [round(float(g), 4) for g in grad[0]]  # CE's gradient at a first visit
    [0.6652, -0.91, 0.2447]
    >>> round(float(loss_fn.adjust_gamma(state, 5, 10).smoothing), 4)  # cosine schedule
    0.95
    """

    definition_type = xrisk.EntLossClassification
    definition: xrisk.EntLossClassification  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, mode: str = "SCENT", alpha: float = 10.0,
                 gamma: float = 0.9, alpha_multiplier: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.EntLossClassification(num_samples, mode=mode, alpha=alpha, gamma=gamma,
                                                 alpha_multiplier=alpha_multiplier)
        super().__init__(definition, dtype=dtype, device=device)

    def adjust_gamma(self, state: Any, epoch: int, num_epochs: int) -> Any:
        """The core's :meth:`xrisk.EntLossClassification.adjust_gamma`: the new state (pure; the
        state passed in is unchanged)."""
        return self.definition.adjust_gamma(state, epoch, num_epochs)


class MIDAM_softmax_pooling_loss(XRiskLoss):
    """Multi-instance AUC with softmax pooling (MIDAM) with pure ``init`` / ``apply`` for JAX;
    a, b, alpha are the ``AUCMParams`` from ``init_params()``, trained with
    :class:`xrisk.jax.MIDAM`.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.MIDAM_softmax_pooling_loss(num_samples=3, tau=1.0, gamma=1.0)
    >>> scores = jnp.log(jnp.array([[1.0, 3.0], [1.0, 1.0]]))
    >>> loss, state = loss_fn.apply(loss_fn.init(), scores, jnp.array([1, 0]),
    ...                             jnp.array([0, 2]), params=loss_fn.init_params())
    >>> round(float(loss), 4)
    0.4805
    >>> state = loss_fn.update_smoothing(state, 2)  # gamma / 2: state, so jit sees it
    >>> float(state.smoothing)
    0.5
    """

    definition_type = xrisk.MIDAM_softmax_pooling_loss
    definition: xrisk.MIDAM_softmax_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, tau: float = 0.1,
                 gamma: float = 0.9, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_softmax_pooling_loss(num_samples, margin=margin, tau=tau,
                                                      gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, state: Any, decay_factor: float) -> Any:
        """The core's :meth:`xrisk.MIDAM_softmax_pooling_loss.update_smoothing`: the new state
        (pure; the state passed in is unchanged)."""
        return self.definition.update_smoothing(state, decay_factor)


class MIDAM_attention_pooling_loss(XRiskLoss):
    """Multi-instance AUC with attention pooling (MIDAM) with pure ``init`` / ``apply`` for
    JAX; a, b, alpha are the ``AUCMParams`` from ``init_params()``, trained with
    :class:`xrisk.jax.MIDAM`.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.MIDAM_attention_pooling_loss(num_samples=2, gamma=1.0)
    >>> scores = jnp.array([[2.0, 0.0], [-1.0, 1.0]])
    >>> attention = jnp.log(jnp.array([[1.0, 1.0], [3.0, 1.0]]))
    >>> _, state = loss_fn.apply(loss_fn.init(), scores, attention, jnp.array([1, 0]),
    ...                          jnp.array([0, 1]), params=loss_fn.init_params())
    >>> (state.s[:, 0] / state.s[:, 1]).round(4).tolist()  # attention-weighted mean scores
    [1.0, -0.5]
    """

    definition_type = xrisk.MIDAM_attention_pooling_loss
    definition: xrisk.MIDAM_attention_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, gamma: float = 0.9,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_attention_pooling_loss(num_samples, margin=margin, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, state: Any, decay_factor: float) -> Any:
        """The core's :meth:`xrisk.MIDAM_attention_pooling_loss.update_smoothing`: the new state
        (pure; the state passed in is unchanged)."""
        return self.definition.update_smoothing(state, decay_factor)


class MultiLabelAUCMLoss(XRiskLoss):
    """Multi-label AUC-margin loss with pure ``init`` / ``apply`` for JAX; a, b, alpha of
    shape (num_labels,) are the ``MultiLabelAUCMParams`` from ``init_params()``, trained with
    :class:`xrisk.jax.PESG`.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.MultiLabelAUCMLoss(2, version="v2")
    >>> params = loss_fn.init_params()._replace(a=jnp.full(2, 0.3), b=jnp.full(2, 0.2),
    ...                                         alpha=jnp.full(2, 0.5))
    >>> scores = jnp.array([[0.1, 0.9], [0.4, 0.2], [0.35, 0.6], [0.8, 0.3]])
    >>> labels = jnp.array([[0, 1], [0, 0], [1, jnp.nan], [1, 0]])  # one missing label
    >>> loss, _ = loss_fn.apply(loss_fn.init(), scores, labels, params=params)
    >>> round(float(loss), 4)  # float32: (0.57625 + 0.465) / 2 = 0.520625
    0.5206
    """

    definition_type = xrisk.MultiLabelAUCMLoss
    definition: xrisk.MultiLabelAUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MultiLabelAUCMLoss(num_labels, margin=margin, version=version,
                                              imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class meanAveragePrecisionLoss(XRiskLoss):
    """Mean average precision (SOAP per label) with pure ``init`` / ``apply`` for JAX; the
    state's ``u`` is the (label, sample) table.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.meanAveragePrecisionLoss(2, num_samples=4)
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> scores = jnp.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]])
    >>> labels = jnp.array([[1, 0], [0, 1], [1, jnp.nan], [0, 1]])
    >>> loss, state = step(loss_fn.init(), scores, labels, jnp.array([0, 1, 2, 3]))
    >>> [round(float(u), 3) for u in state.u.reshape(2, 4, 2)[0, :, 0]]  # label 0's u_all
    [0.412, 0.0, 0.83, 0.0]
    """

    definition_type = xrisk.meanAveragePrecisionLoss
    definition: xrisk.meanAveragePrecisionLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, num_samples: int, *, gamma: float = 0.9,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.meanAveragePrecisionLoss(num_labels, num_samples, gamma=gamma,
                                                    margin=margin, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class MultiLabelpAUCLoss(XRiskLoss):
    """Multi-label partial AUC (every mode of ``pAUCLoss``, STACO included) with pure
    ``init`` / ``apply`` for JAX; every label's state rows are its own.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.MultiLabelpAUCLoss(2, num_samples=4, mode="STACO", margin=1.0)
    >>> scores = jnp.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]])
    >>> labels = jnp.array([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> task = jnp.array([0, 0, 0, 0])  # a TriSampler batch of task 0 only
    >>> loss, state = jax.jit(loss_fn.apply)(loss_fn.init(), scores, labels,
    ...                                      jnp.array([0, 1, 2, 3]), task)
    >>> round(float(loss), 4), [round(float(s), 4) for s in state.s2]  # label 1 not in it
    (1.34, [0.1, 0.0])
    """

    definition_type = xrisk.MultiLabelpAUCLoss
    definition: xrisk.MultiLabelpAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, num_samples: int, *, mode: str = "1w",
                 beta: float | None = None, eta: float | None = None, margin: float | None = None,
                 gamma: float | None = None, lam: float | None = None, tau: float | None = None,
                 gammas: tuple[float, float] | None = None, alpha: float | None = None,
                 beta_0: float | None = None, beta_1: float | None = None,
                 theta_0: float | None = None, theta_1: float | None = None,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.MultiLabelpAUCLoss(num_labels, num_samples, mode=mode, beta=beta,
                                              eta=eta, margin=margin, gamma=gamma, lam=lam, tau=tau,
                                              gammas=gammas, alpha=alpha, beta_0=beta_0,
                                              beta_1=beta_1, theta_0=theta_0, theta_1=theta_1,
                                              surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class pAUC_CVaR_Loss(XRiskLoss):
    """One-way partial AUC by CVaR (SOPA) with pure ``init`` / ``apply`` for JAX;
    the state holds the per-sample ``threshold``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.pAUC_CVaR_Loss(num_samples=4, beta=0.5)
    >>> step = jax.jit(jax.value_and_grad(loss_fn.apply, argnums=1, has_aux=True))
    >>> (loss, state), grad = step(loss_fn.init(), jnp.array([0.9, 0.2, 0.6, 0.4]),
    ...                            jnp.array([1, 0, 1, 0]), jnp.array([0, 1, 2, 3]))
    >>> round(float(loss), 4), [round(float(t), 4) for t in state.threshold]
    (0.67, [0.1, 0.0, 0.1, 0.0])
    """

    definition_type = xrisk.pAUC_CVaR_Loss
    definition: xrisk.pAUC_CVaR_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, beta: float = 0.2, eta: float = 0.1,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.pAUC_CVaR_Loss(num_samples, beta=beta, eta=eta, margin=margin,
                                          surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class pAUC_DRO_Loss(XRiskLoss):
    """One-way partial AUC by KL-DRO (SOPAs) with pure ``init`` /
    ``apply`` for JAX; the state holds the shifted estimators ``u`` = [u~, c], u = u~ exp(c).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.pAUC_DRO_Loss(num_samples=4, gamma=1.0)
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> loss, state = step(loss_fn.init(), jnp.array([0.9, 0.2, 0.6, 0.4]),
    ...                    jnp.array([1, 0, 1, 0]), jnp.array([0, 1, 2, 3]))
    >>> u = state.u[:, 0] * jnp.exp(state.u[:, 1])  # mean_j exp(l_ij) of positives 0, 2
    >>> round(float(loss), 4), [round(float(v), 4) for v in u]
    (0.3479, [1.1891, 0.0, 1.6649, 0.0])
    """

    definition_type = xrisk.pAUC_DRO_Loss
    definition: xrisk.pAUC_DRO_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, gamma: float = 0.9, lam: float = 1.0,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.pAUC_DRO_Loss(num_samples, gamma=gamma, lam=lam, margin=margin,
                                         surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class tpAUC_KL_Loss(XRiskLoss):
    """Two-way partial AUC by KL-DRO (SOTAs) with pure ``init`` /
    ``apply`` for JAX; the state holds the shifted estimators ``u`` (per sample) and ``w``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.tpAUC_KL_Loss(num_samples=4, tau=0.5)
    >>> loss, state = jax.jit(loss_fn.apply)(loss_fn.init(), jnp.array([0.9, 0.2, 0.6, 0.4]),
    ...                                      jnp.array([1, 0, 1, 0]), jnp.array([0, 1, 2, 3]))
    >>> round(float(loss), 4), round(float(state.w[0] * jnp.exp(state.w[1])), 4)
    (0.4982, 1.5257)
    """

    definition_type = xrisk.tpAUC_KL_Loss
    definition: xrisk.tpAUC_KL_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 1.0, lam: float = 1.0,
                 gammas: tuple[float, float] = (0.9, 0.9), margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.tpAUC_KL_Loss(num_samples, tau=tau, lam=lam, gammas=gammas,
                                         margin=margin, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class tpAUC_CVaR_Loss(XRiskLoss):
    """Two-way partial AUC by double CVaR (STACO) with pure ``init`` /
    ``apply`` for JAX; the state holds the rows ``u`` = [u, s1, dual] and the scalar ``s2``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.tpAUC_CVaR_Loss(num_samples=4, margin=1.0)
    >>> loss, state = jax.jit(loss_fn.apply)(loss_fn.init(), jnp.array([0.9, 0.2, 0.6, 0.4]),
    ...                                      jnp.array([1, 0, 1, 0]), jnp.array([0, 1, 2, 3]))
    >>> round(float(loss), 4), [round(float(v), 4) for v in state.u[0]], round(float(state.s2), 4)
    (1.34, [0.34, 0.2, 1.0], 0.1)
    """

    definition_type = xrisk.tpAUC_CVaR_Loss
    definition: xrisk.tpAUC_CVaR_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 0.5, alpha: float = 0.1,
                 beta_0: float = 0.1, beta_1: float = 0.1, theta_0: float = 0.5,
                 theta_1: float = 0.5, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.tpAUC_CVaR_Loss(num_samples, margin=margin, alpha=alpha, beta_0=beta_0,
                                           beta_1=beta_1, theta_0=theta_0, theta_1=theta_1,
                                           surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class ListwiseCELoss(XRiskLoss):
    """Listwise cross-entropy (the warm-up of SONG) with pure ``init`` /
    ``apply`` for JAX; the state holds the rows ``u`` = [u~, log-shift] per interaction.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.ListwiseCELoss(num_interactions=5, gamma=1.0)
    >>> scores = jnp.array([[2.0, 0.5, 1.0], [1.0, 0.0, 3.0]])  # 1 positive, 2 negatives
    >>> loss, state = jax.jit(loss_fn.apply)(loss_fn.init(), scores, jnp.array([[0], [3]]))
    >>> round(float(loss), 4), float(state.u[3, 0] * jnp.exp(state.u[3, 1])) > 3
    (0.669, True)
    """

    definition_type = xrisk.ListwiseCELoss
    definition: xrisk.ListwiseCELoss  # the type __init__ builds (typed methods)

    def __init__(self, num_interactions: int, *, gamma: float = 0.9, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.ListwiseCELoss(num_interactions, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class NDCGLoss(XRiskLoss):
    """NDCG (SONG) or top-K NDCG (K-SONG, ``top_k=K``) with pure ``init``
    / ``apply`` for JAX; the state holds ``u`` per interaction, ``lambda_q`` and ``s_q`` per query.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.NDCGLoss(num_interactions=4, num_queries=2, num_items=10)
    >>> scores = jnp.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]])  # 2 positives, 1 negative
    >>> loss, state = jax.jit(loss_fn.apply)(
    ...     loss_fn.init(), scores, relevance=jnp.array([[3.0, 1.0], [2.0, 2.0]]),
    ...     query=jnp.array([0, 1]), interaction=jnp.array([[0, 1], [2, 3]]),
    ...     num_relevant=jnp.array([2.0, 2.0]), ideal_dcg=jnp.array([7.63, 4.89]))
    >>> round(float(loss), 4), [round(float(v), 3) for v in state.u]
    (0.2142, [0.36, 1.704, 1.575, 0.495])
    """

    definition_type = xrisk.NDCGLoss
    definition: xrisk.NDCGLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_interactions: int, num_queries: int, num_items: int | None, *,
                 gamma0: float = 0.9, gamma1: float = 0.9, eta0: float = 0.01, margin: float = 1.0,
                 top_k: int | None = None, top_k_version: str = "theo", tau_1: float = 0.01,
                 tau_2: float = 0.0001, sigmoid_alpha: float = 2.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.NDCGLoss(num_interactions, num_queries, num_items, gamma0=gamma0,
                                    gamma1=gamma1, eta0=eta0, margin=margin, top_k=top_k,
                                    top_k_version=top_k_version, tau_1=tau_1, tau_2=tau_2,
                                    sigmoid_alpha=sigmoid_alpha, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


# --- end of the generated classes ---


def pAUCLoss(mode: str = "1w", **kwargs: Any) -> XRiskLoss:
    """The partial-AUC loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"SOPA"`` -> :class:`pAUC_CVaR_Loss`, ``"SOPAs"`` / ``"1w"`` -> :class:`pAUC_DRO_Loss`,
    ``"SOTAs"`` / ``"2w"`` -> :class:`tpAUC_KL_Loss`, ``"STACO"`` -> :class:`tpAUC_CVaR_Loss`;
    another mode raises a ValueError that lists these.

    Examples
    --------
    >>> import xrisk.jax as xr
    >>> loss_fn = xr.pAUCLoss("2w", num_samples=100, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau
    ('tpAUC_KL_Loss', 0.5)
    """
    return ADAPTED[pauc_class(mode)](**kwargs)


def MIDAMLoss(mode: str = "attention", **kwargs: Any) -> XRiskLoss:  # noqa: N802
    """The multi-instance AUC loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"softmax"`` -> :class:`MIDAM_softmax_pooling_loss`, ``"attention"`` ->
    :class:`MIDAM_attention_pooling_loss`; another mode raises a ValueError that lists these.

    Examples
    --------
    >>> import xrisk.jax as xr
    >>> loss_fn = xr.MIDAMLoss("softmax", num_samples=100, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau
    ('MIDAM_softmax_pooling_loss', 0.5)
    """
    return ADAPTED[midam_class(mode)](**kwargs)
