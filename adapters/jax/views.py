"""SimCLR views of a JAX batch (B, H, W, 3): :mod:`xrisk.datasets.views` as one ``jax.jit``
compiled transform of the whole batch.

The crop boxes and jitter factors are drawn on the host in numpy from ``(seed, epoch, index,
view)`` (not with ``jax.random``), so they equal the torch and TensorFlow adapters' for the
same key; they enter the compiled transform as arrays, so new draws do not recompile. The
transform is written for the whole batch (batched matrix products), which is what ``vmap``
would make of a per-image version.

>>> import numpy as np
>>> from xrisk.jax.views import simclr_views
>>> images = np.random.default_rng(0).uniform(size=(8, 32, 32, 3)).astype(np.float32)
>>> first = simclr_views(images, np.arange(8), seed=0, view=0)
>>> first.shape, first.dtype
((8, 32, 32, 3), dtype('float32'))

Inside a jitted step, draw the parameters outside and pass them in:

>>> import jax
>>> from xrisk.datasets.views import simclr_view_params
>>> from xrisk.jax.views import apply_views
>>> params = simclr_view_params(np.arange(8), 32, 32, seed=0, view=1)
>>> @jax.jit
... def step(images, params):
...     return apply_views(images, params, size=(24, 24)).mean()
>>> bool(np.isfinite(step(images, {k: v.astype(np.float32) for k, v in params.items()})))
True
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xrisk.datasets.views import (
    SimCLRAugment,
    apply_simclr_views,
    check_rgb_batch,
    simclr_view_params,
)

__all__ = ["apply_views", "simclr_views"]


def apply_views(images: Any, params: dict[str, Any], *, size: tuple[int, int]) -> jax.Array:
    """:func:`xrisk.datasets.views.apply_simclr_views` on ``jax.numpy`` arrays (traceable:
    call it inside ``jax.jit``; ``size`` must be static)."""
    return apply_simclr_views(jnp, jnp.asarray(images), params, size)


@functools.partial(jax.jit, static_argnames="size")
def _compiled(images: jax.Array, params: dict[str, jax.Array], size: tuple[int, int]
              ) -> jax.Array:
    return apply_simclr_views(jnp, images, params, size)


def simclr_views(images: Any, index: Any, *, seed: int, epoch: int = 0, view: int = 0,
                 augment: SimCLRAugment | None = None) -> jax.Array:
    """One SimCLR view of each image.

    Parameters
    ----------
    images : array_like, shape (B, H, W, 3), floating, values in [0, 1]
    index : array_like of int, shape (B,)
        The images' dataset indices (the views are keyed by them).
    seed, epoch, view : int
    augment : xrisk.datasets.views.SimCLRAugment, optional

    Returns
    -------
    jax.Array, shape (B, height, width, 3), the images' dtype
    """
    owner = "xrisk.jax.views.simclr_views"
    x = jnp.asarray(check_rgb_batch(owner, images, np.asarray(index)))
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{owner}: images of dtype {x.dtype}; expected floating values in "
                        "[0, 1]. Fix: images.astype(np.float32) / 255 for uint8 images.")
    config = augment or SimCLRAugment()
    params = simclr_view_params(np.asarray(index), x.shape[1], x.shape[2], seed=seed,
                                epoch=epoch, view=view, augment=config)
    return _compiled(x, {k: jnp.asarray(v, dtype=x.dtype) for k, v in params.items()},
                     config.size or (x.shape[1], x.shape[2]))
