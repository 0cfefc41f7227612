"""SimCLR views: the core's choices have the documented distribution and meaning, and the
torch, TensorFlow and JAX adapters produce the numpy reference's views for the same key."""

from __future__ import annotations

import colorsys

import jax
import numpy as np
import pytest
import tensorflow as tf
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk.jax.views as jax_views
import xrisk.tensorflow.views as tf_views
import xrisk.torch.views as torch_views
from xrisk.datasets.views import (
    GRAY_WEIGHTS,
    SimCLRAugment,
    apply_simclr_views,
    simclr_view_params,
    simclr_views,
)

BATCH, HEIGHT, WIDTH = 6, 12, 10


def _images(seed: int, batch: int = BATCH) -> np.ndarray:
    return np.random.default_rng(seed).uniform(size=(batch, HEIGHT, WIDTH, 3))


def _identity(batch: int, **changes: np.ndarray) -> dict[str, np.ndarray]:
    params = {"box": np.tile([0.0, 0.0, HEIGHT, WIDTH], (batch, 1)), "flip": np.zeros(batch),
              "jitter": np.zeros(batch), "factors": np.tile([1.0, 1.0, 1.0, 0.0], (batch, 1)),
              "order": np.tile([0.0, 1.0, 2.0, 3.0], (batch, 1)), "gray": np.zeros(batch)}
    return {**params, **changes}


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 1000), view=st.integers(0, 1),
       start=st.integers(0, 10**6), size=st.sampled_from([None, (8, 8)]))
