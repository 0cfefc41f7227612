"""xrisk for TensorFlow: ``tf.Module`` losses and optimizers for ``GradientTape`` loops.

>>> import tensorflow as tf
>>> import xrisk.tensorflow as xr
>>> w = tf.Variable(tf.zeros([30]))
>>> loss_fn = xr.APLoss(num_samples=100)                   # one state row per sample
>>> optimizer = xr.SOAP([w], learning_rate=1e-3)
>>> x = tf.random.normal([8, 30])
>>> with tf.GradientTape() as tape:
...     loss = loss_fn(tf.sigmoid(tf.linalg.matvec(x, w)), tf.constant([1.0, 0.0] * 4),
...                    tf.range(8))                          # rows 0..7
>>> _ = optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
>>> bool(tf.math.is_finite(loss))
True

Same class names and constructor signatures as ``xrisk.torch`` and ``xrisk.jax``.
"""

from xrisk.backends import get_backend

from . import data as _data
from . import keras as _keras
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .keras import *  # noqa: F403  (KerasLoss, fit_dataset, the epoch callbacks)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

# Load the TensorFlow backend now: loaded lazily inside a first tf.function call, AutoGraph
# would try (and warn about failing) to convert the import machinery.
get_backend("tensorflow")

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__, *_keras.__all__]
