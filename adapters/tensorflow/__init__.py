"""xrisk for TensorFlow: ``tf.Module`` losses and optimizers for ``GradientTape`` loops.

>>> import xrisk.tensorflow as xr                                  # doctest: +SKIP
>>> loss_fn = xr.APLoss(num_samples=len(x_train))                  # doctest: +SKIP
>>> optimizer = xr.SOAP(model.trainable_variables, lr=1e-3)        # doctest: +SKIP

Same class names and constructor signatures as ``xrisk.torch`` and ``xrisk.jax``.
"""

from xrisk.backends import get_backend

from . import data as _data
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

# Load the TensorFlow backend now: loaded lazily inside a first tf.function call, AutoGraph
# would try (and warn about failing) to convert the import machinery.
get_backend("tensorflow")

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__]
