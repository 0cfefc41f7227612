"""xrisk for JAX: pure ``init``/``apply`` losses and optax optimizers.

>>> import xrisk.jax as xr                                         # doctest: +SKIP
>>> loss_fn = xr.APLoss(num_samples=len(dataset))                  # doctest: +SKIP
>>> state = loss_fn.init()                                         # doctest: +SKIP
>>> optimizer = xr.SOAP(params, lr=1e-3)                           # doctest: +SKIP

Same class names and constructor signatures as ``xrisk.torch`` and ``xrisk.tensorflow``.
"""

from . import data as _data
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__]
