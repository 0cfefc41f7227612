"""PyTorch losses: one ``nn.Module`` per core loss definition.

State lives in registered buffers and trainable auxiliaries (AUC-M's a, b, α) in
``nn.Parameter``\\ s, so ``state_dict()``, ``load_state_dict()``, ``.to(device)`` and DDP see
them. A call runs the core's pure ``apply``; the torch backend writes the new rows into the
buffers in place (O(batch)). Each class below only fixes its constructor signature and its
examples (written by ``tools/generate_adapters.py`` from the core signatures):
:class:`XRiskLoss` reads everything else from the core definition's declarations.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

import xrisk
from xrisk import LossDefinition
from xrisk.adapter_api import (
    METADATA_KEY,
    LossContainer,
    apply_loss,
    calls_through,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    exported_state,
    guard_init,
    prepare_definition,
    refuse_assignment,
)
from xrisk.losses import NO_PARAMS, NoParams
from xrisk.losses.midam import midam_class
from xrisk.losses.pauc import pauc_class

from .distributed import check_call as check_distributed_call

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", *xrisk.LOSSES, "pAUCLoss", "MIDAMLoss"]

DType: TypeAlias = str | torch.dtype | None
Device: TypeAlias = str | torch.device | None


#: This adapter's class of each core definition (the front doors build by it).
ADAPTED: dict[type[LossDefinition], type[XRiskLoss]] = {}


def _saved_scalars(state: Any) -> Any:
    """``state`` with each 0-d entry (a counter, a scalar estimate) read through an identity
    that torch.compile's backward must save rather than recompute.

    The compiled forward writes the new state into the buffers when it returns; AOTAutograd's
    min-cut partitioner may recompute a cheap read of a buffer in the backward instead of
    saving it, and then reads the value written after the forward (torch 2.13; pytorch/pytorch
    PR 197039). CompositionalAUCLoss's phase ``step % 2k < k`` was recomputed that way: the
    compiled step took the other phase's gradient (inductor) or raised a version-counter error
    (``aot_eager_decomp_partition``). A one-element cumulative sum is the identity, bit for
    bit, and is not on the partitioner's list of recomputable operators, so the forward's value
    is saved. Tables (ndim >= 1) are read by gathers, which are not recomputed either.
    """
    return type(state)(*(torch.cumsum(value.reshape(1), 0, dtype=value.dtype).reshape(())
                         if value.ndim == 0 and value.dtype != torch.bool else value
                         for value in state))


class XRiskLoss(LossContainer, nn.Module):
    """Base of the torch losses: a core definition with its state in buffers.

    Call it with the inputs the definition declares (e.g. ``loss_fn(scores, labels, index)``),
    positionally or by name; the state rows of the batch are updated in place.
    ``state_dict()`` carries the metadata of :meth:`export_state` (key ``"_extra_state"``),
    and ``load_state_dict()`` (of the loss or of a model holding it) checks the loss's
    entries as :meth:`load_state` does before copying any.
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
        super().__init__()
        prepare_definition(definition)  # cached now, not inside a first compiled call
        calls_through(definition, 3)  # Module.__call__, _call_impl, forward: warnings name the user
        self.definition = definition
        float_dtype = (torch.get_default_dtype() if dtype is None
                       else getattr(torch, dtype_name(definition.name, dtype)))
        state = definition.init(xp=_namespace(), dtype=float_dtype, device=device)
        for name, value in state._asdict().items():
            self.register_buffer(name, value)
        params = definition.init_params(xp=_namespace(), dtype=float_dtype, device=device)
        for name, value in params._asdict().items():
            self.register_parameter(name, nn.Parameter(value))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        super().__setattr__(name, value)

    def forward(self, *inputs: torch.Tensor, **named: torch.Tensor) -> torch.Tensor:
        """Loss of one mini-batch; updates the state buffers of the batch's rows.

        Inputs follow ``self.definition.inputs()`` (e.g. scores, labels, index).
        """
        check_distributed_call(self, inputs, named)  # no-op without a process group
        if self.definition.params_type is not NoParams:  # see _project_after_step
            _LOSSES_WITH_AUXILIARIES.add(self)
        state = self.state
        if torch.compiler.is_compiling():
            state = _saved_scalars(state)
        loss, new_state = apply_loss(self.definition, state, *inputs,
                                     params=self.aux_params, **named)
        self._write_state(new_state)
        return loss

    @property
    def state(self) -> Any:
        """The current state as the core's NamedTuple of the buffers."""
        # The buffers from their dict: getattr goes through nn.Module.__getattr__ and ours
        # (two Python frames per entry, every step).
        kind: Any = self.definition.state_type
        buffers = self._buffers
        return kind(*[buffers[name] if name in buffers else getattr(self, name)
                      for name in kind._fields])

    @property
    def aux_params(self) -> Any:
        """The trainable auxiliaries as the core's NamedTuple of the ``nn.Parameter``\\ s."""
        kind: Any = self.definition.params_type
        if kind is NoParams:  # most losses: no auxiliaries
            return NO_PARAMS
        parameters = self._parameters
        return kind(*[parameters[name] if name in parameters else getattr(self, name)
                      for name in kind._fields])

    def _write_state(self, new_state: Any) -> None:
        """Copy the entries of ``new_state`` (the core's pure result) into the buffers."""
        buffers: dict[str, Any] = self._buffers
        for name, value in zip(new_state._fields, new_state, strict=True):
            buffer = buffers[name] if name in buffers else getattr(self, name)
            if value is not buffer:  # the torch backend writes in place; keep that contract
                with torch.no_grad():
                    buffer.copy_(value)

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral).

        Each array is a copy in its entry's dtype, except bfloat16 (after ``.bfloat16()``),
        which numpy lacks: it is exported as float32, exactly. The ``"__xrisk__"`` entry names
        the loss, its meaning-giving hyper-parameters and the format (see the README's
        checkpoint format); ``np.savez`` stores the dict as it is.
        """
        backend = xrisk.backends.get_backend("torch")
        return exported_state(self.definition, {
            name: np.array(backend.to_numpy(getattr(self, name)), copy=True)
            for name in self.definition.state_shapes()})

    def load_state(self, arrays: Mapping[str, Any], *, reinterpret: bool = False) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error.

        The export must name this loss and its meaning-giving hyper-parameters (its
        ``"__xrisk__"`` metadata), and every entry is checked first (keys, shapes, values in
        their declared domains; see :func:`xrisk.adapter_api.checked_state_arrays`); a
        float export of more precision than the loss is rounded with a
        :class:`xrisk.StateCastWarning`. ``reinterpret=True`` loads the arrays of another
        loss's export (or of an export without metadata whose layout several losses share,
        or of arrays made by hand) as this loss's state, on purpose: keys, shapes and
        domains are still checked.
        """
        targets = {name: getattr(self, name) for name in self.definition.state_shapes()}
        checked = checked_state_arrays(
            self.definition, arrays,
            {name: str(t.dtype).rpartition(".")[2] for name, t in targets.items()},
            reinterpret=reinterpret)
        # Convert everything before the first copy, so a failure changes nothing.
        tensors = {name: torch.from_numpy(value).to(device=targets[name].device,
                                                    dtype=targets[name].dtype)
                   for name, value in checked.items()}
        with torch.no_grad():
            for name, tensor in tensors.items():
                targets[name].copy_(tensor)

    def get_extra_state(self) -> torch.Tensor:
        """The ``"__xrisk__"`` metadata of :meth:`export_state` (format, loss name,
        meaning-giving hyper-parameters; UTF-8 JSON in a uint8 tensor of shape (bytes,)),
        which ``state_dict()`` keeps under ``"_extra_state"``.

        A tensor rather than a dict, so that ``torch.save`` then
        ``torch.load(weights_only=True)``, safetensors and code that maps over a state dict's
        tensors (``{k: v.clone() ...}``) take it like the buffers.

        Examples
        --------
        >>> import xrisk.torch as xr
        >>> sorted(xr.APLoss(num_samples=4).state_dict())
        ['_extra_state', 'u']
        """
        return torch.from_numpy(exported_state(self.definition, {})[METADATA_KEY])

    def set_extra_state(self, state: Any) -> None:
        """Nothing to set: :meth:`_load_from_state_dict` checks the metadata with the
        entries, before torch copies anything; this loss's own follows from its definition."""

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """torch's load of this module's entries (``load_state_dict`` of the loss or of a
        model holding it: a state dict from ``torch.save``, Lightning, DDP), with the checks
        of :meth:`load_state`.

        The entries under ``prefix`` and the metadata ``prefix + "_extra_state"`` go through
        :func:`xrisk.adapter_api.checked_state_arrays` first: a state dict of another
        loss or of other meaning-giving hyper-parameters, a wrong shape or a value outside its
        declared domain is refused; a state dict without metadata (saved before xrisk wrote
        it) loads where ``load_state`` takes an export of format 0. torch then copies the
        checked values. On any such error none of this loss's tensors is copied and the
        message joins torch's list: ``load_state_dict`` raises its RuntimeError after copying
        the other modules' tensors (torch's own behaviour, as for a size mismatch).

        Key matching stays torch's: ``load_state_dict`` calls this hook with ``strict=True``
        whatever its own ``strict`` and applies that to the missing and unexpected keys at
        the end, so the entries present are checked and copied either way; ``strict=True``
        then raises for the missing ones, ``strict=False`` keeps their values.
        """
        names = self.definition.state_shapes()
        extra_key = prefix + "_extra_state"  # torch's key of get_extra_state()
        local = {key[len(prefix):]: value for key, value in state_dict.items()
                 if key.startswith(prefix) and key != extra_key}
        metadata = state_dict.get(extra_key)
        try:
            for key, value in local.items():
                if not torch.overrides.is_tensor_like(value):
                    raise TypeError(
                        f"{self.definition.name}: state_dict[{prefix + key!r}] is a "
                        f"{type(value).__name__}; expected a torch.Tensor. Fix: pass the "
                        "tensors of state_dict() (or an export_state() dict to load_state).")
            arrays = self.definition.upgrade_state(local)  # old keys, as load_state reads them
            present = {name: arrays[name] for name in names if name in arrays}
            # assign=True keeps the state dict's tensors (their dtype), else copy_ into ours
            like = {name: value if local_metadata.get("assign_to_params_buffers", False)
                    and torch.is_tensor(value) else getattr(self, name)
                    for name, value in present.items()}
            # as stored (old keys too: the format-0 rule reads the keys before conversion)
            stored = {key: value for key, value in local.items()
                      if key in present or key not in arrays}
            checked = checked_state_arrays(
                self.definition,
                stored if metadata is None else {**stored, METADATA_KEY: metadata},
                {name: str(t.dtype).rpartition(".")[2] for name, t in like.items()},
                shapes={name: names[name] for name in present},
            ) if present or metadata is not None else {}  # nothing of this loss here
        except (ValueError, TypeError) as error:
            error_msgs.append(self._state_dict_error(error, prefix))
            return
        for key in set(local) - set(arrays):  # converted by upgrade_state
            del state_dict[prefix + key]
        for name, value in checked.items():
            state_dict[prefix + name] = torch.from_numpy(value).to(device=like[name].device,
                                                                   dtype=like[name].dtype)
        state_dict.setdefault(extra_key, self.get_extra_state())  # format 0: checked above
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def _state_dict_error(self, error: Exception, prefix: str) -> str:
        """The message of a refused ``load_state_dict``: where the entries are, and how to
        load them on purpose where the message says ``reinterpret=True`` (an argument of
        :meth:`load_state`, not of torch's ``load_state_dict``)."""
        message = str(error)
        if "reinterpret=True" in message:
            names = sorted(self.definition.state_shapes())
            key = f"{prefix!r} + name" if prefix else "name"
            message += (
                " load_state_dict has no reinterpret: to load these entries as this loss's "
                f"state on purpose, call loss.load_state({{name: state_dict[{key}] for name "
                f"in {names}}}, reinterpret=True) on this loss.")
        return f"In the entries {prefix}*: {message}" if prefix else message

    def extra_repr(self) -> str:
        return repr(self.definition)


