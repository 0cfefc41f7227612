"""Reference models: the same numpy weights give the same outputs, running statistics and
gradient step in torch, Keras and JAX (float64, to 1e-10), in training and evaluation."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow as tf
import torch  # noqa: I001 (torch before tensorflow)

import xrisk.jax.models as jm
import xrisk.tensorflow.models as km
import xrisk.torch.models as tm
from xrisk.runner.models import (
    conv_encoder_weights,
    neumf_weights,
    parameter_count,
    resnet20_weights,
)

TOL = 1e-10
LEARNING_RATE = 0.125


def _close(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=TOL, err_msg=key)


def _images(seed: int, size: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, size, size, 3))


class _Image:
    """An image model in the three frameworks, fed NHWC (torch gets NCHW)."""

    def __init__(self, weights: dict[str, np.ndarray], torch_builder: Any,
                 keras_builder: Any, jax_apply: Any) -> None:
        self.weights = weights
        self.torch, self.keras = torch_builder(weights), keras_builder(weights)
        # jitted: one compile per mode costs less than tracing ResNet20's ops eagerly
        self.jax_apply = jax.jit(jax_apply, static_argnames="train")
        self.params, self.state = jm.split_weights(weights)

    def forward(self, x: np.ndarray, train: bool) -> dict[str, np.ndarray]:
        self.torch.train(train)
        out_t = self.torch(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).detach().numpy()
        out_k = np.asarray(self.keras(x, training=train))
        out_j, self.state = self.jax_apply(self.params, self.state, x, train=train)
        return {"torch": out_t, "keras": out_k, "jax": np.asarray(out_j)}

    def weights_after(self) -> dict[str, dict[str, np.ndarray]]:
        return {"torch": tm.model_weights(self.torch), "keras": km.model_weights(self.keras),
                "jax": jm.merge_weights(self.params, self.state)}

    def sgd_step(self, x: np.ndarray, target: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """One SGD step on ``sum(target * output)`` in training mode, by each framework's own
        optimizer; returns the gradients (canonical layout)."""
        self.torch.train(True)
        optimizer = torch.optim.SGD(self.torch.parameters(), lr=LEARNING_RATE)
        out = self.torch(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()))
        (out * torch.from_numpy(target)).sum().backward()
        grads_t = tm.model_gradients(self.torch)
        optimizer.step()  # torch.optim.SGD; Keras and JAX: the same update by hand and optax

        variables = km.model_variables(self.keras)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(self.keras(x, training=True) * target)
        grads = tape.gradient(loss, list(variables.values()))
        for variable, grad in zip(variables.values(), grads, strict=True):
            variable.assign_sub(LEARNING_RATE * grad)
        grads_k = {k: np.asarray(g) for k, g in zip(variables, grads, strict=True)}

        def objective(params: Any, state: Any) -> Any:
            out, new_state = self.jax_apply(params, state, x, train=True)
            return jnp.sum(out * target), new_state

        grads_j, self.state = jax.jit(jax.grad(objective, has_aux=True))(self.params,
                                                                         self.state)
        optimizer_j = optax.sgd(LEARNING_RATE)
        updates, _ = optimizer_j.update(grads_j, optimizer_j.init(self.params), self.params)
        self.params = optax.apply_updates(self.params, updates)
        return {"torch": grads_t, "keras": grads_k, "jax": jm.merge_weights(grads_j)}


def _resnet20() -> _Image:
    return _Image(resnet20_weights(3, seed=1, dtype="float64"), tm.resnet20, km.resnet20,
                  jm.resnet20_apply)


def _conv_encoder() -> _Image:
    weights = conv_encoder_weights(widths=(4, 8, 8), projection=(8, 5), seed=2,
                                   dtype="float64")
    return _Image(weights, tm.conv_encoder, km.conv_encoder, jm.conv_encoder_apply)


@pytest.mark.parametrize("build", [_resnet20, _conv_encoder], ids=["resnet20", "conv_encoder"])
def test_image_models_agree_in_train_and_eval_and_after_a_step(build: Any) -> None:
    model = build()
    # evaluation first (running statistics at their initial values), then training mode
    # twice: the second call normalises the same way but the running statistics moved twice
    for train in (False, True, True):
        outputs = model.forward(_images(3), train)
        np.testing.assert_allclose(outputs["keras"], outputs["torch"], rtol=0, atol=TOL)
        np.testing.assert_allclose(outputs["jax"], outputs["torch"], rtol=0, atol=TOL)
    after = model.weights_after()
    _close(after["keras"], after["torch"])
    _close(after["jax"], after["torch"])
    assert not np.allclose(after["torch"]["bn1/mean" if "bn1/mean" in after["torch"]
                                         else "encoder.bn0/mean"], 0.0)  # they did move
    evaluated = model.forward(_images(4), False)  # evaluation with the moved statistics
    np.testing.assert_allclose(evaluated["keras"], evaluated["torch"], rtol=0, atol=TOL)
    np.testing.assert_allclose(evaluated["jax"], evaluated["torch"], rtol=0, atol=TOL)

    target = np.random.default_rng(5).standard_normal(evaluated["torch"].shape)
    grads = model.sgd_step(_images(6), target)
    _close(grads["keras"], grads["torch"])
    _close(grads["jax"], grads["torch"])
    assert all(np.any(g != 0) for g in grads["torch"].values())
    stepped = model.weights_after()
    _close(stepped["keras"], stepped["torch"])
    _close(stepped["jax"], stepped["torch"])


def test_resnet20_has_the_papers_parameter_count_and_halves_resolution_twice() -> None:
    weights = resnet20_weights(10, seed=0, dtype="float32")
    assert parameter_count(weights) == 269_722  # He et al. (2016): 0.27 M
    model = tm.resnet20(weights)
    assert sum(p.numel() for p in model.parameters()) == 269_722
    assert weights["layer3.2.conv2/kernel"].shape == (3, 3, 64, 64)
    out = model.eval()(torch.zeros(2, 3, 16, 16))
    assert tuple(out.shape) == (2, 10)


def test_neumf_agrees_across_frameworks_forward_and_step() -> None:
    weights = neumf_weights(6, 9, factors=4, hidden=(8, 4), seed=3, dtype="float64")
    users, items = np.array([0, 5, 2]), np.array([[1, 2, 8], [0, 3, 4], [7, 7, 6]])
    target = np.random.default_rng(0).standard_normal((3, 3))
    model_t, model_k = tm.neumf(weights), km.neumf(weights)
    params, _ = jm.split_weights(weights)

    out_t = model_t(torch.from_numpy(users), torch.from_numpy(items))
    np.testing.assert_allclose(np.asarray(model_k((users, items))), out_t.detach().numpy(),
                               rtol=0, atol=TOL)
    np.testing.assert_allclose(np.asarray(jm.neumf_apply(params, users, items)),
                               out_t.detach().numpy(), rtol=0, atol=TOL)

    (out_t * torch.from_numpy(target)).sum().backward()
    variables = km.model_variables(model_k)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model_k((users, items)) * target)
    grads_k = dict(zip(variables, tape.gradient(loss, list(variables.values())), strict=True))
    grads_j = jax.grad(lambda p: jnp.sum(jm.neumf_apply(p, users, items) * target))(params)
    grads_t = tm.model_gradients(model_t)
    # Keras returns embedding gradients as IndexedSlices: densify
    _close({k: np.asarray(tf.convert_to_tensor(g)) for k, g in grads_k.items()}, grads_t)
    _close(jm.merge_weights(grads_j), grads_t)


def test_load_weights_refuses_foreign_weights_and_changes_nothing() -> None:
    weights = conv_encoder_weights(widths=(4, 8), projection=(8, 5), seed=0, dtype="float64")
    other = conv_encoder_weights(widths=(4, 6), projection=(8, 5), seed=1, dtype="float64")
    model_t, model_k = tm.conv_encoder(weights), km.conv_encoder(weights)
    for load, model, read in ((tm.load_weights, model_t, tm.model_weights),
                              (km.load_weights, model_k, km.model_weights)):
        with pytest.raises(ValueError, match="encoder.conv1/kernel has shape"):
            load(model, other)
        with pytest.raises(ValueError, match="none for"):
            load(model, {k: v for k, v in weights.items() if k != "head.dense1/bias"})
        _close(read(model), weights)  # nothing was copied


def test_weight_constructors_reject_bad_sizes() -> None:
    with pytest.raises(ValueError, match=r"num_outputs=0; expected a positive int"):
        resnet20_weights(0, seed=0, dtype="float64")
    with pytest.raises(ValueError, match=r"widths=\(\); expected a non-empty"):
        conv_encoder_weights(widths=(), seed=0, dtype="float64")
    with pytest.raises(ValueError, match=r"hidden=\(8, -1\)"):
        neumf_weights(3, 4, hidden=(8, -1), seed=0, dtype="float64")


def test_same_seed_same_weights_and_float32_is_the_rounded_float64() -> None:
    a = resnet20_weights(2, seed=7, dtype="float64")
    b = resnet20_weights(2, seed=7, dtype="float64")
    c = resnet20_weights(2, seed=7, dtype="float32")
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert all(np.array_equal(a[k].astype(np.float32), c[k]) for k in a)
    assert not np.array_equal(a["conv1/kernel"], resnet20_weights(2, seed=8, dtype="float64")
                              ["conv1/kernel"])


def test_torch_backbones_build_or_name_the_missing_torchvision() -> None:
    with pytest.raises(ValueError, match=r"name='vgg'; expected one of \('resnet18'"):
        tm.backbone("vgg")
    try:
        import torchvision  # noqa: F401
    except Exception:  # not installed, or no build for this torch (as on CPU-only torch here)
        with pytest.raises(ImportError, match="needs torchvision.*Fix: pip install"):
            tm.backbone("resnet18", 3)
    else:
        model = tm.backbone("resnet18", 3).eval()
        assert tuple(model(torch.zeros(2, 3, 32, 32)).shape) == (2, 3)


def test_keras_backbone_names_refused_with_the_alternative() -> None:
    # building DenseNet121 costs seconds; the names are checked before anything is built
    with pytest.raises(ValueError, match="resnet18.*not in keras.applications.*resnet20"):
        km.backbone("resnet18")
    with pytest.raises(ValueError, match=r"num_outputs=0; expected a positive int"):
        km.backbone("densenet121", 0)


def test_every_named_model_has_a_weight_constructor_and_builders_in_each_framework() -> None:
    from xrisk.runner.models import MODEL_NAMES, WEIGHT_CONSTRUCTORS
    assert tuple(WEIGHT_CONSTRUCTORS) == MODEL_NAMES
    for name in MODEL_NAMES:
        assert callable(getattr(tm, name)) and callable(getattr(km, name))
        assert callable(getattr(jm, f"{name}_apply"))


def test_keras_batch_norm_matches_torch_under_xla_with_an_unknown_batch_size() -> None:
    weights = conv_encoder_weights(widths=(4, 8), projection=(8, 5), seed=0, dtype="float64")
    x = np.random.default_rng(0).standard_normal((3, 8, 8, 3))
    model_k, model_t = km.conv_encoder(weights), tm.conv_encoder(weights).train()
    step = tf.function(lambda images: model_k(images, training=True), jit_compile=True,
                       input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float64)])
    expected = model_t(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).detach().numpy()
    np.testing.assert_allclose(step(x).numpy(), expected, rtol=0, atol=TOL)
    _close(km.model_weights(model_k), tm.model_weights(model_t))  # the running statistics
