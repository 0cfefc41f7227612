"""xrisk for PyTorch: ``nn.Module`` losses and ``torch.optim.Optimizer`` subclasses.

>>> import xrisk.torch as xr                                       # doctest: +SKIP
>>> loss_fn = xr.APLoss(num_samples=len(dataset))                  # doctest: +SKIP
>>> optimizer = xr.SOAP(model.parameters(), lr=1e-3)               # doctest: +SKIP

Porting to JAX or TensorFlow changes only the import: ``xrisk.jax`` and ``xrisk.tensorflow``
export the same names with the same constructor signatures.
"""

from . import data as _data
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__]