def _namespace() -> Any:
    return xrisk.backends.get_backend("torch").namespace


#: The live losses with trainable auxiliaries (weakly held; a loss joins at its forward, so
#: copies and unpickled losses join too).
_LOSSES_WITH_AUXILIARIES: weakref.WeakSet[XRiskLoss] = weakref.WeakSet()


def _project_after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """After any ``torch.optim`` optimizer's step: project each ``ascent`` auxiliary it
    stepped onto its bounds (e.g. AUC-M's alpha >= 0).

    The loss reverses the gradient of its ascent auxiliaries
    (:func:`xrisk.adapter_api.apply_loss`), so a plain optimizer (``torch.optim.Adam``
    over ``[*model.parameters(), *loss_fn.parameters()]``) ascends on them; this global
    post-step hook adds the projection of the saddle-point update to the stored value. The
    xrisk optimizers take the ascent themselves and never hold an ascent auxiliary in their
    groups, so they are left alone. O(parameters of the optimizer) Python work per step, none
    while no loss with auxiliaries is alive.
    """
    if not _LOSSES_WITH_AUXILIARIES:
        return
    ascent = {id(param): (param, spec) for loss in list(_LOSSES_WITH_AUXILIARIES)
              for name, spec in loss.definition.auxiliaries().items() if spec.role == "ascent"
              for param in (getattr(loss, name),)}
    stepped = {id(param): ascent[id(param)] for group in optimizer.param_groups
               for param in group["params"] if id(param) in ascent}
    if stepped:
        xp = _namespace()
        with torch.no_grad():
            for param, spec in stepped.values():
                param.copy_(spec.project(param, xp))


