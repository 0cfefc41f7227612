"""The training engine the learning-to-rank examples share, one section per framework.

An example names its task (:class:`Task`: the training interactions, the model and the test
candidates) and its methods (:class:`Method`: which xrisk loss, with which options, and
whether the paper's warm-up runs first); this module builds the same scorer with the same
initial weights in PyTorch, TensorFlow and JAX and trains it on the batches of one
:class:`xrisk.samplers.TriSampler` in ranking mode. Each framework section is written as a
user would write it: an ``nn.Module`` loop in PyTorch, a ``tf.function`` train step in
TensorFlow, a ``jax.jit`` step with the loss state donated in JAX. The xrisk calls are the same
in all three::

    sampler = TriSampler(rows, num_pos + num_neg, num_pos=..., mode="ranking", ...)
    loss_fn = xr.NDCGLoss(sampler.num_interactions, sampler.num_queries, sampler.num_items)
    items, queries = sampler.batch(i)
    loss = loss_fn(model(queries, items), **sampler.ranking_inputs(items, queries))

**The warm-up recipe** (:func:`warm_up`): the paper trains SONG / K-SONG from a model first
trained with the listwise cross-entropy, then re-initialises the model's last layer (Qiu et
al., ICML 2022; LibAUC KDD'23, appendix "Pretraining strategy": ListwiseCE with Adam at
1e-3, then the last layer re-initialised and K-SONG trained). It is one call here, in the
examples' engine, rather than a library function: it is a training *schedule* (which loss for
how many epochs, which layer to reset, a fresh optimizer and a fresh loss state at the
switch), and xrisk leaves the training loop, the model and the optimizer to the user in every
framework. A library function would have to own all three (and so fit no user's loop); the
schedule is four lines in any loop, and :func:`warm_up` is the place to copy them from.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _training import FRAMEWORKS, _PlainProgress, import_frameworks  # noqa: F401

from xrisk.samplers import TriSampler

try:
    from tqdm.auto import tqdm
except ImportError:  # tqdm is optional: plain prints instead of progress bars
    tqdm = None

#: The paper's NDCG setting (Adam, weight decay 1e-7, gamma 0.1) through xrisk's ``SONG``
#: optimizer in Adam mode (LibAUC's clipped Adam), with learning rate 1e-2: the paper's 1e-3
#: goes with ~540 steps per epoch on MovieLens-20M; these data sets give 9-19. A light check
#: on seed 0, 30 epochs, torch (no search): 1e-2 beat 1e-3 for every MovieLens method (NDCG@5
#: ~0.39 vs ~0.35) and for SONG / K-SONG on the LightGBM set (ListwiseCE: 0.687 vs 0.694).
OPTIMIZER = {"mode": "adam", "learning_rate": 1e-2, "weight_decay": 1e-7}
DECAY_FACTOR = 10.0  # learning rate / 10 at 50 % and 75 % of the epochs (the paper's schedule)


@dataclass(frozen=True)
class Method:
    """One training method.

    ``loss``: an xrisk loss name, ``"CrossEntropyLoss"`` (pointwise BCE: the positives' scores
    against 1, the sampled negatives' against 0), ``"ListwiseCELoss"`` or ``"NDCGLoss"``.
    ``warm_up``: run :func:`warm_up` (ListwiseCE, then a new last layer) before this method.
    ``ideal_k``: pass the top-K ideal DCG to the loss (K-SONG's :math:`Z^K_q`).
    """

    loss: str
    loss_options: dict[str, Any] = field(default_factory=dict)
    optimizer: str = "SONG"
    optimizer_options: dict[str, Any] = field(default_factory=lambda: dict(OPTIMIZER))
    warm_up: bool = False
    ideal_k: int | None = None


#: The warm-up stage: the listwise cross-entropy with the paper's gamma.
WARM_UP = Method("ListwiseCELoss", {"gamma": 0.1})


@dataclass
class Task:
    """A ranking data set as the engine sees it.

    ``rows`` (n, 3): the training interactions ``(query, item, relevance)`` for the
    TriSampler; ``num_queries`` / ``num_items``: its key spaces. ``model``: ``"neumf"`` (the
    model scores ``(query id, item id)`` pairs) or ``"mlp"`` (it scores feature rows:
    ``features[offsets[query] + item]``, items being positions within their query).
    ``num_candidates`` (num_queries,): per-query candidate counts for ``NDCGLoss(num_items=
    None)``; None uses the catalogue size. ``evaluate(scores)`` turns the model's test scores
    into the metrics (``metric names -> value``); ``test`` holds what the model scores at test
    time (NeuMF: ``users`` (U,), ``items`` (U, C); MLP: ``features`` (N, F)).
    """

    name: str
    rows: np.ndarray
    num_queries: int
    num_items: int
    model: str
    sizes: dict[str, int]
    test: dict[str, np.ndarray]
    evaluate: Callable[[np.ndarray], dict[str, float]]
    num_pos: int
    num_neg: int
    batch_queries: int
    features: np.ndarray | None = None
    offsets: np.ndarray | None = None
    num_candidates: np.ndarray | None = None

    def sampler(self, seed: int) -> TriSampler:
        return TriSampler(self.rows, self.num_pos + self.num_neg, num_pos=self.num_pos,
                          num_sampled_tasks=self.batch_queries, mode="ranking",
                          num_items=self.num_items, seed=seed)


# -- weights shared by the three frameworks -------------------------------------------------
def _glorot(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def initial_weights(task: Task, seed: int) -> dict[str, np.ndarray]:
    """The scorer's initial weights (kernels (in, out)), the same in every framework.

    NeuMF (He et al., 2017, as in LibAUC): GMF and MLP embeddings ~ N(0, 0.01^2), MLP tower
    ``2f -> h1 -> h2`` (ReLU), output ``f + h2 -> 1``. MLP: ``F -> h1 -> h2 -> 1`` (ReLU).
    Dense kernels Glorot-uniform, biases 0.
    """
    rng = np.random.default_rng([seed, 1])
    s = task.sizes
    weights: dict[str, np.ndarray] = {}
    if task.model == "neumf":
        f = s["factors"]
        for name, rows in (("gmf_user", task.num_queries), ("gmf_item", task.num_items),
                           ("mlp_user", task.num_queries), ("mlp_item", task.num_items)):
            weights[name] = (0.01 * rng.standard_normal((rows, f))).astype(np.float32)
        fan_in = 2 * f
    else:
        fan_in = int(task.features.shape[1])
    weights["w1"], weights["b1"] = _glorot(rng, fan_in, s["h1"]), np.zeros(s["h1"], np.float32)
    weights["w2"], weights["b2"] = _glorot(rng, s["h1"], s["h2"]), np.zeros(s["h2"], np.float32)
    weights["w_out"], weights["b_out"] = head_weights(task, rng)
    return weights


def head_weights(task: Task, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A fresh last layer (kernel (in, 1), bias (1,)): at initialisation and after warm-up."""
    fan_in = task.sizes["h2"] + (task.sizes["factors"] if task.model == "neumf" else 0)
    return _glorot(rng, fan_in, 1), np.zeros(1, np.float32)


# -- batches --------------------------------------------------------------------------------
def batch_inputs(task: Task, method: Method, sampler: TriSampler, items: np.ndarray,
                 queries: np.ndarray) -> dict[str, np.ndarray]:
    """One batch as the framework sections take it: the model's inputs and the loss's.

    ``model``: ``(queries, items)`` ids for NeuMF, feature ``rows`` for the MLP; ``loss``: the
    keyword inputs of the loss (``sampler.ranking_inputs`` in float32, plus ``num_candidates``
    for per-query candidate sets; pointwise BCE: its 0/1 ``labels``).
    """
    if task.model == "neumf":
        model = {"queries": queries, "items": items}
    else:
        model = {"rows": task.offsets[queries][:, None] + items}
    if method.loss == "CrossEntropyLoss":
        labels = np.zeros(items.shape, np.float32)
        labels[:, : sampler.num_pos] = 1.0
        return {"model": model, "loss": {"labels": labels.reshape(-1)}}
    inputs = sampler.ranking_inputs(items, queries, ideal_k=method.ideal_k)
    if method.loss == "ListwiseCELoss":
        inputs = {"interaction": inputs["interaction"], "mask": inputs["mask"]}
    elif task.num_candidates is not None:
        inputs["num_candidates"] = task.num_candidates[queries]
    loss = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in inputs.items()}
    return {"model": model, "loss": loss}


def loss_options(task: Task, method: Method, sampler: TriSampler) -> dict[str, Any]:
    """The xrisk loss's constructor arguments: key-space sizes from the sampler, then the
    method's options."""
    options: dict[str, Any] = {}
    if method.loss == "ListwiseCELoss":
        options["num_interactions"] = sampler.num_interactions
    elif method.loss == "NDCGLoss":
        options.update(num_interactions=sampler.num_interactions,
                       num_queries=sampler.num_queries,
                       num_items=None if task.num_candidates is not None else sampler.num_items)
    options.update(method.loss_options)
    return options


@dataclass
class Trainer:
    """What a framework section hands to the shared loop.

    ``begin(method, options)`` starts a stage: a new loss (fresh state) built with
    ``options`` and a new optimizer; ``step(batch)`` trains on one batch of
    :func:`batch_inputs` and returns the loss; ``reset_head(kernel, bias)`` replaces the last
    layer; ``decay_lr(factor)`` divides the learning rate; ``predict()`` returns the test
    scores as numpy.
    """

    begin: Callable[[Method, dict[str, Any]], None]
    step: Callable[[dict[str, Any]], Any]
    reset_head: Callable[[np.ndarray, np.ndarray], None]
    decay_lr: Callable[[float], None]
    predict: Callable[[], np.ndarray]


def run_stage(trainer: Trainer, task: Task, method: Method, sampler: TriSampler, *,
              epochs: int, first_epoch: int, label: str, decay: bool = True) -> list[float]:
    """Train ``epochs`` epochs of one method from a fresh loss and optimizer; the learning rate
    drops 10x at 50 % and 75 % of them (``decay``). Returns the seconds of every epoch."""
    trainer.begin(method, loss_options(task, method, sampler))
    decays = {epochs // 2, (3 * epochs) // 4} - {0} if decay else set()
    seconds = []
    bar = progress(range(epochs), label)
    for epoch in bar:
        if epoch in decays:
            trainer.decay_lr(DECAY_FACTOR)
        start = time.perf_counter()
        sampler.set_epoch(first_epoch + epoch)
        loss = None
        for items, queries in sampler:
            loss = trainer.step(batch_inputs(task, method, sampler, items, queries))
        loss = float(loss)  # waits for the last step (asynchronous frameworks)
        seconds.append(time.perf_counter() - start)
        bar.set_postfix(loss=f"{loss:.4f}")
    return seconds


def warm_up(trainer: Trainer, task: Task, sampler: TriSampler, *, epochs: int, seed: int,
            optimizer_options: dict[str, Any] | None = None, label: str = "warm-up") -> None:
    """The paper's warm-up before SONG / K-SONG: train the listwise cross-entropy for
    ``epochs`` epochs, then re-initialise the last layer.

    ``ListwiseCELoss(gamma=0.1)`` with SONG's Adam (``optimizer_options``, default
    :data:`OPTIMIZER`; :func:`train` passes the main stage's), no learning-rate decay, on the
    sampler's epochs ``0 .. epochs - 1`` (the main stage goes on from epoch ``epochs``, so it
    sees new batches). The next stage starts a new loss (fresh moving averages) and a new
    optimizer (fresh Adam moments) from the warmed-up body and a
    new, seeded last layer. ``epochs=0`` does nothing.
    """
    if epochs <= 0:
        return
    stage = WARM_UP if optimizer_options is None else dataclasses.replace(
        WARM_UP, optimizer_options=dict(optimizer_options))
    run_stage(trainer, task, stage, sampler, epochs=epochs, first_epoch=0,
              label=label, decay=False)
    trainer.reset_head(*head_weights(task, np.random.default_rng([seed, 2])))


def train(trainer: Trainer, task: Task, method: Method, *, epochs: int, warm_up_epochs: int,
          seed: int, label: str) -> tuple[np.ndarray, list[float]]:
    """Warm up (methods with ``warm_up``), train, and return the test scores and the main
    stage's seconds per epoch."""
    sampler = task.sampler(seed)
    if method.warm_up:
        warm_up(trainer, task, sampler, epochs=warm_up_epochs, seed=seed,
                optimizer_options=method.optimizer_options, label=f"{label} warm-up")
    first = warm_up_epochs if method.warm_up else 0
    seconds = run_stage(trainer, task, method, sampler, epochs=epochs, first_epoch=first,
                        label=label)
    return trainer.predict(), seconds


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(task: Task, weights: dict[str, np.ndarray]) -> Trainer:
    import torch
    from torch import nn

    import xrisk.torch as xr

    class NeuMF(nn.Module):
        """GMF + MLP towers over user and item embeddings, one linear output."""

        def __init__(self, num_users: int, num_items: int, factors: int, h1: int, h2: int):
            super().__init__()
            self.gmf_user, self.gmf_item = (nn.Embedding(num_users, factors),
                                            nn.Embedding(num_items, factors))
            self.mlp_user, self.mlp_item = (nn.Embedding(num_users, factors),
                                            nn.Embedding(num_items, factors))
            self.mlp = nn.Sequential(nn.Linear(2 * factors, h1), nn.ReLU(), nn.Linear(h1, h2),
                                     nn.ReLU())
            self.out = nn.Linear(factors + h2, 1)

        def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
            gmf = self.gmf_user(users)[:, None, :] * self.gmf_item(items)  # (Q, C, f)
            item = self.mlp_item(items)
            user = self.mlp_user(users)[:, None, :].expand_as(item)
            mlp = self.mlp(torch.cat([user, item], dim=-1))
            return self.out(torch.cat([gmf, mlp], dim=-1))[..., 0]  # (Q, C)

    s = task.sizes
    if task.model == "neumf":
        model = NeuMF(task.num_queries, task.num_items, s["factors"], s["h1"], s["h2"])
        dense = (model.mlp[0], model.mlp[2], model.out)
    else:
        model = nn.Sequential(nn.Linear(task.features.shape[1], s["h1"]), nn.ReLU(),
                              nn.Linear(s["h1"], s["h2"]), nn.ReLU(), nn.Linear(s["h2"], 1))
        dense = (model[0], model[2], model[4])
        features = torch.from_numpy(task.features)
    with torch.no_grad():
        for layer, w, b in zip(dense, ("w1", "w2", "w_out"), ("b1", "b2", "b_out")):
            layer.weight.copy_(torch.from_numpy(weights[w].T))
            layer.bias.copy_(torch.from_numpy(weights[b]))
        if task.model == "neumf":
            for name in ("gmf_user", "gmf_item", "mlp_user", "mlp_item"):
                getattr(model, name).weight.copy_(torch.from_numpy(weights[name]))

    def score(inputs: dict[str, np.ndarray]) -> torch.Tensor:
        if task.model == "neumf":
            return model(torch.from_numpy(inputs["queries"]), torch.from_numpy(inputs["items"]))
        return model(features[torch.from_numpy(inputs["rows"])])[..., 0]

    current: dict[str, Any] = {}

    def begin(method: Method, options: dict[str, Any]) -> None:
        current["method"] = method
        current["loss_fn"] = getattr(xr, method.loss)(**options)
        current["optimizer"] = getattr(xr, method.optimizer)(model.parameters(),
                                                             **method.optimizer_options)

    def step(batch: dict[str, Any]) -> Any:
        scores = score(batch["model"])
        if current["method"].loss == "CrossEntropyLoss":
            scores = scores.reshape(-1)
        inputs = {k: torch.from_numpy(v) for k, v in batch["loss"].items()}
        loss = current["loss_fn"](scores, **inputs)
        current["optimizer"].zero_grad()
        loss.backward()
        current["optimizer"].step()
        return loss.detach()

    def reset_head(kernel: np.ndarray, bias: np.ndarray) -> None:
        with torch.no_grad():
            dense[-1].weight.copy_(torch.from_numpy(kernel.T))
            dense[-1].bias.copy_(torch.from_numpy(bias))

    def decay_lr(factor: float) -> None:
        current["optimizer"].update_lr(decay_factor=factor)

    def predict() -> np.ndarray:
        with torch.no_grad():
            if task.model == "neumf":
                return model(torch.from_numpy(task.test["users"]),
                             torch.from_numpy(task.test["items"])).numpy()
            return model(torch.from_numpy(task.test["features"]))[:, 0].numpy()

    return Trainer(begin, step, reset_head, decay_lr, predict)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(task: Task, weights: dict[str, np.ndarray]) -> Trainer:
    import keras
    import tensorflow as tf

    import xrisk.tensorflow as xr

    class NeuMF(keras.Model):
        """GMF + MLP towers over user and item embeddings, one linear output."""

        def __init__(self, num_users: int, num_items: int, factors: int, h1: int, h2: int):
            super().__init__()
            self.gmf_user = keras.layers.Embedding(num_users, factors)
            self.gmf_item = keras.layers.Embedding(num_items, factors)
            self.mlp_user = keras.layers.Embedding(num_users, factors)
            self.mlp_item = keras.layers.Embedding(num_items, factors)
            self.mlp = keras.Sequential([keras.layers.Dense(h1, activation="relu"),
                                         keras.layers.Dense(h2, activation="relu")])
            self.out = keras.layers.Dense(1)

        def call(self, inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
            users, items = inputs
            gmf = self.gmf_user(users)[:, None, :] * self.gmf_item(items)  # (Q, C, f)
            item = self.mlp_item(items)
            user = tf.broadcast_to(self.mlp_user(users)[:, None, :], tf.shape(item))
            mlp = self.mlp(tf.concat([user, item], axis=-1))
            return self.out(tf.concat([gmf, mlp], axis=-1))[..., 0]  # (Q, C)

    s = task.sizes
    if task.model == "neumf":
        model = NeuMF(task.num_queries, task.num_items, s["factors"], s["h1"], s["h2"])
        model((tf.zeros((1,), tf.int64), tf.zeros((1, 1), tf.int64)))  # build the weights
        for name in ("gmf_user", "gmf_item", "mlp_user", "mlp_item"):
            getattr(model, name).set_weights([weights[name]])
        model.mlp.set_weights([weights["w1"], weights["b1"], weights["w2"], weights["b2"]])
        head = model.out
    else:
        model = keras.Sequential([keras.Input((task.features.shape[1],)),
                                  keras.layers.Dense(s["h1"], activation="relu"),
                                  keras.layers.Dense(s["h2"], activation="relu"),
                                  keras.layers.Dense(1)])
        model.layers[0].set_weights([weights["w1"], weights["b1"]])
        model.layers[1].set_weights([weights["w2"], weights["b2"]])
        head = model.layers[2]
        features = tf.constant(task.features)
    head.set_weights([weights["w_out"], weights["b_out"]])

    def score(inputs: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        if task.model == "neumf":
            return model((inputs["queries"], inputs["items"]), training=training)
        rows = inputs["rows"]  # (Q, C): Sequential takes (batch, features), so flatten
        flat = model(tf.gather(features, tf.reshape(rows, (-1,))), training=training)
        return tf.reshape(flat, tf.shape(rows))

    current: dict[str, Any] = {}

    def begin(method: Method, options: dict[str, Any]) -> None:
        loss_fn = getattr(xr, method.loss)(**options)
        optimizer = getattr(xr, method.optimizer)(model.trainable_variables,
                                                  **method.optimizer_options)
        pointwise = method.loss == "CrossEntropyLoss"

        @tf.function
        def train_step(batch: dict[str, Any]) -> tf.Tensor:
            with tf.GradientTape() as tape:
                scores = score(batch["model"], training=True)
                if pointwise:
                    scores = tf.reshape(scores, (-1,))
                loss = loss_fn(scores, **batch["loss"])
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        current.update(loss_fn=loss_fn, optimizer=optimizer, train_step=train_step)

    def step(batch: dict[str, Any]) -> Any:
        return current["train_step"](tf.nest.map_structure(tf.constant, batch))

    def reset_head(kernel: np.ndarray, bias: np.ndarray) -> None:
        head.set_weights([kernel, bias])

    def decay_lr(factor: float) -> None:
        current["optimizer"].update_lr(decay_factor=factor)

    def predict() -> np.ndarray:
        if task.model == "neumf":
            return model((tf.constant(task.test["users"]), tf.constant(task.test["items"])),
                         training=False).numpy()
        return model(tf.constant(task.test["features"]), training=False).numpy()[:, 0]

    return Trainer(begin, step, reset_head, decay_lr, predict)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(task: Task, weights: dict[str, np.ndarray]) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    def neumf(params: dict[str, jax.Array], users: jax.Array, items: jax.Array) -> jax.Array:
        gmf = params["gmf_user"][users][:, None, :] * params["gmf_item"][items]  # (Q, C, f)
        item = params["mlp_item"][items]
        user = jnp.broadcast_to(params["mlp_user"][users][:, None, :], item.shape)
        hidden = jax.nn.relu(jnp.concatenate([user, item], axis=-1) @ params["w1"]
                             + params["b1"])
        hidden = jax.nn.relu(hidden @ params["w2"] + params["b2"])
        both = jnp.concatenate([gmf, hidden], axis=-1)
        return (both @ params["w_out"] + params["b_out"])[..., 0]  # (Q, C)

    def mlp(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        hidden = jax.nn.relu(hidden @ params["w2"] + params["b2"])
        return (hidden @ params["w_out"] + params["b_out"])[..., 0]

    features = None if task.features is None else jnp.asarray(task.features)

    def score(params: Any, inputs: dict[str, jax.Array]) -> jax.Array:
        if task.model == "neumf":
            return neumf(params, inputs["queries"], inputs["items"])
        return mlp(params, features[inputs["rows"]])

    carry: dict[str, Any] = {"params": {k: jnp.asarray(v) for k, v in weights.items()}}

    def begin(method: Method, options: dict[str, Any]) -> None:
        loss_fn = getattr(xr, method.loss)(**options)
        optimizer = getattr(xr, method.optimizer)(**method.optimizer_options)
        pointwise = method.loss == "CrossEntropyLoss"

        def objective(params: Any, state: Any, batch: dict[str, Any]) -> Any:
            scores = score(params, batch["model"])
            if pointwise:
                scores = jnp.reshape(scores, (-1,))
            return loss_fn.apply(state, scores, **batch["loss"])

        # Parameters, optimizer state and loss state are donated: XLA updates them in place.
        @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
        def train_step(params: Any, opt_state: Any, state: Any, batch: Any) -> Any:
            (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
                params, state, batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, state, loss

        carry.update(optimizer=optimizer, train_step=train_step, state=loss_fn.init(),
                     opt_state=optimizer.init(carry["params"]))

    def step(batch: dict[str, Any]) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = carry["train_step"](
            carry["params"], carry["opt_state"], carry["state"], batch)
        return loss

    def reset_head(kernel: np.ndarray, bias: np.ndarray) -> None:
        carry["params"] = {**carry["params"], "w_out": jnp.asarray(kernel),
                           "b_out": jnp.asarray(bias)}

    def decay_lr(factor: float) -> None:
        carry["opt_state"] = carry["optimizer"].update_lr(carry["opt_state"], factor)

    def predict() -> np.ndarray:
        params = carry["params"]
        if task.model == "neumf":
            return np.asarray(neumf(params, jnp.asarray(task.test["users"]),
                                    jnp.asarray(task.test["items"])))
        return np.asarray(mlp(params, jnp.asarray(task.test["features"])))

    return Trainer(begin, step, reset_head, decay_lr, predict)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- progress, reporting, command line ------------------------------------------------------
def progress(iterable: Iterable[int], label: str) -> Any:
    if tqdm is None:
        return _PlainProgress(iterable, label)
    return tqdm(iterable, desc=label, unit="epoch", leave=False)


def format_table(results: dict[tuple[str, str], dict[str, Any]], metrics: Sequence[str]) -> str:
    """Text table: mean +- std over the seeds of every metric, per framework x method, and
    the mean seconds per epoch of the main stage (its first epoch, which traces or compiles
    the step, left out)."""
    head = f"{'framework':<12}{'method':<12}" + "".join(f"{m:>20}" for m in metrics)
    lines = [head + f"{'s/epoch':>10}", "-" * (len(head) + 10)]
    for (framework, method), row in results.items():
        cells = "".join(f"{row[m]:>11.4f} +- {row[m + ' std']:.4f}" for m in metrics)
        lines.append(f"{framework:<12}{method:<12}{cells}{row['epoch seconds']:>10.3f}")
    return "\n".join(lines)


def compare(results: dict[tuple[str, str], dict[str, Any]], frameworks: Sequence[str],
            comparisons: Sequence[tuple[str, str, str]]) -> list[str]:
    """The paper's claims, as measured here (printed, never asserted): for each ``(method,
    baseline, metric)`` whether the method's mean beats the baseline's."""
    lines = []
    for framework in frameworks:
        for method, baseline, metric in comparisons:
            if (framework, method) not in results or (framework, baseline) not in results:
                continue
            a, b = results[framework, method][metric], results[framework, baseline][metric]
            verdict = "higher" if a > b else "not higher"
            lines.append(f"{framework:<10} {method} vs {baseline}, {metric}: {a:.4f} vs "
                         f"{b:.4f} -> {method} {verdict} (measured)")
    return lines


def add_common_options(parser: argparse.ArgumentParser, methods: Sequence[str], epochs: int,
                       warm_up_epochs: int) -> None:
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--methods", default=",".join(methods),
                        help=f"comma-separated subset of {','.join(methods)}")
    parser.add_argument("--epochs", type=int, default=epochs,
                        help="epochs of every method (after the warm-up)")
    parser.add_argument("--warm-up-epochs", type=int, default=warm_up_epochs,
                        help="ListwiseCE epochs before SONG / K-SONG (0: no warm-up)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="number of seeds (0, 1, ...): mean +- std over them")


def check_common_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                         methods: Sequence[str]) -> None:
    for option, allowed in (("frameworks", FRAMEWORKS), ("methods", tuple(methods))):
        chosen = [name.strip() for name in getattr(args, option).split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from {allowed}")
        setattr(args, option, chosen)
    for option, low in (("epochs", 1), ("seeds", 1), ("warm_up_epochs", 0)):
        value = getattr(args, option)
        if value < low:
            parser.error(f"--{option.replace('_', '-')}: got {value}; expected at least {low}")


def run(args: argparse.Namespace, task: Task, methods: dict[str, Method],
        ) -> dict[tuple[str, str], dict[str, Any]]:
    """Train every requested framework x method x seed; print a line per row, return them.

    Each row holds every metric's mean and ``"<metric> std"`` over the seeds, the per-seed
    values (``"<metric> runs"``), the test scores of the last seed (``"scores"``) and the mean
    seconds per epoch of the main stage (``"epoch seconds"``).
    """
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for framework in args.frameworks:
        for name in args.methods:
            method = methods[name]
            runs: list[dict[str, float]] = []
            epoch_seconds: list[float] = []
            start = time.perf_counter()
            for seed in range(args.seeds):
                trainer = TRAINERS[framework](task, initial_weights(task, seed))
                scores, seconds = train(trainer, task, method, epochs=args.epochs,
                                        warm_up_epochs=args.warm_up_epochs, seed=seed,
                                        label=f"{framework:<10} {name:<10} seed {seed}")
                runs.append(task.evaluate(scores))
                # The first epoch traces / compiles the step (TensorFlow, JAX): left out.
                epoch_seconds.extend(seconds[1:] if len(seconds) > 1 else seconds)
            row: dict[str, Any] = {"scores": scores,
                                   "epoch seconds": float(np.mean(epoch_seconds))}
            for metric in runs[0]:
                values = np.array([r[metric] for r in runs])
                row[metric], row[metric + " std"] = float(values.mean()), float(values.std())
                row[metric + " runs"] = values.tolist()
            results[framework, name] = row
            shown = "  ".join(f"{m} {row[m]:.4f} +- {row[m + ' std']:.4f}" for m in runs[0])
            print(f"{framework:<10} {name:<10} test {shown}  ({args.seeds} seeds, "
                  f"{time.perf_counter() - start:.1f} s)", flush=True)
    return results


def report(results: dict[tuple[str, str], dict[str, Any]], metrics: Sequence[str],
           frameworks: Sequence[str], comparisons: Sequence[tuple[str, str, str]]) -> None:
    """Print the table and the paper's comparisons as measured."""
    print()
    print(format_table(results, metrics))
    lines = compare(results, frameworks, comparisons)
    if lines:
        print()
        print("The paper's comparison, as measured here (not asserted):")
        print("\n".join(lines))
