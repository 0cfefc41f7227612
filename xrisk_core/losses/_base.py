"""What every X-risk loss definition provides, and nothing framework-specific.

A loss definition is an immutable, validated set of hyper-parameters plus two pure functions
in the style of optax:

- ``init(...) -> State``: the per-sample state, a NamedTuple of arrays with shapes fixed at
  construction (declared by :meth:`state_fields`);
- ``apply(state, scores, labels, index, *, params) -> (loss, new_state)``.

Trainable auxiliaries (AUC-M's a, b, α) are *parameters*, declared by :meth:`param_fields`:
the optimizer owns their update. Adapters read these declarations to allocate torch buffers
and ``nn.Parameter``\\ s, ``tf.Variable``\\ s or JAX pytrees, so a new loss needs no adapter code.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

from .. import _validation
from .._config import Configured
from .._state import StateField, allocate_state
from ..backends import backend_of

__all__ = ["LossDefinition", "NoState", "NoParams", "NO_PARAMS"]

Array = Any


class NoState(NamedTuple):
    """State of a loss without per-sample state."""


class NoParams(NamedTuple):
    """Parameters of a loss without trainable auxiliaries."""


#: The parameters of every loss without trainable auxiliaries.
NO_PARAMS = NoParams()


class LossDefinition(Configured):
    """Base class of the framework-neutral loss definitions.

    Subclasses set ``state_type`` / ``params_type`` (NamedTuple classes), implement
    :meth:`state_fields`, :meth:`param_fields` (when they have any) and :meth:`apply`, and
    validate every hyper-parameter in ``__init__``.
    """

    state_type: ClassVar[type] = NoState
    params_type: ClassVar[type] = NoParams
    #: Whether ``apply`` needs the dataset index of each example.
    needs_index: ClassVar[bool] = False

    # -- declarations -------------------------------------------------------------------
    def state_fields(self) -> dict[str, StateField]:
        """Name -> :class:`StateField` of every state array, in ``state_type`` order."""
        return {}

    def param_fields(self) -> dict[str, StateField]:
        """Name -> :class:`StateField` of every trainable auxiliary, in ``params_type`` order."""
        return {}

    # -- pure functions -----------------------------------------------------------------
    def init(self, *, xp: Any, dtype: Any = None, device: Any = None) -> Any:
        """Allocate the initial state in namespace ``xp`` (default dtype ``xp.float32``)."""
        fields = allocate_state(
            self.state_fields(), xp=xp, dtype=dtype or xp.float32, device=device
        )
        return self.state_type(**fields)

    def init_params(self, *, xp: Any, dtype: Any = None, device: Any = None) -> Any:
        """Allocate the initial trainable auxiliaries in namespace ``xp``."""
        fields = allocate_state(
            self.param_fields(), xp=xp, dtype=dtype or xp.float32, device=device
        )
        return self.params_type(**fields)

    def apply(
        self, state: Any, scores: Array, labels: Array, index: Array | None = None, *,
        params: Any = NO_PARAMS,
    ) -> tuple[Array, Any]:
        """Return ``(loss, new_state)`` for one mini-batch."""
        raise NotImplementedError

    # -- helpers for subclasses ---------------------------------------------------------
    def _prepare(
        self, state: Any, params: Any, scores: Array, labels: Array, index: Array | None
    ) -> tuple[Any, Any, Array, Array, Array | None]:
        """Find the backend, validate the batch and return ``(backend, xp, s, y, index)``.

        ``y`` is returned as 0.0/1.0 floats of the scores' dtype.
        """
        if self.needs_index and index is None:
            raise ValueError(
                f"{self.name}: index is None; expected the dataset index of every example, "
                "shape (batch_size,). Fix: return the index from the dataset, "
                "(x, y, index) = batch, and pass it to the loss."
            )
        arrays = (scores, labels, index, *state, *params)
        names = ("scores", "labels", "index",
                 *(f"state.{f}" for f in state._fields), *(f"params.{f}" for f in params._fields))
        backend = backend_of(*arrays, names=names)
        xp = backend.namespace
        num_samples = getattr(self, "num_samples", None)
        scores, labels, index = _validation.check_batch(
            self.name, backend, scores, labels, index, num_samples=num_samples, xp=xp
        )
        return backend, xp, scores, xp.astype(labels, scores.dtype), index
