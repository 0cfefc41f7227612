"""The global check mode: what a failed *in-graph* value check of a loss does.

One switch, :class:`set_checks`, chooses what a failed *in-graph* check does:

- ``"nan"`` (default): the step returns NaN and writes no state row. Nothing leaves the
  device, so a compiled step costs what it costs without checks.
- ``"raise"``: the step also raises, inside the compiled code, with the framework's own
  assertion: ``torch._check_tensor_all`` (eager and under ``torch.compile``, where it breaks
  the graph at the check), ``tf.debugging.Assert`` (eagerly and inside ``tf.function``), and
  on JAX a ``jax.experimental.checkify`` check when the step is checkified
  (``xrisk.jax.checked``: a ``ValueError`` that carries the step's outputs), else a host
  callback that raises while a ``jax.jit`` / ``jax.grad`` step runs. It synchronises with
  the host at every check: a debugging mode. The state is left unchanged either way.

A global switch rather than an argument of ``apply``: the adapters' losses are called as
``loss_fn(scores, labels, index)`` inside user code, optimizers and compiled models, so one
setting reaches every call without changing any signature. The mode is read
when a step is *traced*: ``torch.compile`` guards on it (changing it recompiles), but a
``tf.function`` or ``jax.jit`` function keeps the mode of its first trace — set the mode before
building the compiled step.
"""

from __future__ import annotations

from ._arguments import check_choice

__all__ = ["CHECK_MODES", "InputWarning", "StateCastWarning", "set_checks", "get_checks"]


#: What a failed in-graph value check does (see the module docstring).
CHECK_MODES = ("nan", "raise")

# A plain module global (not a ContextVar): torch.compile guards on the globals it reads, so
# a step compiled under one mode is recompiled when the mode changes.
_mode = "nan"

class InputWarning(UserWarning):
    """A batch that passes the checks but is probably not what the loss expects (e.g. logits
    given to a loss that expects probabilities)."""


class StateCastWarning(UserWarning):
    """``load_state`` rounded an exported float entry to the loss's narrower dtype."""


class set_checks:  # noqa: N801  (used like a function, as torch.set_grad_enabled)
    """Choose what a failed in-graph value check does: ``"nan"`` (default) or ``"raise"``.

    Takes effect at once and, used as a context manager, restores the previous mode on exit::

        xrisk.set_checks("raise")            # from now on
        with xrisk.set_checks("raise"):      # only inside the block
            loss = loss_fn(scores, labels, index)

    Host-readable batches (eager CPU arrays) always raise on bad values; the mode matters for
    traced or device arrays (``jax.jit``, ``jax.grad``, ``tf.function``, ``torch.compile``,
    GPU tensors). The setting is process-wide and is read when a step is traced (see the
    module docstring).

    Parameters
    ----------
    mode : {"nan", "raise"}
        ``"nan"``: a bad batch gives a NaN loss and writes no state. ``"raise"``: it also
        raises inside the compiled step (the state is left unchanged either way).
    """

    def __init__(self, mode: str) -> None:
        global _mode
        mode = check_choice("xrisk.set_checks", "mode", mode, CHECK_MODES)
        self.previous = _mode
        self.mode = mode
        _mode = mode

    def __enter__(self) -> set_checks:
        return self

    def __exit__(self, *exc: object) -> None:
        global _mode
        _mode = self.previous

    def __repr__(self) -> str:
        return f"xrisk.set_checks({self.mode!r})"


def get_checks() -> str:
    """The current mode of the in-graph value checks, ``"nan"`` or ``"raise"``."""
    return _mode