def test_the_three_frameworks_make_the_references_views(seed: int, epoch: int, view: int,
                                                        start: int,
                                                        size: tuple[int, int] | None) -> None:
    images, index = _images(seed % 1000), np.arange(start, start + BATCH)
    augment = SimCLRAugment(size=size, jitter=0.9, grayscale=0.3)
    key = {"seed": seed, "epoch": epoch, "view": view, "augment": augment}
    expected = simclr_views(images, index, **key)
    nchw = torch.from_numpy(images.transpose(0, 3, 1, 2).copy())
    from_torch = torch_views.simclr_views(nchw, torch.from_numpy(index), **key)
    from_tf = tf_views.simclr_views(tf.constant(images), index, **key)
    from_jax = jax_views.simclr_views(images, index, **key)
    np.testing.assert_allclose(from_torch.numpy().transpose(0, 2, 3, 1), expected, atol=1e-12)
    np.testing.assert_allclose(from_tf.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(np.asarray(from_jax), expected, atol=1e-12)


def test_views_in_a_tf_data_map_and_under_jit_equal_the_eager_ones() -> None:
    """Also the compiled hue: XLA fuses the blends into the hue conversion and re-rounds them,
    and torchvision's ``max == r`` branch tests then picked no channel or two for some pixels
    (errors near 0.9 with these parameters)."""
    images, index = _images(1, 10), np.arange(10)
    expected = simclr_views(images, index, seed=4, epoch=2, view=1)
    data = tf.data.Dataset.from_tensor_slices((images, index)).batch(4)
    mapped = data.map(lambda x, i: tf_views.simclr_views(x, i, seed=4, epoch=tf.constant(2),
                                                         view=1))
    np.testing.assert_allclose(np.concatenate(list(mapped.as_numpy_iterator())), expected,
                               atol=1e-12)
    params = simclr_view_params(index, HEIGHT, WIDTH, seed=4, epoch=2, view=1)
    jitted = jax.jit(lambda x, p: jax_views.apply_views(x, p, size=(HEIGHT, WIDTH)))
    np.testing.assert_allclose(np.asarray(jitted(images, params)), expected, atol=1e-12)


def test_a_view_depends_on_the_example_not_on_its_batch_and_changes_with_the_key() -> None:
    images, index = _images(2, 8), np.arange(100, 108)
    whole = simclr_views(images, index, seed=7, epoch=1)
    parts = np.concatenate([simclr_views(images[order], index[order], seed=7, epoch=1)
                            for order in (np.array([5, 2, 0]), np.array([7, 1, 3, 4, 6]))])
    np.testing.assert_array_equal(parts, whole[[5, 2, 0, 7, 1, 3, 4, 6]])
    for other in ({"seed": 8, "epoch": 1}, {"seed": 7, "epoch": 2},
                  {"seed": 7, "epoch": 1, "view": 1}):
        assert not np.allclose(simclr_views(images, index, **other), whole)


def test_the_choices_have_simclrs_distribution() -> None:
    count = 20_000
    config = SimCLRAugment()
    params = simclr_view_params(np.arange(count), 32, 32, seed=0, augment=config)
    for key, rate in (("flip", config.flip), ("jitter", config.jitter),
                      ("gray", config.grayscale)):
        # five binomial standard deviations: fails only if the rate is wrong
        assert abs(params[key].mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / count), key
    top, left, h, w = params["box"].T
    assert np.all((top >= 0) & (left >= 0) & (top + h <= 32) & (left + w <= 32) & (h >= 1))
    area = h * w / 32**2
    assert area.min() >= 0.05 and area.max() <= 1.0  # scale (0.08, 1) up to rounding
    assert abs(np.median(np.log(w / h))) < 0.05  # the log-ratio is symmetric
    np.testing.assert_array_equal(np.sort(params["order"], axis=1),
                                  np.tile(np.arange(4.0), (count, 1)))
    low, high = params["factors"].min(axis=0), params["factors"].max(axis=0)
    np.testing.assert_allclose(low, [0.6, 0.6, 0.6, -0.1], atol=1e-3)
    np.testing.assert_allclose(high, [1.4, 1.4, 1.4, 0.1], atol=1e-3)
    first_position = np.bincount(params["order"][:, 0].astype(int), minlength=4) / count
    np.testing.assert_allclose(first_position, 0.25, atol=5 * np.sqrt(0.25 * 0.75 / count))


def test_a_box_that_never_fits_falls_back_to_the_central_crop_of_the_closest_ratio() -> None:
    config = SimCLRAugment(scale=(1.0, 1.0), ratio=(2.0, 3.0))  # wider than the image can be
    params = simclr_view_params(np.arange(5), 12, 12, seed=0, augment=config)
    np.testing.assert_array_equal(params["box"], np.tile([3.0, 0.0, 6.0, 12.0], (5, 1)))


def test_crop_and_resize_is_torchs_bilinear_interpolation_of_the_box() -> None:
    images = _images(3, 3)
    box = np.array([[2.0, 1.0, 7.0, 5.0], [0.0, 0.0, HEIGHT, WIDTH], [5.0, 3.0, 4.0, 7.0]])
    for flip in (np.zeros(3), np.ones(3)):
        out = apply_simclr_views(np, images, _identity(3, box=box, flip=flip), (9, 8))
        for b, (top, left, h, w) in enumerate(box.astype(int)):
            crop = torch.from_numpy(images[b, top:top + h, left:left + w].transpose(2, 0, 1)
                                    .copy())[None]
            expected = F.interpolate(crop, size=(9, 8), mode="bilinear", align_corners=False,
                                     antialias=False)[0].numpy().transpose(1, 2, 0)
            if flip[b]:
                expected = expected[:, ::-1]
            np.testing.assert_allclose(out[b], expected, atol=1e-12)


def _reference_jitter(image: np.ndarray, factors: np.ndarray, order: np.ndarray) -> np.ndarray:
    """torchvision's colour operations, written per pixel with colorsys for the hue."""
    x = image.copy()
    for operation in order.astype(int):
        gray = x @ np.array(GRAY_WEIGHTS)
        if operation == 0:
            x = np.clip(x * factors[0], 0, 1)
        elif operation == 1:
            x = np.clip(factors[1] * x + (1 - factors[1]) * gray.mean(), 0, 1)
        elif operation == 2:
            x = np.clip(factors[2] * x + (1 - factors[2]) * gray[..., None], 0, 1)
        else:
            hsv = [colorsys.rgb_to_hsv(*pixel) for pixel in x.reshape(-1, 3)]
            x = np.array([colorsys.hsv_to_rgb((h + factors[3]) % 1.0, s, v)
                          for h, s, v in hsv]).reshape(x.shape)
    return x


def test_colour_jitter_applies_torchvisions_operations_in_the_drawn_order() -> None:
    images = _images(4, 4)
    factors = np.array([[1.3, 0.7, 1.2, 0.08], [0.6, 1.4, 0.5, -0.1], [1.0, 1.0, 1.0, 0.3],
                        [0.9, 1.1, 0.0, -0.45]])
    order = np.array([[0.0, 1, 2, 3], [3.0, 2, 1, 0], [2.0, 0, 3, 1], [1.0, 3, 0, 2]])
    out = apply_simclr_views(np, images, _identity(4, jitter=np.ones(4), factors=factors,
                                                   order=order), (HEIGHT, WIDTH))
    for b in range(4):
        np.testing.assert_allclose(out[b], _reference_jitter(images[b], factors[b], order[b]),
                                   atol=1e-12)
    skipped = apply_simclr_views(np, images, _identity(4, factors=factors, order=order),
                                 (HEIGHT, WIDTH))
    np.testing.assert_allclose(skipped, images, atol=1e-12)  # jitter off: unchanged
    gray = apply_simclr_views(np, images, _identity(4, gray=np.ones(4)), (HEIGHT, WIDTH))
    np.testing.assert_allclose(gray, np.repeat(images @ np.array(GRAY_WEIGHTS), 3)
                               .reshape(images.shape), atol=1e-12)


@pytest.mark.parametrize("changes, match", [
    ({"scale": (0.5, 0.2)}, r"scale=\(0.5, 0.2\); expected \(low, high\)"),
    ({"ratio": (0.0, 1.0)}, r"ratio=\(0.0, 1.0\)"),
    ({"flip": 1.5}, r"flip=1.5; expected a probability"),
    ({"hue": 0.7}, r"hue=0.7; expected a shift in \[0, 0.5\]"),
    ({"size": (0, 4)}, r"size=\(0, 4\)"),
])
def test_bad_settings_are_refused_with_the_fix(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SimCLRAugment(**changes)


def test_bad_batches_are_refused_with_the_fix() -> None:
    images = _images(0)
    with pytest.raises(ValueError, match=r"shape \(6, 12, 10, 3\); expected \(batch, 3"):
        torch_views.simclr_views(torch.from_numpy(images), np.arange(BATCH), seed=0)
    with pytest.raises(TypeError, match="floating torch.Tensor"):
        torch_views.simclr_views(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), np.arange(2),
                                 seed=0)
    with pytest.raises(ValueError, match=r"index of shape \(5,\) for 6 images"):
        simclr_views(images, np.arange(5), seed=0)
    with pytest.raises(ValueError, match=r"expected \(batch, height, width, 3\)"):
        jax_views.simclr_views(images[..., :2], np.arange(BATCH), seed=0)
    with pytest.raises(TypeError, match="floating values"):
        tf_views.simclr_views(tf.zeros((2, 4, 4, 3), tf.uint8), np.arange(2), seed=0)



def test_float32_views_agree_across_frameworks_to_float32_rounding() -> None:
    images, index = _images(9).astype(np.float32), np.arange(BATCH)
    expected = simclr_views(images.astype(np.float64), index, seed=1, epoch=3)
    nchw = torch.from_numpy(images.transpose(0, 3, 1, 2).copy())
    outputs = {
        "numpy": simclr_views(images, index, seed=1, epoch=3),
        "torch": torch_views.simclr_views(nchw, index, seed=1, epoch=3).numpy()
        .transpose(0, 2, 3, 1),
        "tensorflow": tf_views.simclr_views(tf.constant(images), index, seed=1, epoch=3).numpy(),
        "jax": np.asarray(jax_views.simclr_views(images, index, seed=1, epoch=3)),
    }
    for name, output in outputs.items():
        assert output.dtype == np.float32, name
        np.testing.assert_allclose(output, expected, atol=1e-5, err_msg=name)


def test_settings_from_yaml_lists_work_under_jit() -> None:
    augment = SimCLRAugment(size=[8, 8], scale=[0.5, 1.0])  # type: ignore[arg-type]
    assert augment.size == (8, 8) and augment.scale == (0.5, 1.0)
    out = jax_views.simclr_views(_images(0), np.arange(BATCH), seed=0, augment=augment)
    assert out.shape == (BATCH, 8, 8, 3)
