"""xrisk for PyTorch: ``nn.Module`` losses and ``torch.optim.Optimizer`` subclasses.

>>> import torch
>>> import xrisk.torch as xr
>>> model = torch.nn.Linear(30, 1)
>>> loss_fn = xr.APLoss(num_samples=100)                   # one state row per sample
>>> optimizer = xr.SOAP(model.parameters(), learning_rate=1e-3)
>>> scores = torch.sigmoid(model(torch.randn(8, 30)))[:, 0]
>>> loss = loss_fn(scores, torch.tensor([1.0, 0.0] * 4), torch.arange(8))  # rows 0..7
>>> optimizer.zero_grad(); loss.backward(); optimizer.step()
>>> bool(torch.isfinite(loss))
True

Porting to JAX or TensorFlow changes only the import: ``xrisk.jax`` and ``xrisk.tensorflow``
export the same names with the same constructor signatures. PyTorch Lightning support (a
callback for DDP, stage-wise decay and the sampler's position in checkpoints) is the
submodule ``xrisk.torch.lightning``, imported on its own so that this package does not
import Lightning.
"""

from . import data as _data
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__]
