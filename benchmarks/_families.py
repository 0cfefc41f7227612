"""The training-step workloads the benchmarks share: one per registered xrisk loss, each with
its optimizer and, where LibAUC 2.0.1 has the family, LibAUC's loss and optimizer on the
same model, the same batches and the same defaults.

A workload is ``Family.build(impl, batch_size, lib, device=..., dtype=..., scale=...)`` ->
:class:`Built`: ``step(batch)`` runs one full training step (model forward, loss,
``zero_grad``, backward, optimizer step) and ``batches`` are pre-built inputs on the device.
Both implementations start from the same model (the same seed) and see the same batches.

What "batch size" B means per kind of workload, and the model at ``scale="toy"`` (the
default: a few thousand parameters, so a step measures the fixed per-step cost of the loss,
its checks, the adapter and the optimizer):

- binary, multilabel: B examples (20 % positives, first, as DualSampler lays them out), an
  MLP 64-32-1 (or 64-32-10 for ten labels), distinct dataset indices out of 10,000;
- ranking: B // 8 queries x (10 positives + 100 sampled negatives), a linear scorer over
  16 features per (query, item) pair;
- contrastive / bimodal: B pairs of views, an MLP encoder 64-32-32 (two for bimodal);
- bags (MIDAM): B // 4 bags x 8 instances, an MLP 16-16-1 per instance (attention: a second
  head for the attention logits);
- extreme (SCENT): B examples, a linear layer 64 -> 200 classes, the logit differences
  ``z - z_label``.

LibAUC's losses take what its own examples give them: the logits for CrossEntropy and Focal,
probabilities for the AUC families, the bag pooling (``mean exp(phi / tau)``, or ``(sn, sd)``)
computed by the caller for MIDAM, a ``batch`` dict for the ranking losses.

``scale="user"`` gives every workload a model of about a million parameters, as users train
(the same model for both libraries; hidden width :data:`USER_WIDTH`): binary, multilabel,
extreme and bags an MLP ``in -> 1024 -> 1024 -> out`` (1.07-1.32 M), ranking the same MLP as
the scorer of every (query, item) pair (1.07 M), contrastive an encoder
``64 -> 1024 -> 1024 -> 128`` shared by both views (1.25 M), bimodal two encoders
``64 -> 1024 -> 512 -> 128`` (0.66 M each, 1.31 M together). The batches are the same at
both scales.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import xrisk.torch as xr

NUM_SAMPLES = 10_000
NUM_LABELS = 10
POSITIVES, NEGATIVES, RANK_FEATURES = 10, 100, 16
NUM_QUERIES, NUM_ITEMS = 5_000, 20_000
INSTANCES, BAG_FEATURES = 8, 16
NUM_CLASSES = 200
MIDAM_TAU = 0.1
NUM_BATCHES = 8
#: hidden width of the ``scale="user"`` models (about 1 M parameters per workload)
USER_WIDTH = 1024
#: projection width of the ``scale="user"`` contrastive encoders
USER_EMBEDDING = 128
SCALES = ("toy", "user")

Batch = dict[str, torch.Tensor]
Step = Callable[[Batch], None]


@dataclass
class Built:
    """One implementation of a workload, ready to step."""

    step: Step
    batches: list[Batch]
    model: torch.nn.Module
    loss: Any
    optimizer: Any
    #: the forward pass and the loss call: ``batch -> loss tensor`` (phases split by profilers)
    loss_call: Callable[[Batch], torch.Tensor]
    #: the loss's constructor keywords (xrisk: the same for every adapter)
    loss_kwargs: dict[str, Any]
    #: the same training step with a free loss (:func:`free_loss`: the sum of the model's
    #: outputs) in place of the family's: the model's forward and backward and this
    #: implementation's optimizer, the part of the step no loss implementation can remove
    free_step: Step


@dataclass(frozen=True)
class Family:
    """One workload: an xrisk loss + optimizer and, if LibAUC has it, LibAUC's pair."""

    name: str          # "AP + SOAP"
    loss: str          # key of xrisk.LOSSES
    optimizer: str     # key of xrisk.OPTIMIZERS
    kind: str          # binary, multilabel, ranking, contrastive, bimodal, bags, extreme
    libauc: str | None  # LibAUC's "Loss + Optimizer", None when LibAUC lacks the loss
    nearest: str | None = None  # the family a LibAUC-less loss is compared with

    def build(self, impl: str, batch_size: int, lib: Any = None, *, seed: int = 0,
              device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
              scale: str = "toy") -> Built:
        """``impl`` "xrisk" or "libauc" (needs ``lib``, the loaded LibAUC); ``scale`` "toy"
        (a few thousand parameters) or "user" (about 1 M, see the module's docstring)."""
        if impl == "libauc" and (self.libauc is None or lib is None):
            raise ValueError(f"{self.name}: no LibAUC counterpart to build "
                             f"(libauc={self.libauc!r}, lib given: {lib is not None})")
        if scale not in SCALES:
            raise ValueError(f"{self.name}: scale={scale!r}; expected one of {SCALES}")
        data = KINDS[self.kind](batch_size, seed, torch.device(device), dtype)
        if scale == "user":
            data.model = USER_MODELS[self.kind](seed, torch.device(device), dtype)
        model = copy.deepcopy(data.model)
        builder = _XRISK[self.loss] if impl == "xrisk" else _LIBAUC[self.loss]
        loss_fn, optimizer, call, kwargs = builder(model, data, lib, torch.device(device), dtype)

        def step(batch: Batch) -> None:
            loss = call(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        # The model's outputs as the xrisk workload passes them to its loss, for both
        # implementations (LibAUC's MIDAM pooling, done by its caller, is loss work here).
        outputs = _XRISK[self.loss].call  # type: ignore[attr-defined]

        def free_step(batch: Batch) -> None:
            loss = outputs(free_loss, model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return Built(step, data.batches, model, loss_fn, optimizer,
                     lambda batch: call(model, batch), kwargs, free_step)


# ---------------------------------------------------------------------------------------------
# data and models per kind
# ---------------------------------------------------------------------------------------------
@dataclass
class Data:
    model: torch.nn.Module
    batches: list[Batch]
    batch_size: int
    num_samples: int


def _mlp(*sizes: int, seed: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device=device, dtype=dtype)


def _tensor(a: np.ndarray, device: torch.device, dtype: torch.dtype | None = None
            ) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(a))
    if dtype is not None and t.is_floating_point():
        t = t.to(dtype)
    return t.to(device)


def _binary(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype) -> Data:
    rng = np.random.default_rng(seed)
    num_pos = max(1, round(0.2 * batch_size))
    labels = np.zeros(batch_size, np.float32)
    labels[:num_pos] = 1
    batches = []
    for _ in range(NUM_BATCHES):
        batches.append({
            "x": _tensor(rng.normal(size=(batch_size, 64)).astype(np.float32), device, dtype),
            "y": _tensor(labels.copy(), device, dtype),
            "index": _tensor(rng.choice(NUM_SAMPLES, batch_size, replace=False), device)})
    return Data(_mlp(64, 32, 1, seed=seed, device=device, dtype=dtype), batches, batch_size,
                NUM_SAMPLES)


def _multilabel(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype) -> Data:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(NUM_BATCHES):
        labels = (rng.random((batch_size, NUM_LABELS)) < 0.2).astype(np.float32)
        labels[0], labels[1] = 1, 0  # every label has a positive and a negative
        batches.append({
            "x": _tensor(rng.normal(size=(batch_size, 64)).astype(np.float32), device, dtype),
            "y": _tensor(labels, device, dtype),
            "index": _tensor(rng.choice(NUM_SAMPLES, batch_size, replace=False), device)})
    return Data(_mlp(64, 32, NUM_LABELS, seed=seed, device=device, dtype=dtype), batches,
                batch_size, NUM_SAMPLES)


def _ranking(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype) -> Data:
    rng = np.random.default_rng(seed)
    queries = max(2, batch_size // 8)
    p, m = POSITIVES, NEGATIVES
    batches = []
    for _ in range(NUM_BATCHES):
        relevance = rng.integers(1, 6, size=(queries, p)).astype(np.float32)
        ranked = -np.sort(-relevance, axis=1)
        ideal = ((2.0 ** ranked - 1) / np.log2(np.arange(2, p + 2))).sum(axis=1)
        query = rng.choice(NUM_QUERIES, queries, replace=False)
        # interaction id of (query, positive): distinct, < NUM_SAMPLES
        interaction = rng.choice(NUM_SAMPLES, queries * p, replace=False).reshape(queries, p)
        rating = np.concatenate([relevance, np.zeros((queries, m), np.float32)], axis=1)
        batches.append({
            "x": _tensor(rng.normal(size=(queries, p + m, RANK_FEATURES)).astype(np.float32),
                         device, dtype),
            "relevance": _tensor(relevance, device, dtype),
            "rating": _tensor(rating, device, dtype),
            "query": _tensor(query, device),
            "interaction": _tensor(interaction, device),
            "user_item_id": _tensor(np.concatenate(
                [interaction, np.zeros((queries, m), np.int64)], axis=1), device),
            "num_relevant": _tensor(np.full(queries, float(p), np.float32), device, dtype),
            "ideal_dcg": _tensor(ideal.astype(np.float32), device, dtype)})
    return Data(_mlp(RANK_FEATURES, 1, seed=seed, device=device, dtype=dtype), batches,
                batch_size, NUM_SAMPLES)


def _contrastive(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype,
                 names: str = "a") -> Data:
    """Pairs of views; one encoder per name ("a" for both views of a contrastive pair, "a"
    and "b" for the two modalities of a bimodal one: no encoder the step does not use)."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(NUM_BATCHES):
        x = rng.normal(size=(batch_size, 64)).astype(np.float32)
        batches.append({
            "x1": _tensor(x + 0.1 * rng.normal(size=x.shape).astype(np.float32), device, dtype),
            "x2": _tensor(x + 0.1 * rng.normal(size=x.shape).astype(np.float32), device, dtype),
            "index": _tensor(rng.choice(NUM_SAMPLES, batch_size, replace=False), device)})
    model = torch.nn.ModuleDict({
        name: _mlp(64, 32, 32, seed=seed + k, device=device, dtype=dtype)
        for k, name in enumerate(names)})
    return Data(model, batches, batch_size, NUM_SAMPLES)


def _bags(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype) -> Data:
    rng = np.random.default_rng(seed)
    bags = max(2, batch_size // 4)
    labels = np.zeros(bags, np.float32)
    labels[: max(1, bags // 2)] = 1
    batches = []
    for _ in range(NUM_BATCHES):
        batches.append({
            "x": _tensor(rng.normal(size=(bags, INSTANCES, BAG_FEATURES)).astype(np.float32),
                         device, dtype),
            "y": _tensor(labels.copy(), device, dtype),
            "index": _tensor(rng.choice(NUM_SAMPLES, bags, replace=False), device)})
    return Data(_mlp(BAG_FEATURES, 16, 2, seed=seed, device=device, dtype=dtype), batches,
                batch_size, NUM_SAMPLES)


def _extreme(batch_size: int, seed: int, device: torch.device, dtype: torch.dtype) -> Data:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(NUM_BATCHES):
        batches.append({
            "x": _tensor(rng.normal(size=(batch_size, 64)).astype(np.float32), device, dtype),
            "target": _tensor(rng.integers(0, NUM_CLASSES, batch_size), device),
            "index": _tensor(rng.choice(NUM_SAMPLES, batch_size, replace=False), device)})
    return Data(_mlp(64, NUM_CLASSES, seed=seed, device=device, dtype=dtype), batches,
                batch_size, NUM_SAMPLES)


KINDS: dict[str, Callable[[int, int, torch.device, torch.dtype], Data]] = {
    "binary": _binary, "multilabel": _multilabel, "ranking": _ranking,
    "contrastive": _contrastive,
    "bimodal": lambda *args: _contrastive(*args, names="ab"),
    "bags": _bags, "extreme": _extreme}


def _user_mlp(inputs: int, outputs: int) -> Callable[[int, torch.device, torch.dtype],
                                                      torch.nn.Module]:
    def make(seed: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        return _mlp(inputs, USER_WIDTH, USER_WIDTH, outputs, seed=seed, device=device,
                    dtype=dtype)
    return make


def _user_encoders(hidden: tuple[int, int], names: str
                   ) -> Callable[[int, torch.device, torch.dtype], torch.nn.Module]:
    """One encoder per name ("a" encodes both views of a contrastive pair, "a" and "b" the
    two modalities of a bimodal one)."""
    def make(seed: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        return torch.nn.ModuleDict({
            name: _mlp(64, *hidden, USER_EMBEDDING, seed=seed + k, device=device, dtype=dtype)
            for k, name in enumerate(names)})
    return make


#: the ``scale="user"`` model of each kind (about 1 M trained parameters)
USER_MODELS: dict[str, Callable[[int, torch.device, torch.dtype], torch.nn.Module]] = {
    "binary": _user_mlp(64, 1), "multilabel": _user_mlp(64, NUM_LABELS),
    "ranking": _user_mlp(RANK_FEATURES, 1), "bags": _user_mlp(BAG_FEATURES, 2),
    "extreme": _user_mlp(64, NUM_CLASSES),
    "contrastive": _user_encoders((USER_WIDTH, USER_WIDTH), "a"),
    "bimodal": _user_encoders((USER_WIDTH, USER_WIDTH // 2), "ab")}


# ---------------------------------------------------------------------------------------------
# what the model gives each loss
# ---------------------------------------------------------------------------------------------
def _probabilities(model: Any, b: Batch) -> torch.Tensor:
    return torch.sigmoid(model(b["x"])).squeeze(-1)


def _logits(model: Any, b: Batch) -> torch.Tensor:
    return model(b["x"]).squeeze(-1)


def _rank_scores(model: Any, b: Batch) -> torch.Tensor:
    return model(b["x"]).squeeze(-1)  # (Q, P + M)


def _views(model: Any, b: Batch, bimodal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return model["a"](b["x1"]), model["b" if bimodal else "a"](b["x2"])


def _instances(model: Any, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(b["x"])  # (bags, K, 2): instance score, attention logit
    return out[..., 0], out[..., 1]


def _logit_differences(model: Any, b: Batch) -> torch.Tensor:
    z = model(b["x"])
    return z - z.gather(1, b["target"][:, None])


def free_loss(*args: Any, **kwargs: Any) -> torch.Tensor:
    """A loss that costs (nearly) nothing: the sum of every model output among its
    arguments (the tensors that need a gradient), so that backward runs through the whole
    model as a real loss's does. The floor of a training step."""
    outputs = [a for a in (*args, *kwargs.values())
               if isinstance(a, torch.Tensor) and a.requires_grad]
    return torch.stack([a.sum() for a in outputs]).sum()


# ---------------------------------------------------------------------------------------------
# xrisk builders: (model, data, lib, device, dtype) -> (loss, optimizer, call)
# ---------------------------------------------------------------------------------------------
Builder = Callable[[torch.nn.Module, Data, Any, torch.device, torch.dtype],
                   tuple[Any, Any, Callable[[Any, Batch], torch.Tensor], dict[str, Any]]]


def _x(loss_name: str, optimizer_name: str, loss_kwargs: Callable[[Data], dict],
       call: Callable[[Any, Any, Batch], torch.Tensor], *, with_loss: bool = False,
       optimizer_kwargs: dict | None = None) -> Builder:
    def build(model: torch.nn.Module, data: Data, lib: Any, device: torch.device,
              dtype: torch.dtype) -> tuple[Any, Any, Callable[[Any, Batch], torch.Tensor],
                                           dict[str, Any]]:
        ctor = loss_kwargs(data)
        loss_fn = getattr(xr, loss_name)(**ctor, device=device, dtype=dtype)
        cls = getattr(xr, optimizer_name)
        kwargs = dict(optimizer_kwargs or {})
        optimizer = cls(model.parameters(), loss_fn, **kwargs) if with_loss \
            else cls(list(model.parameters()) + list(loss_fn.parameters()), **kwargs)
        return loss_fn, optimizer, lambda m, b: call(loss_fn, m, b), ctor
    build.call = call  # type: ignore[attr-defined]  # (loss, model, batch) -> loss: free_step
    return build


def _n(data: Data) -> dict:
    return {"num_samples": data.num_samples}


_XRISK: dict[str, Builder] = {
    "APLoss": _x("APLoss", "SOAP", _n, lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "AUCMLoss": _x("AUCMLoss", "PESG", lambda d: {},
                   lambda f, m, b: f(_probabilities(m, b), b["y"]), with_loss=True),
    "CompositionalAUCLoss": _x("CompositionalAUCLoss", "PDSCA", lambda d: {},
                               lambda f, m, b: f(_probabilities(m, b), b["y"]), with_loss=True),
    "pAUC_CVaR_Loss": _x("pAUC_CVaR_Loss", "SOPA", _n,
                         lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "pAUC_DRO_Loss": _x("pAUC_DRO_Loss", "SOPAs", _n,
                        lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "tpAUC_KL_Loss": _x("tpAUC_KL_Loss", "SOTAs", _n,
                        lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "tpAUC_CVaR_Loss": _x("tpAUC_CVaR_Loss", "STACO", _n,
                          lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "PairwiseAUCLoss": _x("PairwiseAUCLoss", "Adam", lambda d: {},
                          lambda f, m, b: f(_probabilities(m, b), b["y"])),
    "CrossEntropyLoss": _x("CrossEntropyLoss", "Adam", lambda d: {},
                           lambda f, m, b: f(_logits(m, b), b["y"])),
    "FocalLoss": _x("FocalLoss", "Adam", lambda d: {}, lambda f, m, b: f(_logits(m, b), b["y"])),
    "meanAveragePrecisionLoss": _x(
        "meanAveragePrecisionLoss", "SOAP",
        lambda d: {"num_labels": NUM_LABELS, "num_samples": d.num_samples},
        lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"], b["index"])),
    "MultiLabelAUCMLoss": _x("MultiLabelAUCMLoss", "PESG", lambda d: {"num_labels": NUM_LABELS},
                             lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"]),
                             with_loss=True),
    "MultiLabelpAUCLoss": _x(
        "MultiLabelpAUCLoss", "SOPAs",
        lambda d: {"num_labels": NUM_LABELS, "num_samples": d.num_samples},
        lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"], b["index"])),
    "NDCGLoss": _x(
        "NDCGLoss", "SONG",
        lambda d: {"num_interactions": d.num_samples, "num_queries": NUM_QUERIES,
                   "num_items": NUM_ITEMS},
        lambda f, m, b: f(_rank_scores(m, b), relevance=b["relevance"], query=b["query"],
                          interaction=b["interaction"], num_relevant=b["num_relevant"],
                          ideal_dcg=b["ideal_dcg"]),
        optimizer_kwargs={"learning_rate": 1e-3}),
    "ListwiseCELoss": _x(
        "ListwiseCELoss", "SONG", lambda d: {"num_interactions": d.num_samples},
        lambda f, m, b: f(_rank_scores(m, b), interaction=b["interaction"]),
        optimizer_kwargs={"learning_rate": 1e-3}),
    "GlobalContrastiveLoss": _x(
        "GlobalContrastiveLoss", "LARS", _n,
        lambda f, m, b: f(*_views(m, b, False), b["index"]),
        optimizer_kwargs={"learning_rate": 0.1}),
    "InfoNCELoss": _x("InfoNCELoss", "LARS", lambda d: {},
                      lambda f, m, b: f(*_views(m, b, False)),
                      optimizer_kwargs={"learning_rate": 0.1}),
    "BimodalContrastiveLoss": _x(
        "BimodalContrastiveLoss", "LARS", _n,
        lambda f, m, b: f(*_views(m, b, True), b["index"]),
        optimizer_kwargs={"learning_rate": 0.1}),
    "MIDAM_softmax_pooling_loss": _x(
        "MIDAM_softmax_pooling_loss", "MIDAM", lambda d: {**_n(d), "tau": MIDAM_TAU},
        lambda f, m, b: f(_instances(m, b)[0], b["y"], b["index"]), with_loss=True,
        optimizer_kwargs={"learning_rate": 0.1}),
    "MIDAM_attention_pooling_loss": _x(
        "MIDAM_attention_pooling_loss", "MIDAM", _n,
        lambda f, m, b: f(*_instances(m, b), b["y"], b["index"]), with_loss=True,
        optimizer_kwargs={"learning_rate": 0.1}),
    "EntLossClassification": _x(
        "EntLossClassification", "SGD", _n,
        lambda f, m, b: f(_logit_differences(m, b), b["index"]),
        optimizer_kwargs={"learning_rate": 0.1}),
}


# ---------------------------------------------------------------------------------------------
# LibAUC builders (its defaults, device given; its optimizers take the model's parameters and,
# where they own auxiliaries, the loss)
# ---------------------------------------------------------------------------------------------
def _l(make: Callable[[Any, Data, torch.device], Any],
       optimizer: Callable[[Any, list, Any, torch.device], Any],
       call: Callable[[Any, Any, Batch], torch.Tensor]) -> Builder:
    def build(model: torch.nn.Module, data: Data, lib: Any, device: torch.device,
              dtype: torch.dtype) -> tuple[Any, Any, Callable[[Any, Batch], torch.Tensor],
                                           dict[str, Any]]:
        loss_fn = make(lib.losses, data, device)
        if isinstance(loss_fn, torch.nn.Module):
            loss_fn.to(device)
        opt = optimizer(lib.optimizers, list(model.parameters()), loss_fn, device)
        return loss_fn, opt, lambda m, b: call(loss_fn, m, b), {}
    return build


def _aux(loss_fn: Any) -> list:
    """LibAUC's auxiliaries a and b (alpha is stepped by the optimizer without a gradient)."""
    return [t for t in (getattr(loss_fn, "a", None), getattr(loss_fn, "b", None))
            if isinstance(t, torch.Tensor)]


def _rank_batch(b: Batch) -> dict:
    return {"rating": b["rating"], "user_id": b["query"], "user_item_id": b["user_item_id"],
            "num_pos_items": b["num_relevant"], "ideal_dcg": b["ideal_dcg"]}


def _libauc_midam_softmax(f: Any, m: Any, b: Batch) -> torch.Tensor:
    pooled = torch.exp(_instances(m, b)[0] / MIDAM_TAU).mean(dim=1)  # MIL_sampling(mode='exp')
    return f(y_pred=pooled, y_true=b["y"], index=b["index"])


def _libauc_midam_attention(f: Any, m: Any, b: Batch) -> torch.Tensor:
    phi, omega = _instances(m, b)
    w = torch.exp(omega)
    return f(y_pred=((w * phi).mean(dim=1), w.mean(dim=1)), y_true=b["y"], index=b["index"])


_LIBAUC: dict[str, Builder] = {
    "APLoss": _l(lambda L, d, dev: L.APLoss(data_len=d.num_samples, device=dev),
                 lambda O, p, f, dev: O.SOAP(p, lr=1e-3, device=dev),
                 lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "AUCMLoss": _l(lambda L, d, dev: L.AUCMLoss(device=dev),
                   lambda O, p, f, dev: O.PESG(p, loss_fn=f, device=dev, verbose=False),
                   lambda f, m, b: f(_probabilities(m, b), b["y"])),
    "CompositionalAUCLoss": _l(
        lambda L, d, dev: L.CompositionalAUCLoss(device=dev),
        lambda O, p, f, dev: O.PDSCA(p, loss_fn=f, device=dev, verbose=False),
        lambda f, m, b: f(_probabilities(m, b), b["y"])),
    "pAUC_CVaR_Loss": _l(
        lambda L, d, dev: L.pAUC_CVaR_Loss(data_len=d.num_samples, pos_len=d.num_samples,
                                           device=dev),
        lambda O, p, f, dev: O.SOPA(p, lr=1e-3, device=dev),
        lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "pAUC_DRO_Loss": _l(lambda L, d, dev: L.pAUC_DRO_Loss(data_len=d.num_samples, device=dev),
                        lambda O, p, f, dev: O.SOPAs(p, lr=1e-3, device=dev, verbose=False),
                        lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "tpAUC_KL_Loss": _l(lambda L, d, dev: L.tpAUC_KL_Loss(data_len=d.num_samples, device=dev),
                        lambda O, p, f, dev: O.SOTAs(p, lr=1e-3, device=dev),
                        lambda f, m, b: f(_probabilities(m, b), b["y"], b["index"])),
    "PairwiseAUCLoss": _l(lambda L, d, dev: L.PairwiseAUCLoss(),
                          lambda O, p, f, dev: O.Adam(p, lr=1e-3, device=dev, verbose=False),
                          lambda f, m, b: f(_probabilities(m, b), b["y"])),
    "CrossEntropyLoss": _l(lambda L, d, dev: L.CrossEntropyLoss(),
                           lambda O, p, f, dev: O.Adam(p, lr=1e-3, device=dev, verbose=False),
                           lambda f, m, b: f(_logits(m, b), b["y"])),
    "FocalLoss": _l(lambda L, d, dev: L.FocalLoss(device=dev),
                    lambda O, p, f, dev: O.Adam(p, lr=1e-3, device=dev, verbose=False),
                    lambda f, m, b: f(_logits(m, b), b["y"])),
    "meanAveragePrecisionLoss": _l(
        lambda L, d, dev: L.meanAveragePrecisionLoss(data_len=d.num_samples,
                                                     num_labels=NUM_LABELS, device=dev),
        lambda O, p, f, dev: O.SOAP(p, lr=1e-3, device=dev),
        lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"], b["index"])),
    "MultiLabelAUCMLoss": _l(
        lambda L, d, dev: L.MultiLabelAUCMLoss(num_labels=NUM_LABELS, device=dev),
        lambda O, p, f, dev: O.PESG(p, loss_fn=f, device=dev, verbose=False),
        lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"])),
    "MultiLabelpAUCLoss": _l(
        lambda L, d, dev: L.MultiLabelpAUCLoss(mode="1w", num_labels=NUM_LABELS,
                                               data_len=d.num_samples, device=dev),
        lambda O, p, f, dev: O.SOPAs(p, lr=1e-3, device=dev, verbose=False),
        lambda f, m, b: f(torch.sigmoid(m(b["x"])), b["y"], b["index"])),
    "NDCGLoss": _l(
        lambda L, d, dev: L.NDCGLoss(N=d.num_samples, num_user=NUM_QUERIES, num_item=NUM_ITEMS,
                                     num_pos=POSITIVES, device=dev),
        lambda O, p, f, dev: O.SONG(p, lr=1e-3, device=dev),
        lambda f, m, b: f(_rank_scores(m, b), _rank_batch(b))),
    "ListwiseCELoss": _l(
        lambda L, d, dev: L.ListwiseCELoss(N=d.num_samples, num_pos=POSITIVES, gamma=0.9,
                                           device=dev),
        lambda O, p, f, dev: O.SONG(p, lr=1e-3, device=dev),
        lambda f, m, b: f(_rank_scores(m, b), _rank_batch(b))),
    "GlobalContrastiveLoss": _l(
        lambda L, d, dev: L.GCLoss_v1(N=d.num_samples, device=dev),
        lambda O, p, f, dev: O.LARS(p, lr=0.1),
        lambda f, m, b: f(*_views(m, b, False), b["index"])),
    "BimodalContrastiveLoss": _l(
        lambda L, d, dev: L.GCLoss_v2(N=d.num_samples),
        lambda O, p, f, dev: O.LARS(p, lr=0.1),
        lambda f, m, b: f(*_views(m, b, True), b["index"])[0]),  # (loss, temperatures)
    "MIDAM_softmax_pooling_loss": _l(
        lambda L, d, dev: L.MIDAM_softmax_pooling_loss(data_len=d.num_samples, tau=MIDAM_TAU,
                                                       device=dev),
        lambda O, p, f, dev: O.MIDAM(p + _aux(f), loss_fn=f, lr=0.1, device=dev),
        _libauc_midam_softmax),
    "MIDAM_attention_pooling_loss": _l(
        lambda L, d, dev: L.MIDAM_attention_pooling_loss(data_len=d.num_samples, device=dev),
        lambda O, p, f, dev: O.MIDAM(p + _aux(f), loss_fn=f, lr=0.1, device=dev),
        _libauc_midam_attention),
    "EntLossClassification": _l(
        lambda L, d, dev: L.EntLossClassification(data_size=d.num_samples),
        lambda O, p, f, dev: O.SCENT(p, lr=0.1),
        lambda f, m, b: f(_logit_differences(m, b), b["index"])["loss"]),
}


FAMILIES: tuple[Family, ...] = (
    Family("AP + SOAP", "APLoss", "SOAP", "binary", "APLoss + SOAP"),
    Family("AUC-M + PESG", "AUCMLoss", "PESG", "binary", "AUCMLoss + PESG"),
    Family("CompAUC + PDSCA", "CompositionalAUCLoss", "PDSCA", "binary",
           "CompositionalAUCLoss + PDSCA"),
    Family("pAUC CVaR + SOPA", "pAUC_CVaR_Loss", "SOPA", "binary", "pAUC_CVaR_Loss + SOPA"),
    Family("pAUC DRO + SOPAs", "pAUC_DRO_Loss", "SOPAs", "binary", "pAUC_DRO_Loss + SOPAs"),
    Family("tpAUC KL + SOTAs", "tpAUC_KL_Loss", "SOTAs", "binary", "tpAUC_KL_Loss + SOTAs"),
    Family("tpAUC CVaR + STACO", "tpAUC_CVaR_Loss", "STACO", "binary", None,
           nearest="tpAUC KL + SOTAs"),
    Family("pairwise AUC + Adam", "PairwiseAUCLoss", "Adam", "binary",
           "PairwiseAUCLoss + Adam"),
    Family("CE + Adam", "CrossEntropyLoss", "Adam", "binary", "CrossEntropyLoss + Adam"),
    Family("focal + Adam", "FocalLoss", "Adam", "binary", "FocalLoss + Adam"),
    Family("mAP + SOAP", "meanAveragePrecisionLoss", "SOAP", "multilabel",
           "meanAveragePrecisionLoss + SOAP"),
    Family("ML AUC-M + PESG", "MultiLabelAUCMLoss", "PESG", "multilabel",
           "MultiLabelAUCMLoss + PESG"),
    Family("ML pAUC 1w + SOPAs", "MultiLabelpAUCLoss", "SOPAs", "multilabel",
           "MultiLabelpAUCLoss + SOPAs"),
    Family("NDCG + SONG", "NDCGLoss", "SONG", "ranking", "NDCGLoss + SONG"),
    Family("listwise CE + SONG", "ListwiseCELoss", "SONG", "ranking", "ListwiseCELoss + SONG"),
    Family("SogCLR + LARS", "GlobalContrastiveLoss", "LARS", "contrastive", "GCLoss_v1 + LARS"),
    Family("InfoNCE + LARS", "InfoNCELoss", "LARS", "contrastive", None,
           nearest="SogCLR + LARS"),
    Family("bimodal + LARS", "BimodalContrastiveLoss", "LARS", "bimodal", "GCLoss_v2 + LARS"),
    Family("MIDAM softmax", "MIDAM_softmax_pooling_loss", "MIDAM", "bags",
           "MIDAM_softmax_pooling_loss + MIDAM"),
    Family("MIDAM attention", "MIDAM_attention_pooling_loss", "MIDAM", "bags",
           "MIDAM_attention_pooling_loss + MIDAM"),
    Family("SCENT + SGD", "EntLossClassification", "SGD", "extreme",
           "EntLossClassification + SCENT"),
)
BY_NAME = {f.name: f for f in FAMILIES}


def select(names: str) -> list[Family]:
    """Families by comma-separated names or registry loss names; "all" for every one."""
    if names == "all":
        return list(FAMILIES)
    out = []
    for raw in names.split(","):
        key = raw.strip()
        hit = BY_NAME.get(key) or next((f for f in FAMILIES if f.loss == key), None)
        if hit is None:
            raise SystemExit(f"unknown family {key!r}; expected one of "
                             f"{[f.name for f in FAMILIES]} or a loss name")
        out.append(hit)
    return out
