"""SimCLR views of a TensorFlow batch (B, H, W, 3): :mod:`xrisk.datasets.views` as graph ops
on the whole batch, usable in a ``tf.data`` map over batches and in ``tf.function``.

The crop boxes and jitter factors are a pure function of ``(seed, epoch, index, view)``,
drawn by the core in numpy (``tf.numpy_function``): the same key gives the same views as the
torch and JAX adapters, in any batch and after a restart (TensorFlow's own stateless random
ops would be reproducible too, but not equal to the other frameworks' draws). The draw is a
``tf.numpy_function`` (a few microseconds per image, under the GIL), so a graph holding it
cannot be saved into a SavedModel or sent to the tf.data service; the transform itself is
plain TensorFlow ops. ``namespace`` is the array-API subset the core's transform needs.

>>> import numpy as np
>>> import tensorflow as tf
>>> from xrisk.tensorflow.views import simclr_views
>>> images = np.random.default_rng(0).uniform(size=(10, 32, 32, 3)).astype(np.float32)
>>> data = tf.data.Dataset.from_tensor_slices((images, np.arange(10))).batch(4)
>>> pairs = data.map(lambda x, i: (simclr_views(x, i, seed=0, view=0),
...                                simclr_views(x, i, seed=0, view=1), i))
>>> [tuple(a.shape) for a, _, _ in pairs]
[(4, 32, 32, 3), (4, 32, 32, 3), (2, 32, 32, 3)]
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import tensorflow as tf

from xrisk.datasets.views import (
    SimCLRAugment,
    apply_simclr_views,
    check_rgb_batch,
    simclr_view_params,
)

__all__ = ["namespace", "simclr_views"]

namespace = SimpleNamespace(
    astype=lambda x, dtype: tf.cast(x, dtype),
    arange=lambda stop: tf.range(stop),
    where=lambda condition, x1, x2: tf.where(condition, x1, x2),
    clip=lambda x, low, high: tf.clip_by_value(
        x, tf.cast(low, x.dtype), tf.cast(high, x.dtype)),
    floor=tf.math.floor,
    zeros_like=tf.zeros_like,
    ones_like=tf.ones_like,
    max=lambda x, axis: tf.reduce_max(x, axis=axis),
    min=lambda x, axis: tf.reduce_min(x, axis=axis),
    mean=lambda x, axis: tf.reduce_mean(x, axis=axis),
    remainder=lambda x, y: tf.math.floormod(x, tf.cast(y, x.dtype)),
    stack=lambda arrays, axis: tf.stack(arrays, axis=axis),
    permute_dims=lambda x, axes: tf.transpose(x, axes),
    matmul=tf.linalg.matmul,
)

_KEYS = ("box", "flip", "jitter", "factors", "order", "gray")


def simclr_views(images: Any, index: Any, *, seed: int, epoch: Any = 0, view: int = 0,
                 augment: SimCLRAugment | None = None) -> tf.Tensor:
    """One SimCLR view of each image.

    Parameters
    ----------
    images : tf.Tensor or array_like, shape (B, H, W, 3), floating, values in [0, 1]
        H and W must be known when traced (a batch dimension of None is fine).
    index : tf.Tensor or array_like of int, shape (B,)
        The images' dataset indices (the views are keyed by them).
    seed, view : int
    epoch : int or scalar int tf.Tensor
    augment : xrisk.datasets.views.SimCLRAugment, optional

    Returns
    -------
    tf.Tensor, shape (B, height, width, 3), the images' dtype
    """
    owner = "xrisk.tensorflow.views.simclr_views"
    x = tf.convert_to_tensor(images)
    if not x.dtype.is_floating:
        raise TypeError(f"{owner}: images of dtype {x.dtype.name}; expected floating values "
                        "in [0, 1]. Fix: tf.cast(images, tf.float32) / 255 for uint8 images.")
    height, width = x.shape[1:3] if x.shape.rank == 4 else (None, None)
    if height is None or width is None:
        raise ValueError(f"{owner}: images of shape {x.shape}; expected (batch, height, "
                         "width, 3) with height and width known. Fix: resize the images to "
                         "one size before batching.")
    index_t = tf.convert_to_tensor(index)
    check_rgb_batch(owner, x, index_t)
    config = augment or SimCLRAugment()

    def draw(index_np: np.ndarray, epoch_np: np.ndarray) -> list[np.ndarray]:
        params = simclr_view_params(index_np, height, width, seed=seed, epoch=int(epoch_np),
                                    view=view, augment=config)
        return [params[key].astype(x.dtype.as_numpy_dtype) for key in _KEYS]

    drawn = tf.numpy_function(draw, [index_t, tf.cast(epoch, tf.int64)],
                              [x.dtype] * len(_KEYS), stateful=False)
    params = {}
    for key, value in zip(_KEYS, drawn, strict=True):
        value.set_shape([None, 4] if key in ("box", "factors", "order") else [None])
        params[key] = value
    return apply_simclr_views(namespace, x, params, config.size or (height, width))
