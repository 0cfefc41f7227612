"""xrisk for JAX: pure ``init``/``apply`` losses and optax optimizers.

>>> import jax, jax.numpy as jnp, optax
>>> import xrisk.jax as xr
>>> loss_fn = xr.APLoss(num_samples=100)                   # one state row per sample
>>> state = loss_fn.init()
>>> params = jnp.zeros(30)
>>> optimizer = xr.SOAP(learning_rate=1e-3)                # an optax transformation
>>> opt_state = optimizer.init(params)
>>> x = jax.random.normal(jax.random.key(0), (8, 30))
>>> y, index = jnp.array([1.0, 0.0] * 4), jnp.arange(8)   # rows 0..7
>>> def objective(params, state):
...     return loss_fn.apply(state, jax.nn.sigmoid(x @ params), y, index)
>>> (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(params, state)
>>> updates, opt_state = optimizer.update(grads, opt_state, params)
>>> params = optax.apply_updates(params, updates)
>>> bool(jnp.isfinite(loss))
True

Same class names and constructor signatures as ``xrisk.torch`` and ``xrisk.tensorflow``.
"""

from . import data as _data
from . import losses as _losses
from . import optim as _optim
from .data import *  # noqa: F403  (samplers and the index-returning dataset)
from .losses import *  # noqa: F403  (one class per entry of xrisk.LOSSES)
from .optim import *  # noqa: F403  (one class per entry of xrisk.OPTIMIZERS)

__all__ = [*_losses.__all__, *_optim.__all__, *_data.__all__]
