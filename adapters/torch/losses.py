"""PyTorch losses: one ``nn.Module`` per core loss definition.

State lives in registered buffers and trainable auxiliaries (AUC-M's a, b, α) in
``nn.Parameter``\\ s, so ``state_dict()``, ``load_state_dict()``, ``.to(device)`` and DDP see
them. A call runs the core's pure ``apply``; the torch backend writes the new rows into the
buffers in place (O(batch)). Each class below only fixes its constructor signature and its
examples: :class:`XRiskLoss` reads everything else from the core definition's declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import numpy as np
import torch
from torch import nn

import xrisk
from xrisk import LossDefinition
from xrisk._adapter_support import (
    LossContainer,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    refuse_assignment,
)
from xrisk._libauc_names import guard_init
from xrisk.losses.pauc import pauc_class_name

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", *xrisk.LOSSES, "pAUCLoss"]

DType: TypeAlias = str | torch.dtype | None
Device: TypeAlias = str | torch.device | None


class XRiskLoss(LossContainer, nn.Module):
    """Base of the torch losses: a core definition with its state in buffers.

    Call it with the inputs the definition declares (e.g. ``loss_fn(scores, labels, index)``),
    positionally or by name; the state rows of the batch are updated in place.
    """

    definition_type: ClassVar[type[LossDefinition]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "definition_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.definition_type)
        if "__init__" in cls.__dict__:  # LibAUC names (data_len=, surr_loss=, ...) name ours
            cls.__init__ = guard_init(cls.__init__)  # type: ignore[method-assign]

    def __init__(self, definition: LossDefinition, *, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__()
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
        loss, new_state = self.definition.apply(
            self.state, *inputs, params=self.aux_params, **named
        )
        for name, value in zip(new_state._fields, new_state, strict=True):
            buffer = getattr(self, name)
            if value is not buffer:  # the torch backend writes in place; keep that contract
                with torch.no_grad():
                    buffer.copy_(value)
        return loss

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral).

        Each array is a copy in its entry's dtype, except bfloat16 (after ``.bfloat16()``),
        which numpy lacks: it is exported as float32, exactly.
        """
        backend = xrisk.backends.get_backend("torch")
        return {name: np.array(backend.to_numpy(getattr(self, name)), copy=True)
                for name in self.definition.state_shapes()}

    def load_state(self, arrays: Mapping[str, Any]) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error.

        Every entry is checked first (keys, shapes, finite real values, auxiliary bounds;
        see :func:`xrisk._adapter_support.checked_state_arrays`); a float export of more
        precision than the loss is rounded with a :class:`xrisk.StateCastWarning`.
        """
        targets = {name: getattr(self, name) for name in self.definition.state_shapes()}
        checked = checked_state_arrays(
            self.definition, arrays,
            {name: str(t.dtype).rpartition(".")[2] for name, t in targets.items()})
        # Convert everything before the first copy, so a failure changes nothing.
        tensors = {name: torch.from_numpy(value).to(device=targets[name].device,
                                                    dtype=targets[name].dtype)
                   for name, value in checked.items()}
        with torch.no_grad():
            for name, tensor in tensors.items():
                targets[name].copy_(tensor)

    def extra_repr(self) -> str:
        return repr(self.definition)


def _namespace() -> Any:
    return xrisk.backends.get_backend("torch").namespace


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

    def __init__(self, num_samples: int, *, gamma: float = 0.9, margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.APLoss(num_samples, gamma=gamma, margin=margin,
                                      surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


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

    def __init__(self, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio),
                         dtype=dtype, device=device)


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

    def __init__(self, *, surrogate: str = "logistic", margin: float = 1.0, scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        super().__init__(xrisk.PairwiseAUCLoss(surrogate=surrogate, margin=margin, scale=scale),
                         dtype=dtype, device=device)


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

    def __init__(self, *, dtype: DType = None, device: Device = None) -> None:
        super().__init__(xrisk.CrossEntropyLoss(), dtype=dtype, device=device)


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

    def __init__(self, *, alpha: float = 0.25, gamma: float = 2.0, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.FocalLoss(alpha=alpha, gamma=gamma), dtype=dtype, device=device)


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

    def __init__(self, *, k: int = 1, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.CompositionalAUCLoss(k=k, margin=margin, version=version,
                                                    imratio=imratio),
                         dtype=dtype, device=device)


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

    def __init__(self, num_samples: int, *, beta: float = 0.2, eta: float = 0.1,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        super().__init__(xrisk.pAUC_CVaR_Loss(num_samples, beta=beta, eta=eta, margin=margin,
                                              surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


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

    def __init__(self, num_samples: int, *, gamma: float = 0.9, lam: float = 1.0,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        super().__init__(xrisk.pAUC_DRO_Loss(num_samples, gamma=gamma, lam=lam, margin=margin,
                                             surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


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

    def __init__(self, num_samples: int, *, tau: float = 1.0, lam: float = 1.0,
                 gammas: tuple[float, float] = (0.9, 0.9), margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.tpAUC_KL_Loss(num_samples, tau=tau, lam=lam, gammas=gammas,
                                             margin=margin, surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


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

    def __init__(self, num_samples: int, *, margin: float = 0.5, alpha: float = 0.1,
                 beta_0: float = 0.1, beta_1: float = 0.1, theta_0: float = 0.5,
                 theta_1: float = 0.5, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        super().__init__(xrisk.tpAUC_CVaR_Loss(num_samples, margin=margin, alpha=alpha,
                                               beta_0=beta_0, beta_1=beta_1, theta_0=theta_0,
                                               theta_1=theta_1, surrogate=surrogate,
                                               scale=scale),
                         dtype=dtype, device=device)


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
    return globals()[pauc_class_name(mode)](**kwargs)
