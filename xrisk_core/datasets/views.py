"""SimCLR's view pipeline for RGB images, one algorithm for every framework.

A view of an image (Chen et al., 2020, appendix A; torchvision's transforms) is, in order:

1. a random resized crop: a box of ``scale`` x the image's area and aspect ratio in ``ratio``
   (log-uniform), ten tries, else the central crop of the closest ratio; resized bilinearly
   (half-pixel centres, like ``torch.nn.functional.interpolate(align_corners=False)``, without
   antialiasing) to ``size``;
2. a horizontal flip with probability ``flip``;
3. with probability ``jitter``, colour jitter in a random order: brightness, contrast and
   saturation factors ``U(1 - s, 1 + s)``, a hue shift ``U(-h, h)`` (of a full turn);
4. grayscale with probability ``grayscale``.

The random numbers are drawn here, in numpy, by :func:`simclr_view_params`, as a pure function
of ``(seed, epoch, index, view)`` per image: the same example gets the same view whatever batch
it is in, a resumed run sees the same views, and the three frameworks see the *same* crop boxes
and factors. :func:`apply_simclr_views` applies them to a whole batch with array-API operations
only (no loop over images; the crop and resize is two batched matrix products), so each
adapter (``xrisk.torch.views``, ``xrisk.tensorflow.views``, ``xrisk.jax.views``) runs this
code on its own arrays, under ``jax.jit`` or in a ``tf.data`` map.

>>> import numpy as np
>>> from xrisk.datasets.views import SimCLRAugment, simclr_views
>>> images = np.random.default_rng(0).uniform(size=(4, 32, 32, 3))
>>> first = simclr_views(images, np.arange(4), seed=0, view=0)
>>> second = simclr_views(images, np.arange(4), seed=0, view=1)
>>> first.shape, bool(np.allclose(first, second))
((4, 32, 32, 3), False)
>>> again = simclr_views(images[2:], np.arange(2, 4), seed=0, view=0)  # other batch, same views
>>> bool(np.array_equal(again, first[2:]))
True
>>> simclr_views(images, np.arange(4), seed=0, augment=SimCLRAugment(size=(16, 16))).shape
(4, 16, 16, 3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._arguments import check_count
from .._inputs import class_labels
from ..samplers._base import check_seed

__all__ = ["GRAY_WEIGHTS", "SimCLRAugment", "apply_simclr_views", "simclr_view_params",
           "simclr_views"]

#: ITU-R 601 luma weights, as torchvision's ``rgb_to_grayscale``.
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)
_TRIES = 10  # torchvision's RandomResizedCrop tries ten boxes before the central crop
# Draw numbers per image: 2 per try, 2 offsets, flip, jitter, 4 factors, 4 order keys, gray.
_DRAWS = 2 * _TRIES + 2 + 1 + 1 + 4 + 4 + 1


@dataclass(frozen=True)
class SimCLRAugment:
    """The view pipeline's settings; defaults are SimCLR's CIFAR-10 ones (colour strength
    0.5: jitter 0.4/0.4/0.4/0.1 with probability 0.8, grayscale 0.2, crop scale (0.08, 1)).

    ``size``: the views' (height, width); ``None`` keeps the images' size.
    """

    size: tuple[int, int] | None = None
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip: float = 0.5
    jitter: float = 0.8
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.1
    grayscale: float = 0.2

    def __post_init__(self) -> None:
        def refuse(field: str, value: object, expected: str, fix: str) -> None:
            raise ValueError(f"SimCLRAugment: {field}={value!r}; expected {expected}. "
                             f"Fix: {fix}.")

        # lists (from YAML or JSON) become tuples: the size is a static argument of jax.jit
        for field in ("size", "scale", "ratio"):
            value = getattr(self, field)
            if isinstance(value, list):
                object.__setattr__(self, field, tuple(value))
        if self.size is not None and (
                len(self.size) != 2 or any(isinstance(s, bool) or not isinstance(s, int)
                                           or s < 1 for s in self.size)):
            refuse("size", self.size, "None or (height, width) of positive ints",
                   "pass e.g. size=(32, 32)")
        for field, low, high in (("scale", 0.0, 1.0), ("ratio", 0.0, math.inf)):
            pair = getattr(self, field)
            if len(pair) != 2 or not low < pair[0] <= pair[1] <= high:
                refuse(field, pair, f"(low, high) with {low} < low <= high <= {high}",
                       f"pass e.g. {field}={getattr(SimCLRAugment, field)}")
        for field in ("flip", "jitter", "grayscale"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                refuse(field, getattr(self, field), "a probability in [0, 1]",
                       f"pass e.g. {field}=0.5")
        for field in ("brightness", "contrast", "saturation"):
            if not 0.0 <= getattr(self, field):
                refuse(field, getattr(self, field), "a strength >= 0 (factors U(1-s, 1+s))",
                       f"pass e.g. {field}=0.4")
        if not 0.0 <= self.hue <= 0.5:
            refuse("hue", self.hue, "a shift in [0, 0.5] of a full turn", "pass e.g. hue=0.1")


# -- the random numbers (numpy, counter-based: a pure function of the key) -------------------

_GOLDEN, _MIX1, _MIX2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                         np.uint64(0x94D049BB133111EB))


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective hash of uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
        return x ^ (x >> np.uint64(31))


def _uniforms(seed: int, epoch: int, index: np.ndarray, view: int) -> np.ndarray:
    """(B, _DRAWS) uniforms in [0, 1) of each image, hashed from (seed, epoch, index, view)."""
    key = _mix(np.full(index.shape, seed, dtype=np.uint64))
    for part in (np.uint64(epoch), index.astype(np.uint64), np.uint64(view)):
        key = _mix(key ^ part)
    bits = _mix(key[:, None] ^ (np.arange(_DRAWS, dtype=np.uint64)[None, :] << np.uint64(40)))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def simclr_view_params(index: Any, height: int, width: int, *, seed: int, epoch: int = 0,
                       view: int = 0, augment: SimCLRAugment | None = None
                       ) -> dict[str, np.ndarray]:
    """The random choices of one view of each image of a batch, as float64 arrays.

    Parameters
    ----------
    index : array_like of int, shape (B,)
        Dataset indices of the batch's images (the views are keyed by them).
    height, width : int
        The images' size.
    seed, epoch, view : int
        Two views of a contrastive pair differ in ``view`` (0 and 1).
    augment : SimCLRAugment, optional

    Returns
    -------
    dict of numpy.ndarray
        ``box`` (B, 4): top, left, height, width of the crop (whole pixels); ``flip`` (B,);
        ``jitter`` (B,): 1 where colour jitter applies; ``factors`` (B, 4): brightness,
        contrast, saturation factors and the hue shift; ``order`` (B, 4): the jitter's
        operations (0-3 in that order) by position; ``gray`` (B,).
    """
    owner = "simclr_view_params"
    config = augment or SimCLRAugment()
    idx = class_labels(owner, index, name="index")
    height = check_count(owner, "height", height)
    width = check_count(owner, "width", width)
    u = _uniforms(check_seed(owner, seed), check_count(owner, "epoch", epoch, minimum=0), idx,
                  check_count(owner, "view", view, minimum=0))

    # random resized crop: torchvision's tries, vectorised over images and tries
    area = height * width
    target = area * (config.scale[0] + (config.scale[1] - config.scale[0]) * u[:, 0:_TRIES])
    log_low, log_high = math.log(config.ratio[0]), math.log(config.ratio[1])
    aspect = np.exp(log_low + (log_high - log_low) * u[:, _TRIES:2 * _TRIES])
    box_w = np.round(np.sqrt(target * aspect))
    box_h = np.round(np.sqrt(target / aspect))
    fits = (box_w > 0) & (box_w <= width) & (box_h > 0) & (box_h <= height)
    first = np.argmax(fits, axis=1)
    found = fits[np.arange(idx.size), first]
    chosen_h, chosen_w = box_h[np.arange(idx.size), first], box_w[np.arange(idx.size), first]
    # the fallback: the central crop of the ratio closest to the image's
    in_ratio = width / height
    if in_ratio < config.ratio[0]:
        central = (round(width / config.ratio[0]), width)
    elif in_ratio > config.ratio[1]:
        central = (height, round(height * config.ratio[1]))
    else:
        central = (height, width)
    h = np.where(found, chosen_h, central[0])
    w = np.where(found, chosen_w, central[1])
    top = np.where(found, np.floor(u[:, 2 * _TRIES] * (height - h + 1)), (height - h) // 2)
    left = np.where(found, np.floor(u[:, 2 * _TRIES + 1] * (width - w + 1)), (width - w) // 2)

    k = 2 * _TRIES + 2
    low = [max(0.0, 1.0 - s) for s in (config.brightness, config.contrast, config.saturation)]
    high = [1.0 + s for s in (config.brightness, config.contrast, config.saturation)]
    factors = np.stack([low[i] + (high[i] - low[i]) * u[:, k + 2 + i] for i in range(3)]
                       + [config.hue * (2.0 * u[:, k + 5] - 1.0)], axis=1)
    return {
        "box": np.stack([top, left, h, w], axis=1).astype(np.float64),
        "flip": (u[:, k] < config.flip).astype(np.float64),
        "jitter": (u[:, k + 1] < config.jitter).astype(np.float64),
        "factors": factors,
        "order": np.argsort(u[:, k + 6:k + 10], axis=1).astype(np.float64),
        "gray": (u[:, k + 10] < config.grayscale).astype(np.float64),
    }


# -- the transform (array API: numpy, torch, jax.numpy, or the TensorFlow adapter's shim) ----

def _resize_matrix(xp: Any, start: Any, length: Any, size_in: int, size_out: int,
                   flip: Any, dtype: Any) -> Any:
    """(B, size_out, size_in) bilinear weights that read ``[start, start + length)`` of each
    image onto ``size_out`` pixels (half-pixel centres, edges clamped), mirrored where
    ``flip``."""
    out = xp.astype(xp.arange(size_out), dtype)
    out = xp.where(flip[:, None] > 0.5, size_out - 1 - out[None, :], out[None, :])
    source = start[:, None] + (out + 0.5) * (length[:, None] / size_out) - 0.5
    last = start[:, None] + length[:, None] - 1.0
    source = xp.clip(source, start[:, None], last)
    below = xp.floor(source)
    weight = source - below
    above = xp.where(below + 1.0 > last, last, below + 1.0)
    pixels = xp.astype(xp.arange(size_in), dtype)[None, None, :]
    zero = xp.zeros_like(weight)[:, :, None]
    return (xp.where(pixels == below[:, :, None], (1.0 - weight)[:, :, None], zero)
            + xp.where(pixels == above[:, :, None], weight[:, :, None], zero))


def _gray(x: Any) -> Any:
    """Luma (B, h, w) of planes (B, 3, h, w)."""
    return GRAY_WEIGHTS[0] * x[:, 0] + GRAY_WEIGHTS[1] * x[:, 1] + GRAY_WEIGHTS[2] * x[:, 2]


def _blend(xp: Any, x: Any, other: Any, factor: Any) -> Any:
    return xp.clip(factor * x + (1.0 - factor) * other, 0.0, 1.0)


def _shift_hue(xp: Any, x: Any, shift: Any) -> Any:
    """RGB -> HSV, hue + ``shift`` (mod 1), -> RGB: torchvision's transform, in forms without
    equality tests of recomputed values (a compiler that fuses and re-rounds the inputs, as
    XLA's CPU emitters do, would otherwise pick no branch or two at ties)."""
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    red_top = (r >= g) & (r >= b)
    green_top = (g > r) & (g >= b)
    top = xp.where(red_top, r, xp.where(green_top, g, b))
    bottom = xp.min(x, axis=1)
    spread = top - bottom
    flat = spread <= 0.0
    ones = xp.ones_like(top)
    saturation = xp.where(flat, xp.zeros_like(top), spread / xp.where(flat, ones, top))
    divisor = xp.where(flat, ones, spread)
    # hue in sixths of a turn: continuous across the branches' boundaries
    sixths = xp.where(red_top, (g - b) / divisor,
                      xp.where(green_top, 2.0 + (b - r) / divisor, 4.0 + (r - g) / divisor))
    hue = xp.remainder(sixths / 6.0 + shift, 1.0)
    channels = []
    for offset in (5.0, 3.0, 1.0):  # red, green, blue: the branch-free HSV -> RGB
        k = xp.remainder(offset + hue * 6.0, 6.0)
        ramp = xp.clip(xp.where(k < 4.0 - k, k, 4.0 - k), 0.0, 1.0)
        channels.append(top - top * saturation * ramp)
    return xp.stack(channels, axis=1)


def apply_simclr_views(xp: Any, images: Any, params: dict[str, Any],
                       size: tuple[int, int]) -> Any:
    """One view of each image: :func:`simclr_view_params`'s choices applied to a batch.

    Parameters
    ----------
    xp : namespace
        The array-API namespace of ``images`` (numpy, ``array_api_compat.torch``,
        ``jax.numpy``, or ``xrisk.tensorflow.views.namespace``).
    images : array, shape (B, H, W, 3), floating, values in [0, 1]
    params : dict of arrays
        :func:`simclr_view_params`'s output as arrays of ``xp`` in the images' dtype.
    size : (int, int)
        The views' height and width.

    Returns
    -------
    array, shape (B, size[0], size[1], 3)
    """
    dtype = images.dtype
    height, width = images.shape[1], images.shape[2]
    box = params["box"]
    no_flip = xp.zeros_like(params["flip"])
    rows = _resize_matrix(xp, box[:, 0], box[:, 2], height, size[0], no_flip, dtype)
    cols = _resize_matrix(xp, box[:, 1], box[:, 3], width, size[1], params["flip"], dtype)
    planes = xp.permute_dims(images, (0, 3, 1, 2))  # (B, 3, H, W)
    # the colour operations work on planes (B, 3, h, w), where a channel is a contiguous
    # slice (on channels-last strides torch's elementwise ops ran 28 times slower)
    x = xp.matmul(xp.matmul(rows[:, None, :, :], planes),
                  xp.permute_dims(cols, (0, 2, 1))[:, None, :, :])

    factors = params["factors"][:, :, None, None]  # (B, 4, 1, 1)
    jittered = x
    for position in range(4):
        current = jittered
        options = (
            xp.clip(current * factors[:, 0:1], 0.0, 1.0),
            _blend(xp, current, xp.mean(_gray(current), axis=(1, 2))[:, None, None, None],
                   factors[:, 1:2]),
            _blend(xp, current, _gray(current)[:, None], factors[:, 2:3]),
            _shift_hue(xp, current, factors[:, 3]),
        )
        step = params["order"][:, position][:, None, None, None]
        for operation, option in enumerate(options):
            jittered = xp.where(step == float(operation), option, jittered)
    x = xp.where(params["jitter"][:, None, None, None] > 0.5, jittered, x)
    gray = _gray(x)[:, None]
    x = xp.where(params["gray"][:, None, None, None] > 0.5, gray + xp.zeros_like(x), x)
    return xp.permute_dims(x, (0, 2, 3, 1))  # (B, h, w, 3)


def simclr_views(images: Any, index: Any, *, seed: int, epoch: int = 0, view: int = 0,
                 augment: SimCLRAugment | None = None) -> np.ndarray:
    """One SimCLR view of each image of a numpy batch (the reference the adapters match).

    Parameters
    ----------
    images : array_like, shape (B, H, W, 3), values in [0, 1]
    index : array_like of int, shape (B,)
        The images' dataset indices.
    seed, epoch, view : int
    augment : SimCLRAugment, optional

    Returns
    -------
    numpy.ndarray, shape (B, height, width, 3), the images' float dtype (float64 for ints)
    """
    x = check_rgb_batch("simclr_views", images, index)
    config = augment or SimCLRAugment()
    params = simclr_view_params(index, x.shape[1], x.shape[2], seed=seed, epoch=epoch,
                                view=view, augment=config)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    x = x.astype(dtype, copy=False)
    return apply_simclr_views(np, x, {k: v.astype(dtype) for k, v in params.items()},
                              config.size or (x.shape[1], x.shape[2]))


def check_rgb_batch(owner: str, images: Any, index: Any) -> Any:
    """``images`` if it is a (B, H, W, 3) batch matching ``index`` (B,); else a ValueError.
    Framework arrays are returned as they are (only their shape is read)."""
    shape = tuple(getattr(images, "shape", np.shape(images)))
    if len(shape) != 4 or shape[-1] != 3:
        raise ValueError(f"{owner}: images of shape {shape}; expected (batch, height, width, 3)"
                         " RGB values in [0, 1]. Fix: stack the batch channels-last (torch's "
                         "(B, 3, H, W) goes through xrisk.torch.views).")
    count = tuple(getattr(index, "shape", np.shape(index)))
    if len(count) != 1 or (None not in (count[0], shape[0]) and count[0] != shape[0]):
        raise ValueError(f"{owner}: index of shape {count} for {shape[0]} images; expected "
                         f"({shape[0]},). Fix: pass the batch's dataset indices.")
    return images if hasattr(images, "shape") else np.asarray(images)
