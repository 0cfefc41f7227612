"""What a framework adapter uses of the core, in one documented module.

The torch, TensorFlow and JAX adapters (``xrisk.torch``, ``xrisk.tensorflow``, ``xrisk.jax``)
import the core's helpers from here and from the public packages only, never from the core's
private modules, so that those can change without breaking an adapter; a new adapter
(another framework) starts from this list.

State containers and checkpoints
    :class:`LossContainer` (the ``state`` / ``aux_params`` views of a loss holding its state
    in framework containers), :func:`definition_attribute` and :func:`refuse_assignment`
    (read-only hyper-parameters through the adapter object), :func:`dtype_name` (the float
    dtype a loss keeps its state in), :func:`initial_values` (a table's fill, for containers
    built row by row), :func:`exported_state`, :func:`checked_state_arrays` and
    :data:`METADATA_KEY` (the framework-neutral checkpoint format).
Applying a loss
    :func:`apply_loss` (``(loss, new_state)`` of a definition on one batch: binding, checks,
    the compute dtype, the empty batch), :func:`bind_inputs`, :func:`check_batch` (the host
    checks alone) and :func:`prepare_definition` (declarations cached before a first step).
Constructors
    :func:`guard_init` (a loss class's LibAUC argument names raise naming ours),
    :func:`refuse_foreign_arguments` (the same for an optimizer's constructor),
    :func:`compose_doc` (an adapter class's docstring completed from its core class's),
    :func:`calls_through` (the frames an adapter's entry point adds above the core, so that a
    warning about a batch names the user's line).
Optimizers
    :func:`namespace_of` (the array namespace of a parameter, looked up once per type).
Arguments
    :func:`check_interval` and :func:`check_count` (the one check of a scalar or a whole-number
    argument, raising with the received value, the expected range and the fix).

>>> import xrisk.adapter_api as api
>>> api.dtype_name("APLoss", "float64")
'float64'
"""

from __future__ import annotations

from ._adapter_support import (
    METADATA_KEY,
    LossContainer,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    exported_state,
    refuse_assignment,
)
from ._apply import apply as apply_loss
from ._apply import bind as bind_inputs
from ._apply import check_batch
from ._apply import prepare as prepare_definition
from ._arguments import check_count, check_interval
from ._libauc_names import guard_init
from ._state import initial_values
from ._value_checks import calls_through
from .optim._rule import _namespace as namespace_of
from .optim._rule import refuse_foreign_arguments

__all__ = [
    "METADATA_KEY",
    "LossContainer",
    "apply_loss",
    "bind_inputs",
    "check_batch",
    "calls_through",
    "check_count",
    "check_interval",
    "checked_state_arrays",
    "compose_doc",
    "definition_attribute",
    "dtype_name",
    "exported_state",
    "guard_init",
    "initial_values",
    "namespace_of",
    "prepare_definition",
    "refuse_assignment",
    "refuse_foreign_arguments",
]