register_optimizer_step_post_hook(_project_after_step)


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

class APLoss(XRiskLoss):
    """Average-precision loss (SOAP) as a ``torch.nn.Module``; state ``u`` is a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.APLoss(num_samples=6, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> loss_fn.u[:4, 0].round(decimals=4).tolist()  # u_all of the first four samples
    [0.4118, 0.0, 0.8303, 0.0]
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
    """AUC-margin min-max loss as a ``torch.nn.Module``; a, b, alpha are ``nn.Parameter``\\ s.

    Train with :class:`xrisk.torch.PESG`, which descends on the model's parameters, a and b
    and ascends on alpha.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.AUCMLoss(version="v2", dtype="float64")
    >>> with torch.no_grad():
    ...     _ = loss_fn.a.fill_(0.3), loss_fn.b.fill_(0.2), loss_fn.alpha.fill_(0.5)
    >>> scores = torch.tensor([0.1, 0.4, 0.35, 0.8], dtype=torch.float64)
    >>> round(loss_fn(scores, torch.tensor([0, 0, 1, 1])).item(), 5)
    0.57625
    """

    definition_type = xrisk.AUCMLoss
    definition: xrisk.AUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, margin: float = 1.0, version: str = "v1", imratio: float | None = None,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class PairwiseAUCLoss(XRiskLoss):
    """Pairwise AUC loss (mean surrogate over positive-negative pairs) as a
    ``torch.nn.Module``; no state.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.PairwiseAUCLoss(surrogate="squared_hinge", dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]))
    >>> loss.backward()
    >>> round(loss.item(), 4)
    0.335
    """

    definition_type = xrisk.PairwiseAUCLoss
    definition: xrisk.PairwiseAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, surrogate: str = "logistic", margin: float = 1.0, scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.PairwiseAUCLoss(surrogate=surrogate, margin=margin, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class CrossEntropyLoss(XRiskLoss):
    """Binary cross-entropy of logits as a ``torch.nn.Module``; no state.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.CrossEntropyLoss()
    >>> logits = torch.tensor([0.0, 100.0, -100.0], requires_grad=True)  # float32, stable
    >>> loss = loss_fn(logits, torch.tensor([1, 0, 0]))
    >>> loss.backward()
    >>> round(loss.item(), 4), [round(g, 4) for g in logits.grad.tolist()]
    (33.5644, [-0.1667, 0.3333, 0.0])
    """

    definition_type = xrisk.CrossEntropyLoss
    definition: xrisk.CrossEntropyLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.CrossEntropyLoss()
        super().__init__(definition, dtype=dtype, device=device)


class FocalLoss(XRiskLoss):
    """Focal loss of logits as a ``torch.nn.Module``; no state.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.FocalLoss(alpha=0.25, gamma=2.0)
    >>> loss = loss_fn(torch.tensor([0.0, 0.0]), torch.tensor([1, 0]))
    >>> round(loss.item(), 6)
    0.086643
    """

    definition_type = xrisk.FocalLoss
    definition: xrisk.FocalLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, alpha: float = 0.25, gamma: float = 2.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.FocalLoss(alpha=alpha, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class CompositionalAUCLoss(XRiskLoss):
    """Compositional AUC loss (k cross-entropy steps, then k AUC-M steps) as a
    ``torch.nn.Module``; a, b, alpha are ``nn.Parameter``\\ s, the call counter ``step`` an
    int32 buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.CompositionalAUCLoss(k=1, version="v2", dtype="float64")
    >>> with torch.no_grad():
    ...     _ = loss_fn.a.fill_(0.3), loss_fn.b.fill_(0.2), loss_fn.alpha.fill_(0.5)
    >>> scores = torch.tensor([0.1, 0.4, 0.35, 0.8], dtype=torch.float64)
    >>> labels = torch.tensor([0, 0, 1, 1])
    >>> ce, auc = loss_fn(scores, labels), loss_fn(scores, labels)  # step 0: BCE, 1: AUC-M
    >>> round(ce.item(), 5), round(auc.item(), 5), int(loss_fn.step)
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
    """Unimodal global contrastive loss (SogCLR; iSogCLR with individual temperatures) as
    a ``torch.nn.Module``; the shifted estimators ``u`` = [u~, c] (u = u~ exp(c)) and the
    individual temperatures ``temperature`` = [tau_i, momentum] live in buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.GlobalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0, dtype="float64")
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=torch.float64,
    ...                  requires_grad=True)
    >>> loss = loss_fn(x, x.flip(0), torch.tensor([0, 1, 3]))
    >>> loss.backward()
    >>> u = loss_fn.u[:, 0] * torch.exp(loss_fn.u[:, 1])  # u = u~ exp(c) of every sample
    >>> round(loss.item(), 4), u.round(decimals=4).tolist()
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
    """Bimodal (image-text) global contrastive loss as a ``torch.nn.Module``; one
    estimator table per direction, ``u_image`` and ``u_text`` (and ``temperature_image``,
    ``temperature_text`` with individual temperatures), in buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.BimodalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0, dtype="float64")
    >>> image = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=torch.float64,
    ...                      requires_grad=True)
    >>> text = torch.tensor([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    >>> loss = loss_fn(image, text, torch.tensor([0, 1, 3]))
    >>> loss.backward()
    >>> u = loss_fn.u_image[:, 0] * torch.exp(loss_fn.u_image[:, 1])  # image anchors
    >>> round(loss.item(), 4), u[:2].round(decimals=4).tolist()
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
    """In-batch InfoNCE (SimCLR, CLIP) as a ``torch.nn.Module``, the baseline of the
    global contrastive losses (no state).

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.InfoNCELoss(tau=0.5, dtype="float64")
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=torch.float64,
    ...                  requires_grad=True)
    >>> loss = loss_fn(x, x.flip(0))
    >>> loss.backward()
    >>> round(loss.item(), 4)
    1.5032
    """

    definition_type = xrisk.InfoNCELoss
    definition: xrisk.InfoNCELoss  # the type __init__ builds (typed methods)

    def __init__(self, *, tau: float = 0.1, within_view: bool = True, normalize: bool = True,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.InfoNCELoss(tau=tau, within_view=within_view, normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class EntLossClassification(XRiskLoss):
    """Compositional entropy loss for extreme classification (SCENT or SOX) as a
    ``torch.nn.Module``; the per-sample rows ``nu`` = [nu, seen] and the SOX weight
    ``smoothing`` are buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.EntLossClassification(num_samples=4, mode="SOX", dtype="float64")
    >>> logits = torch.tensor([[2.0, 0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    >>> labels = torch.tensor([1])
    >>> shifted = logits - logits.gather(1, labels[:, None])  # z_k - z_y
    >>> loss = loss_fn(shifted, torch.tensor([3]))
    >>> loss.backward()  # first visit: nu = log mean exp(z - z_y), so the gradient is CE's
    >>> logits.grad.round(decimals=4).tolist()  # softmax(logits) - onehot(label)
    [[0.6652, -0.91, 0.2447]]
    >>> loss_fn.adjust_gamma(5, 10)  # SOX's cosine schedule, from 1 down to gamma
    >>> round(loss_fn.smoothing.item(), 4)
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

    def adjust_gamma(self, epoch: int, num_epochs: int) -> None:
        """The core's :meth:`xrisk.EntLossClassification.adjust_gamma`, its new state written into
        this loss's state in place."""
        self._write_state(self.definition.adjust_gamma(self.state, epoch, num_epochs))


class MIDAM_softmax_pooling_loss(XRiskLoss):
    """Multi-instance AUC with softmax pooling (MIDAM) as a ``torch.nn.Module``; the bag
    estimators ``s`` and the current weight ``smoothing`` are buffers, a, b, alpha
    ``nn.Parameter``\\ s. Train with :class:`xrisk.torch.MIDAM`.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.MIDAM_softmax_pooling_loss(num_samples=3, tau=1.0, gamma=1.0, dtype="float64")
    >>> scores = torch.tensor([[1.0, 3.0], [1.0, 1.0]], dtype=torch.float64).log()
    >>> scores = scores.requires_grad_()  # instance scores of two bags, two instances each
    >>> loss = loss_fn(scores, torch.tensor([1, 0]), torch.tensor([0, 2]))
    >>> loss.backward()
    >>> round(loss.item(), 4)  # log(2)^2: a = b = alpha = 0, h = log mean exp(scores)
    0.4805
    >>> loss_fn.update_smoothing(2)  # gamma / 2, a buffer: saved and loaded with the state
    >>> loss_fn.smoothing.item()
    0.5
    """

    definition_type = xrisk.MIDAM_softmax_pooling_loss
    definition: xrisk.MIDAM_softmax_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, tau: float = 0.1,
                 gamma: float = 0.9, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_softmax_pooling_loss(num_samples, margin=margin, tau=tau,
                                                      gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, decay_factor: float) -> None:
        """The core's :meth:`xrisk.MIDAM_softmax_pooling_loss.update_smoothing`, its new state
        written into this loss's state in place."""
        self._write_state(self.definition.update_smoothing(self.state, decay_factor))


class MIDAM_attention_pooling_loss(XRiskLoss):
    """Multi-instance AUC with attention pooling (MIDAM) as a ``torch.nn.Module``; the bag
    estimators ``s`` and the current weight ``smoothing`` are buffers, a, b, alpha
    ``nn.Parameter``\\ s. Train with :class:`xrisk.torch.MIDAM`.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.MIDAM_attention_pooling_loss(num_samples=2, gamma=1.0, dtype="float64")
    >>> scores = torch.tensor([[2.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    >>> attention = torch.tensor([[1.0, 1.0], [3.0, 1.0]], dtype=torch.float64).log()
    >>> loss = loss_fn(scores, attention, torch.tensor([1, 0]), torch.tensor([0, 1]))
    >>> (loss_fn.s[:, 0] / loss_fn.s[:, 1]).round(decimals=4).tolist()  # weighted means
    [1.0, -0.5]
    """

    definition_type = xrisk.MIDAM_attention_pooling_loss
    definition: xrisk.MIDAM_attention_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, gamma: float = 0.9,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_attention_pooling_loss(num_samples, margin=margin, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, decay_factor: float) -> None:
        """The core's :meth:`xrisk.MIDAM_attention_pooling_loss.update_smoothing`, its new state
        written into this loss's state in place."""
        self._write_state(self.definition.update_smoothing(self.state, decay_factor))


class MultiLabelAUCMLoss(XRiskLoss):
    """Multi-label AUC-margin loss as a ``torch.nn.Module``; a, b, alpha are
    ``nn.Parameter``\\ s of shape (num_labels,), trained with :class:`xrisk.torch.PESG`.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.MultiLabelAUCMLoss(2, version="v2", dtype="float64")
    >>> with torch.no_grad():
    ...     _ = loss_fn.a.fill_(0.3), loss_fn.b.fill_(0.2), loss_fn.alpha.fill_(0.5)
    >>> scores = torch.tensor([[0.1, 0.9], [0.4, 0.2], [0.35, 0.6], [0.8, 0.3]],
    ...                       dtype=torch.float64)
    >>> nan = float("nan")  # a missing label
    >>> labels = torch.tensor([[0, 1], [0, 0], [1, nan], [1, 0]], dtype=torch.float64)
    >>> round(loss_fn(scores, labels).item(), 5), tuple(loss_fn.alpha.shape)
    (0.52063, (2,))
    """

    definition_type = xrisk.MultiLabelAUCMLoss
    definition: xrisk.MultiLabelAUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MultiLabelAUCMLoss(num_labels, margin=margin, version=version,
                                              imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class meanAveragePrecisionLoss(XRiskLoss):
    """Mean average precision (SOAP per label) as a ``torch.nn.Module``; the (label, sample)
    table ``u`` is a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.meanAveragePrecisionLoss(2, num_samples=4, dtype="float64")
    >>> scores = torch.tensor([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]],
    ...                       dtype=torch.float64, requires_grad=True)
    >>> labels = torch.tensor([[1, 0], [0, 1], [1, float("nan")], [0, 1]], dtype=torch.float64)
    >>> loss = loss_fn(scores, labels, torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> loss_fn.u.reshape(2, 4, 2)[0, :, 0].round(decimals=4).tolist()  # label 0's u_all
    [0.4118, 0.0, 0.8303, 0.0]
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
    """Multi-label partial AUC (every mode of ``pAUCLoss``, STACO included) as a
    ``torch.nn.Module``; every label's state rows are buffers of their own.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.MultiLabelpAUCLoss(2, num_samples=4, mode="STACO", margin=1.0,
    ...                                 dtype="float64")
    >>> scores = torch.tensor([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]],
    ...                       dtype=torch.float64, requires_grad=True)
    >>> labels = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> task = torch.tensor([0, 0, 0, 0])  # a TriSampler batch of task 0 only
    >>> loss = loss_fn(scores, labels, torch.tensor([0, 1, 2, 3]), task)
    >>> loss.backward()
    >>> round(loss.item(), 4), loss_fn.s2.tolist()  # label 1 is not in the batch
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
    """One-way partial AUC by CVaR (SOPA) as a ``torch.nn.Module``; the per-sample
    ``threshold`` is a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.pAUC_CVaR_Loss(num_samples=4, beta=0.5, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> round(loss.item(), 4), loss_fn.threshold.round(decimals=4).tolist()
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
    """One-way partial AUC by KL-DRO (SOPAs) as a ``torch.nn.Module``; the shifted
    estimators ``u`` = [u~, c] (u = u~ exp(c)) are a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.pAUC_DRO_Loss(num_samples=4, gamma=1.0, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> u = loss_fn.u[:, 0] * torch.exp(loss_fn.u[:, 1])  # mean_j exp(l_ij) of positives 0, 2
    >>> round(loss.item(), 4), u.round(decimals=4).tolist()
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
    """Two-way partial AUC by KL-DRO (SOTAs) as a ``torch.nn.Module``; the shifted
    estimators ``u`` (per sample) and ``w`` (global) are buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.tpAUC_KL_Loss(num_samples=4, tau=0.5, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> round(loss.item(), 4), round((loss_fn.w[0] * torch.exp(loss_fn.w[1])).item(), 4)
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
    """Two-way partial AUC by double CVaR (STACO) as a ``torch.nn.Module``; the rows
    ``u`` = [u, s1, dual] and the scalar ``s2`` are buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.tpAUC_CVaR_Loss(num_samples=4, margin=1.0, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> round(loss.item(), 4), loss_fn.u[0].round(decimals=4).tolist(), loss_fn.s2.item()
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
    """Listwise cross-entropy (the warm-up of SONG) as a ``torch.nn.Module``; the rows
    ``u`` = [u~, log-shift] per interaction are a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.ListwiseCELoss(num_interactions=5, gamma=1.0, dtype="float64")
    >>> scores = torch.tensor([[2.0, 0.5, 1.0], [1.0, 0.0, 3.0]], dtype=torch.float64,
    ...                       requires_grad=True)  # per query: 1 positive, 2 negatives
    >>> loss = loss_fn(scores, torch.tensor([[0], [3]]))
    >>> loss.backward()
    >>> round(loss.item(), 4), (loss_fn.u[:, 0] * torch.exp(loss_fn.u[:, 1]))[3].item() > 3
    (0.669, True)
    """

    definition_type = xrisk.ListwiseCELoss
    definition: xrisk.ListwiseCELoss  # the type __init__ builds (typed methods)

    def __init__(self, num_interactions: int, *, gamma: float = 0.9, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.ListwiseCELoss(num_interactions, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class NDCGLoss(XRiskLoss):
    """NDCG (SONG) or top-K NDCG (K-SONG, ``top_k=K``) as a ``torch.nn.Module``; ``u`` per
    interaction and ``lambda_q``, ``s_q`` per query are buffers.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.NDCGLoss(num_interactions=4, num_queries=2, num_items=10, dtype="float64")
    >>> scores = torch.tensor([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]], dtype=torch.float64,
    ...                       requires_grad=True)  # per query: 2 positives, 1 negative
    >>> loss = loss_fn(scores, relevance=torch.tensor([[3.0, 1.0], [2.0, 2.0]]),
    ...                query=torch.tensor([0, 1]), interaction=torch.tensor([[0, 1], [2, 3]]),
    ...                num_relevant=torch.tensor([2.0, 2.0]),
    ...                ideal_dcg=torch.tensor([7.63, 4.89]))
    >>> loss.backward()
    >>> round(loss.item(), 4), loss_fn.u.round(decimals=4).tolist()
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
    >>> import xrisk.torch as xr
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
    >>> import xrisk.torch as xr
    >>> loss_fn = xr.MIDAMLoss("softmax", num_samples=100, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau
    ('MIDAM_softmax_pooling_loss', 0.5)
    """
    return ADAPTED[midam_class(mode)](**kwargs)
