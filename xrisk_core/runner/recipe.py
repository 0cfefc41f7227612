"""The recipe: one YAML file that says what to train, how, and how to judge it.

Validated by pydantic (``pip install "xrisk[runner]"``); a bad recipe raises
:class:`RecipeError`, whose message names each bad field by its dotted path, the value
received, what is expected and the fix. Every section is optional except ``data``; unset
hyper-parameters take the method's defaults (:mod:`xrisk.runner.methods`).

>>> from xrisk.runner.recipe import parse_recipe
>>> recipe = parse_recipe({"data": {"name": "breast_cancer"}, "method": "soap"})
>>> recipe.loss.name, recipe.optimizer.name, recipe.evaluation.target
('APLoss', 'SOAP', 'ap')
>>> parse_recipe({"data": {"name": "breast_cancer"}, "method": "soap", "epochs": 0})
Traceback (most recent call last):
...
xrisk.runner.recipe.RecipeError: recipe has 1 problem:
  - epochs: received 0; expected a number >= 1. Fix: set epochs to an integer >= 1.
"""

from __future__ import annotations

import copy
import difflib
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

import xrisk
from xrisk.datasets import TOX21_TASKS
from xrisk.metrics import METRIC_NAMES

from .methods import DATA_ARGUMENTS, METHODS, defaults

__all__ = ["Recipe", "RecipeError", "load_recipe", "parse_recipe", "apply_overrides",
           "builtin_recipes", "FRAMEWORKS"]

FRAMEWORKS = ("torch", "tensorflow", "jax")
BINARY_LOSSES = tuple(name for name in (
    "CrossEntropyLoss", "FocalLoss", "AUCMLoss", "CompositionalAUCLoss", "PairwiseAUCLoss",
    "APLoss", "pAUC_CVaR_Loss", "pAUC_DRO_Loss", "tpAUC_KL_Loss", "tpAUC_CVaR_Loss"))
#: The losses of ``task: ranking`` (CrossEntropyLoss: pointwise, rated items against 1).
RANKING_LOSSES = ("NDCGLoss", "ListwiseCELoss", "CrossEntropyLoss")
#: Metrics of ranking runs: ``<name>@<K>`` per query, averaged over queries.
RANKING_METRICS = ("ndcg", "map", "precision", "recall")
#: The losses of ``task: contrastive`` (two views of each image, one encoder).
CONTRASTIVE_LOSSES = ("GlobalContrastiveLoss", "InfoNCELoss")
#: Metrics of contrastive runs: the held-out accuracy of a linear probe (logistic regression on
#: the frozen, standardized encoder features) and of a cosine k-nearest-neighbour vote.
CONTRASTIVE_METRICS = ("probe_accuracy", "knn_accuracy")
#: The data of contrastive runs: shipped digit images, an image folder or a MedMNIST npz
#: (gray or RGB; their classes judge the probe).
CONTRASTIVE_DATA = ("digits", "mnist_5k", "image_folder", "medmnist")
#: The losses of ``task: multilabel`` (every Tox21 assay or CheXpert task at once;
#: CrossEntropyLoss: the per-label binary cross-entropy, missing labels masked).
MULTILABEL_LOSSES = ("meanAveragePrecisionLoss", "MultiLabelAUCMLoss", "MultiLabelpAUCLoss",
                     "CrossEntropyLoss")
#: The data of multi-label runs.
MULTILABEL_DATA = ("tox21", "chexpert", "medmnist")
#: Tasks, and the losses each trains.
TASK_LOSSES = {"binary": BINARY_LOSSES, "ranking": RANKING_LOSSES,
               "contrastive": CONTRASTIVE_LOSSES, "multilabel": MULTILABEL_LOSSES}


class RecipeError(ValueError):
    """A recipe that cannot run; the message lists every problem with its fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The data kinds of learning to rank (``task: ranking``); the others are binary tasks.
RANKING_DATA = ("movielens", "letor")
#: Kinds read from files the recipe names (``data.path``).
_FILE_DATA = ("csv", "image_folder", "smiles_csv", "medmnist", "chexpert")
_IMAGE_DATA = ("image_folder", "chexpert")


class DataSection(_Section):
    """Which data set, how it is made binary and imbalanced, and how it is split.

    ``imratio`` subsamples the positives of the **training** split only (validation and test
    keep the natural ratio); ``limit`` keeps a random subset of that many examples (tests,
    smoke runs; the first users of movielens, queries of letor). ``tox21``: one ``task`` of
    the 12 (molecules the assay did not test are dropped), Morgan fingerprints of
    ``fingerprint_bits`` bits (RDKit). Files (``path``): ``csv`` (features and a 0/1
    ``label_column``), ``image_folder`` (class sub-folders; ``positive_classes`` names the
    positive ones of a binary task; ``grayscale: true`` reads one gray channel, the default
    of binary tasks, while contrastive runs read RGB unless it is set), ``smiles_csv``
    (``smiles_column`` and a 0/1 ``label_column``, Morgan fingerprints, ``split: scaffold``
    by default), ``medmnist`` (its own train/val/test splits; ``positive_classes`` by
    number; multi-label methods train every label of a multi-label file such as
    ChestMNIST), ``chexpert`` (a CheXpert CSV, ``task`` one of
    the five, images under ``image_root``, ``uncertain`` per-task policy; multi-label
    methods train all five; ``test_path``, a second CSV such as CheXpert's ``valid.csv``,
    is the test split; each patient stays in one split). Ranking:
    ``movielens`` (shipped, the paper's protocol) and ``letor`` (the shipped LightGBM set,
    or an svmlight ``path`` with ``qid``).
    """

    name: Literal["breast_cancer", "digits", "mnist_5k", "tox21", "csv", "image_folder",
                  "smiles_csv", "medmnist", "chexpert", "movielens", "letor"]
    positive_class: int | None = Field(None, ge=0, le=9)
    positive_classes: tuple[str, ...] | None = None
    task: str | None = None
    fingerprint_bits: int = Field(1024, ge=8)
    imratio: float | None = Field(None, gt=0, le=0.5)
    path: str | None = None
    label_column: str = "label"
    smiles_column: str = "smiles"
    split: Literal["random", "scaffold"] | None = None
    image_size: int | None = Field(None, ge=1)
    grayscale: bool | None = None
    image_root: str | None = None
    test_path: str | None = None
    uncertain: dict[str, Literal["ones", "zeros"]] = Field(default_factory=dict)
    test_size: float = Field(0.3, gt=0, lt=1)
    validation_size: float = Field(0.2, ge=0, lt=1)
    standardize: bool = True
    limit: int | None = Field(None, ge=20)
    #: Whether the recipe named ``task`` (the default is filled in below): a multi-label
    #: run refuses a named task.
    _task_given: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _consistent(self) -> DataSection:
        from xrisk.datasets import CHEXPERT_TASKS

        self._task_given = self.task is not None

        if self.name in _FILE_DATA and not self.path:
            raise ValueError(f"data.path: received None; expected the file's path with "
                             f"data.name {self.name!r}. Fix: set data.path.")
        if self.name in ("digits", "mnist_5k") and self.positive_class is None:
            object.__setattr__(self, "positive_class", 0)
        if self.name not in ("digits", "mnist_5k") and self.positive_class is not None:
            raise ValueError(f"data.positive_class: received {self.positive_class} for data "
                             f"set {self.name!r}; it applies to digits and mnist_5k only. "
                             "Fix: remove data.positive_class.")
        if self.grayscale is not None and self.name != "image_folder":
            raise ValueError(f"data.grayscale: received {self.grayscale} for data set "
                             f"{self.name!r}; it applies to image_folder only (a MedMNIST "
                             "file's images keep their channels). Fix: remove it.")
        if self.positive_classes is not None and self.name not in ("image_folder",
                                                                   "medmnist"):
            raise ValueError(f"data.positive_classes: received {list(self.positive_classes)} "
                             f"for data set {self.name!r}; it applies to image_folder and "
                             "medmnist only. Fix: remove it.")
        if self.split == "scaffold" and self.name != "smiles_csv":
            raise ValueError(f"data.split: received 'scaffold' for data set {self.name!r}; "
                             "expected 'random' (scaffolds need SMILES). Fix: use "
                             "data.name smiles_csv or drop data.split.")
        if self.test_path is not None and self.name != "chexpert":
            raise ValueError(f"data.test_path: received {self.test_path!r} for data set "
                             f"{self.name!r}; it applies to chexpert only (its valid.csv). "
                             "Fix: remove data.test_path.")
        if self.split is None:
            object.__setattr__(self, "split",
                               "scaffold" if self.name == "smiles_csv" else "random")
        if self.name in _IMAGE_DATA and self.image_size is None:
            object.__setattr__(self, "image_size", 28)
        for task in self.uncertain:
            if self.name != "chexpert" or task not in CHEXPERT_TASKS:
                raise ValueError(f"data.uncertain: received {task!r}; expected a CheXpert "
                                 f"task of {list(CHEXPERT_TASKS)} with data.name chexpert. "
                                 "Fix: correct or remove it.")
        tasks = {"tox21": TOX21_TASKS, "chexpert": CHEXPERT_TASKS}.get(self.name)
        if tasks is not None:
            if self.task is None:
                object.__setattr__(self, "task", tasks[0])
            elif self.task not in tasks:
                raise ValueError(f"data.task: received {self.task!r}; expected one of "
                                 f"{list(tasks)}{_did_you_mean(self.task, tasks)}"
                                 f". Fix: name a {self.name} task.")
        elif self.task is not None:
            raise ValueError(f"data.task: received {self.task!r} for data set {self.name!r}; "
                             "it applies to tox21 only and to chexpert. Fix: remove data.task.")
        return self


#: Data kinds whose examples are images: a conv model sees them as (N, H, W, C).
IMAGE_KINDS = ("digits", "mnist_5k", "image_folder", "medmnist", "chexpert")
#: The larger backbones a recipe can name (optional extras: torchvision, keras.applications),
#: with the frameworks that build them and the smallest image side each takes.
BACKBONES = ("resnet18", "densenet121")
BACKBONE_FRAMEWORKS = {"resnet18": ("torch",), "densenet121": ("torch", "tensorflow")}
BACKBONE_MIN_SIZE = {"resnet18": 1, "densenet121": 32}
#: The models that take images (N, H, W, C): the reference conv models
#: (:mod:`xrisk.runner.models`) and the backbones.
CONV_MODELS = ("resnet20", "conv_encoder", *BACKBONES)
#: The image side of the shipped image data (files: ``data.image_size``, or the file's own).
_SHIPPED_IMAGE_SIZE = {"digits": 8, "mnist_5k": 28}


class ModelSection(_Section):
    """The network, one of the reference models of :mod:`xrisk.runner.models`.

    ``mlp``: ``hidden`` layer widths and ``activation``, over flattened features (any data).
    ``resnet20``: the CIFAR ResNet20 (He et al.), over images (N, H, W, C). ``conv_encoder``:
    the contrastive encoder (3x3 convs of ``widths``, pooling) with a head of ``hidden``
    widths and one output. ``neumf``: the ranking model of MovieLens (``task: ranking``).
    Conv models take image data only (:data:`IMAGE_KINDS`), in every framework.

    The backbones (:data:`BACKBONES`, binary and multi-label image tasks): ``densenet121``
    (torchvision in torch, ``keras.applications`` in TensorFlow; images of at least 32x32)
    and ``resnet18`` (torchvision, torch only). They start from their framework's own
    initialisation seeded from the run's seed, not from shared numpy weights, so the
    frameworks do not start from the same model; gray images are repeated to their three
    input channels. JAX builds neither.
    """

    name: Literal["mlp", "resnet20", "conv_encoder", "neumf", "resnet18",
                  "densenet121"] = "mlp"
    hidden: tuple[int, ...] = (32,)
    activation: Literal["relu", "tanh"] = "relu"
    widths: tuple[int, ...] = (32, 64, 128)

    @field_validator("hidden", "widths")
    @classmethod
    def _widths(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(width < 1 for width in value):
            raise ValueError("expected positive widths, e.g. [32]")
        return value


class LossSection(_Section):
    """An xrisk loss by class name and its hyper-parameters (sizes come from the data).

    ``scale``: the factor of the loss in the objective that is differentiated (the logged
    loss stays unscaled); unset, 2 tau for InfoNCE in contrastive runs (the step-size rule
    against SogCLR under LARS, docs/runner.md), 1 otherwise.
    """

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    scale: float | None = Field(None, gt=0)


class OptimizerSection(_Section):
    """An xrisk optimizer by class name and its hyper-parameters."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class SamplerSection(_Section):
    """``dual``: a fixed share ``sampling_rate`` of positives in each batch; ``random``.

    ``tri`` (ranking): each batch holds ``num_queries`` queries, each with ``num_pos`` rated
    items and ``num_neg`` unrated ones (:class:`xrisk.samplers.TriSampler`, ranking mode);
    ``batch_size`` is not used.
    """

    name: Literal["dual", "random", "tri"] = "dual"
    batch_size: int = Field(64, ge=2)
    sampling_rate: float = Field(0.25, gt=0, lt=1)
    num_queries: int = Field(32, ge=1)
    num_pos: int = Field(10, ge=1)
    num_neg: int = Field(100, ge=1)


class ScheduleSection(_Section):
    """Warm-up, last-layer re-initialisation and stage-wise decay.

    ``warmup_epochs`` of cross-entropy (``warmup_optimizer`` at ``warmup_learning_rate``)
    come first (LibAUC's pre-training recipe); ``reinit_last_layer`` then redraws the output
    layer before the X-risk loss starts. At each fraction in ``decay_at`` of the X-risk
    epochs the optimizer's ``update_regularizer(decay_factor)`` (methods with stages: PESG,
    PDSCA) or ``update_lr(decay_factor)`` runs.
    """

    warmup_epochs: int = Field(0, ge=0)
    warmup_optimizer: Literal["Adam", "SGD"] = "Adam"
    warmup_learning_rate: float = Field(1e-3, gt=0)
    reinit_last_layer: bool = False
    decay_at: tuple[float, ...] = (0.5, 0.75)
    decay_factor: float = Field(10.0, ge=1)

    @field_validator("decay_at")
    @classmethod
    def _fractions(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0 < f < 1 for f in value):
            raise ValueError("expected fractions of training in (0, 1), e.g. [0.5, 0.75]")
        return tuple(sorted(value))


class EvaluationSection(_Section):
    """Metrics on the validation and test splits; early stopping on ``target``.

    ``train_metrics``: also score the training split each epoch (``train_<metric>`` columns:
    the convergence curves of the report); binary and multi-label runs.

    ``tensorboard``: also write each epoch's logged values (those of ``metrics.jsonl``) as
    TensorBoard scalars to the seed folder's ``tensorboard/`` (``pip install
    "xrisk[tensorboard]"``; :mod:`xrisk.runner.tensorboard_log`). A logging switch only: a
    run resumes with it turned on or off.
    """

    metrics: tuple[str, ...] = ("auroc", "ap")
    target: str | None = None
    max_fpr: float = Field(0.3, gt=0, le=1)
    min_tpr: float = Field(0.7, ge=0, lt=1)
    early_stopping: bool = True
    patience: int = Field(5, ge=1)
    train_metrics: bool = False
    tensorboard: bool = False

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            _check_metric(name)
        return value

    @field_validator("target")
    @classmethod
    def _known_target(cls, value: str | None) -> str | None:
        if value is not None:
            _check_metric(value)
        return value


def _check_metric(name: str) -> None:
    head, at, k = name.partition("@")
    if at and head in RANKING_METRICS and k.isdigit() and int(k) >= 1:
        return
    if name in CONTRASTIVE_METRICS:
        return
    allowed = tuple(m for m in METRIC_NAMES if "@" not in m)  # classification metrics
    if at:
        raise ValueError(f"{name!r} is not a metric; expected a ranking metric <name>@<K> "
                         f"with <name> one of {list(RANKING_METRICS)} and K >= 1, e.g. "
                         "ndcg@10, or one of " + str(list(allowed)))
    if name not in allowed:
        raise ValueError(f"{name!r} is not a metric; expected one of {list(allowed)} (or, "
                         f"for contrastive runs, {list(CONTRASTIVE_METRICS)})"
                         + _did_you_mean(name, [*allowed, *CONTRASTIVE_METRICS]))


class Recipe(_Section):
    """A whole recipe (see ``docs/runner.md`` for every field)."""

    name: str = "run"
    method: str | None = None
    task: Literal["binary", "ranking", "contrastive", "multilabel"] | None = None
    framework: Literal["torch", "tensorflow", "jax"] = "torch"
    dtype: Literal["float32", "float64"] = "float32"
    seeds: tuple[int, ...] = (0,)
    epochs: int = Field(20, ge=1)
    data: DataSection
    # (model_validate({}): the defaults, spelled so that mypy without pydantic's plugin
    # sees no missing arguments)
    model: ModelSection = Field(default_factory=lambda: ModelSection.model_validate({}))
    loss: LossSection
    optimizer: OptimizerSection
    sampler: SamplerSection = Field(default_factory=lambda: SamplerSection.model_validate({}))
    schedule: ScheduleSection = Field(
        default_factory=lambda: ScheduleSection.model_validate({}))
    evaluation: EvaluationSection = Field(
        default_factory=lambda: EvaluationSection.model_validate({}))
    #: Contrastive runs: SimCLR's view pipeline (:class:`xrisk.datasets.views.SimCLRAugment`
    #: fields; its CIFAR defaults where unset).
    views: dict[str, Any] = Field(default_factory=dict)

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise ValueError("expected a count >= 1 or a list of seeds")
            return tuple(range(value))
        return value

    @field_validator("seeds")
    @classmethod
    def _nonnegative(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(s < 0 for s in value) or len(set(value)) != len(value):
            raise ValueError("expected distinct seeds >= 0")
        return value

    @model_validator(mode="after")
    def _task(self) -> Recipe:
        data_task = "ranking" if self.data.name in RANKING_DATA else "binary"
        if self.task is None:
            object.__setattr__(self, "task", data_task)
        kind = str(self.task)
        allowed = {"ranking": RANKING_DATA, "contrastive": CONTRASTIVE_DATA,
                   "multilabel": MULTILABEL_DATA}.get(kind)
        if (allowed is None and data_task == "ranking") or (
                allowed is not None and self.data.name not in allowed):
            raise ValueError(f"task: received {self.task!r} with data.name "
                             f"{self.data.name!r}; expected data of "
                             f"{list(allowed) if allowed else 'binary classification'} "
                             f"for it (ranking data: {list(RANKING_DATA)}). Fix: name such "
                             "data, or another task or method.")
        for name in (*self.evaluation.metrics, *([self.evaluation.target]
                                                 if self.evaluation.target else [])):
            found = ("ranking" if "@" in name else "contrastive"
                     if name in CONTRASTIVE_METRICS else "classification")
            wanted = {"ranking": "ranking", "contrastive": "contrastive"}.get(
                kind, "classification")
            if found != wanted:
                examples = {"ranking": "ndcg@10", "contrastive": "probe_accuracy",
                            "classification": "auroc"}
                raise ValueError(
                    f"evaluation.metrics: received {name!r} for a {self.task} task; expected "
                    f"{wanted} metrics such as {examples[wanted]}. Fix: correct "
                    "evaluation.metrics / evaluation.target.")
        self._model_fits()
        samplers: tuple[str, ...] = {"ranking": ("tri",), "contrastive": ("random",),
                                     "multilabel": ("random",)}.get(kind, ("dual", "random"))
        if self.sampler.name not in samplers:
            raise ValueError(f"sampler.name: received {self.sampler.name!r} for a {self.task} "
                             f"task; expected one of {list(samplers)}. Fix: set sampler.name "
                             "accordingly.")
        if kind == "multilabel":
            self._multilabel_fits()
        self._classes_fit(kind)
        if self.evaluation.train_metrics and kind in ("ranking", "contrastive"):
            raise ValueError(f"evaluation.train_metrics: received True for a {kind} task; it "
                             "applies to binary and multilabel runs. Fix: remove it.")
        if kind == "contrastive":
            self._contrastive_fits()
        elif self.views:
            raise ValueError(f"views: received {self.views!r} for a {kind} task; views apply "
                             "to contrastive runs only. Fix: remove views.")
        return self

    def _multilabel_fits(self) -> None:
        """A multi-label run: every task of the data at once (``data.task`` does not apply
        and is cleared), no imratio (each label keeps its own ratio)."""
        tasks = {"tox21": "12 Tox21 assays", "chexpert": "five CheXpert tasks",
                 "medmnist": "labels of the file"}[self.data.name]
        if self.data._task_given:
            raise ValueError(f"data.task: received {self.data.task!r} with the multi-label "
                             f"method {self.method or self.loss.name!r}, which trains all "
                             f"{tasks} at once; expected no data.task. Fix: remove data.task, "
                             "or name a binary method (e.g. pesg) to train that task alone.")
        object.__setattr__(self.data, "task", None)
        if self.data.positive_classes is not None:
            raise ValueError(f"data.positive_classes: received "
                             f"{list(self.data.positive_classes)} for a multilabel task; "
                             "expected none (every label of the file is a task). Fix: remove "
                             "data.positive_classes, or name a binary method.")
        if self.data.imratio:
            raise ValueError(f"data.imratio: received {self.data.imratio!r} for a multilabel "
                             "task; expected none (each label keeps its own ratio). Fix: "
                             "remove data.imratio.")

    def _classes_fit(self, kind: str) -> None:
        """A binary image folder names its positive classes; a contrastive run keeps every
        class (the probe's labels) and its natural ratio."""
        data = self.data
        if kind != "contrastive":
            if data.name == "image_folder" and not data.positive_classes:
                raise ValueError("data.positive_classes: received None; expected the class "
                                 "folders labelled 1 with data.name 'image_folder'. Fix: e.g. "
                                 "positive_classes: [tumour].")
            return
        for field in ("positive_classes", "imratio"):
            value = getattr(data, field)
            if value is not None:
                shown = list(value) if isinstance(value, tuple) else value
                raise ValueError(f"data.{field}: received {shown!r} for a contrastive task; "
                                 "expected none (a contrastive run keeps every class as it "
                                 "is: the linear probe and kNN vote are judged on them). "
                                 f"Fix: remove data.{field}.")

    def _contrastive_fits(self) -> None:
        """A contrastive run: the conv encoder, no supervised warm-up, valid views, a loss
        whose moving-average weight is constant (the losses take the epoch at
        construction)."""
        if self.model.name != "conv_encoder":
            raise ValueError(f"model.name: received {self.model.name!r} for a contrastive "
                             "task; expected 'conv_encoder' (encoder + projection head). "
                             "Fix: set model.name: conv_encoder.")
        if self.schedule.warmup_epochs:
            raise ValueError(f"schedule.warmup_epochs: received "
                             f"{self.schedule.warmup_epochs} for a contrastive task; expected 0 "
                             "(there are no labels to warm up on). Fix: remove it.")
        schedule = self.loss.options.get("gamma_schedule", "constant")
        if schedule != "constant":
            raise ValueError(f"loss.options.gamma_schedule: received {schedule!r}; the runner "
                             "trains contrastive losses with gamma_schedule 'constant' in this "
                             "version. Fix: remove it (set loss.gamma instead).")
        from xrisk.datasets.views import SimCLRAugment

        try:
            SimCLRAugment(**self.views)
        except TypeError as error:
            raise ValueError(f"views: {error}; expected fields of "
                             "xrisk.datasets.views.SimCLRAugment. Fix: use size, scale, ratio, "
                             "flip, jitter, brightness, contrast, saturation, hue or "
                             "grayscale.") from None
        except ValueError as error:
            raise ValueError(f"views: {error}") from None

    def _model_fits(self) -> None:
        """Refuse a model the data or framework cannot feed (raises ValueError)."""
        name, data = self.model.name, self.data.name
        if name == "neumf" and data != "movielens":
            raise ValueError(f"model.name: received 'neumf' with data.name {data!r}; NeuMF "
                             "scores (user, item) pairs of movielens only. Fix: use "
                             "model.name mlp, or data.name movielens.")
        if name not in CONV_MODELS:
            return
        if self.task == "ranking" or data not in IMAGE_KINDS:
            raise ValueError(
                f"model.name: received {name!r} with data.name {data!r} (feature vectors, "
                f"not images); expected image data ({list(IMAGE_KINDS)}) for a conv model. "
                "Fix: use model.name mlp for this data, or name image data.")
        if name in BACKBONES:
            self._backbone_fits(name)

    def _backbone_fits(self, name: str) -> None:
        """A backbone: a framework that builds it, images it can take (raises ValueError;
        a contrastive run's own check names its encoder)."""
        if self.task == "contrastive":
            return
        frameworks = BACKBONE_FRAMEWORKS[name]
        if self.framework not in frameworks:
            usable = [m for m in BACKBONES if self.framework in BACKBONE_FRAMEWORKS[m]]
            raise ValueError(
                f"model.name: received {name!r} with framework {self.framework!r}; expected "
                f"framework {' or '.join(repr(f) for f in frameworks)} for {name} "
                f"({self.framework} has no {name} here). Fix: use model.name "
                f"{' or '.join([*usable, 'resnet20', 'conv_encoder'])} with framework "
                f"{self.framework}, or set framework: {' or '.join(frameworks)}.")
        smallest = BACKBONE_MIN_SIZE[name]
        data = self.data
        size = _SHIPPED_IMAGE_SIZE.get(data.name, data.image_size)
        if size is not None and size < smallest:
            field = "data.image_size" if data.name in _IMAGE_DATA else "data.name"
            shown = size if field == "data.image_size" else f"{data.name!r} ({size}x{size} images)"
            fix = (f"set data.image_size to at least {smallest} (224, ImageNet's size, is "
                   "DenseNet121's usual input)" if field == "data.image_size" else
                   "use model.name resnet20 or conv_encoder for these small images, or image "
                   f"data of at least {smallest}x{smallest} pixels")
            raise ValueError(f"{field}: received {shown} with model.name {name!r}; expected "
                             f"images of at least {smallest}x{smallest} ({name} halves the "
                             f"resolution five times). Fix: {fix}.")

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, dicts, numbers): what ``recipe.yaml`` of a run holds."""
        return self.model_dump(mode="json")

    @property
    def metric(self) -> str:
        """The metric early stopping and comparisons watch."""
        return self.evaluation.target or ("ndcg@10" if self.task == "ranking" else "auroc")


def _did_you_mean(name: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fill_method(raw: dict[str, Any], problems: list[str]) -> None:
    """Expand ``method: <name>`` into loss, optimizer, sampler and target metric; explicit
    sections win, and options merge over the method's defaults."""
    method = raw.get("method")
    if method is None:
        for part in ("loss", "optimizer"):
            if part not in raw:
                problems.append(f"{part}: missing; expected the {part} section or a method. "
                                f"Fix: add 'method: soap' (one of {sorted(METHODS)}) or a "
                                f"'{part}:' section with a name.")
        return
    if method not in METHODS:
        problems.append(f"method: received {method!r}; expected one of {sorted(METHODS)}"
                        f"{_did_you_mean(str(method), list(METHODS))}. Fix: name a method "
                        "of the table (xrisk methods lists them) or give loss and optimizer.")
        return
    row = METHODS[method]
    data = raw.get("data")
    task = raw_task(raw)
    if task in ("binary", "ranking"):  # the data's (a contradicting task: the Recipe says so)
        task = raw_task({"data": data})
    if row.task != task:
        same = sorted(name for name, other in METHODS.items() if other.task == task)
        problems.append(f"method: received {method!r}, a {row.task} method, with {task} data "
                        f"({data.get('name') if isinstance(data, Mapping) else data!r}); "
                        f"expected one of {same}. Fix: name a {task} method.")
        return
    values = defaults(method)
    for part, cls_name in (("loss", row.loss), ("optimizer", row.optimizer)):
        given = raw.get(part) or {}
        if not isinstance(given, Mapping):
            continue
        name = given.get("name", cls_name)
        options = dict(values[part]) if name == cls_name else {}
        options.update(given.get("options") or {})
        raw[part] = {**given, "name": name, "options": options}
    sampler = dict(raw.get("sampler") or {})
    sampler.setdefault("name", row.sampler)
    raw["sampler"] = sampler
    evaluation = dict(raw.get("evaluation") or {})
    evaluation.setdefault("target", row.metric)
    raw["evaluation"] = evaluation


def raw_task(raw: Mapping[str, Any]) -> str:
    """The task of a raw recipe: ``task`` when given; else its method's task when that is
    contrastive or multi-label; else its data's (``ranking`` for ranking data, or
    ``binary``)."""
    task = raw.get("task")
    if isinstance(task, str):
        return task
    method = raw.get("method")
    row = METHODS.get(method) if isinstance(method, str) else None
    if row is not None and row.task in ("contrastive", "multilabel"):
        return row.task
    data = raw.get("data")
    return "ranking" if isinstance(data, Mapping) and data.get("name") in RANKING_DATA \
        else "binary"


#: What each task's recipe gets where it sets nothing (sections merged under the recipe's).
_TASK_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "ranking": {"sampler": {"name": "tri"}, "evaluation": {"metrics": ["ndcg@5", "ndcg@10"]}},
    "contrastive": {"sampler": {"name": "random"},
                    "evaluation": {"metrics": list(CONTRASTIVE_METRICS)},
                    "model": {"name": "conv_encoder", "hidden": [128, 64]},
                    "schedule": {"decay_at": []}},
    "multilabel": {"sampler": {"name": "random"}},
}


_TASK_WORDS = {"binary": "binary-classification", "ranking": "learning-to-rank",
               "contrastive": "contrastive", "multilabel": "multi-label"}


def _check_class_options(sections: Mapping[str, Any], problems: list[str], *,
                         task: str = "binary") -> None:
    """Loss and optimizer: known names, known options, values the class accepts (the
    losses of the ``task``: :data:`TASK_LOSSES`)."""
    built: dict[str, Any] = {}
    for part, registry in (("loss", xrisk.LOSSES), ("optimizer", xrisk.OPTIMIZERS)):
        section = sections.get(part)
        if section is None:
            continue
        losses = TASK_LOSSES.get(task, BINARY_LOSSES)
        allowed = losses if part == "loss" else tuple(registry)
        if section.name not in allowed:
            problems.append(
                f"{part}.name: received {section.name!r}; expected one of {list(allowed)}"
                f"{_did_you_mean(section.name, allowed)}. Fix: name a "
                f"{_TASK_WORDS.get(task, task)} {part} (or set task).")
            continue
        cls = registry[section.name]
        parameters = inspect.signature(cls).parameters
        settable = [n for n in parameters if n not in DATA_ARGUMENTS]
        unknown = [n for n in section.options if n not in settable]
        for name in unknown:
            problems.append(
                f"{part}.options.{name}: received {section.options[name]!r}, but "
                f"{section.name} has no option {name!r}{_did_you_mean(name, settable)}; "
                f"expected one of {settable}. Fix: remove it or correct its name.")
        if unknown:
            continue
        options = {k: v for k, v in section.options.items() if v is not None
                   or parameters[k].default is None}
        # sizes the data gives at run time; placeholders to check the other options
        for name, size in (("num_samples", 8), ("num_interactions", 8), ("num_queries", 2),
                           ("num_items", 4), ("num_labels", 2)):
            if part == "loss" and name in parameters:
                options[name] = size
        if part == "optimizer" and "loss_fn" in parameters:
            if "loss" not in built:
                continue  # the loss's own problem is reported
            options["loss_fn"] = built["loss"]
        try:
            built[part] = cls(**options)
        except (TypeError, ValueError) as error:
            problems.append(f"{part}.options: {section.name} refuses them: {error}")


def _pydantic_problems(error: pydantic.ValidationError) -> list[str]:
    out = []
    for item in error.errors():
        path = ".".join(str(p) for p in item["loc"]) or "recipe"
        received = item.get("input")
        kind = item["type"]
        message = item["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            section = item["loc"][:-1]
            fields = _fields_at(section)
            name = str(item["loc"][-1])
            out.append(f"{path}: unknown field (received {received!r}); expected one of "
                       f"{fields}{_did_you_mean(name, fields)}. Fix: remove or rename it.")
        elif kind == "missing":
            out.append(f"{path}: missing; expected a value. Fix: add {path} to the recipe.")
        elif kind in ("greater_than_equal", "greater_than", "less_than", "less_than_equal"):
            bound = next(iter(item.get("ctx", {}).items()), ("", ""))
            words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
            out.append(f"{path}: received {received!r}; expected a number {words[bound[0]]} "
                       f"{bound[1]}. Fix: set {path} to "
                       f"{'an integer' if isinstance(received, int) else 'a number'} "
                       f"{words[bound[0]]} {bound[1]}.")
        elif kind == "literal_error":
            expected = item.get("ctx", {}).get("expected", "")
            out.append(f"{path}: received {received!r}; expected {expected}"
                       f"{_did_you_mean(str(received), _literals(expected))}. Fix: use one "
                       "of those values.")
        elif "Fix:" in message:
            out.append(message if message.startswith(path) or not item["loc"]
                       else f"{path}: {message}")
        else:
            out.append(f"{path}: received {received!r}; {message}. Fix: correct {path}.")
    return out


def _literals(expected: str) -> list[str]:
    return [part.strip(" '\"") for part in expected.replace(" or ", ",").split(",")]


_SECTIONS: dict[str, type[BaseModel]] = {
    "data": DataSection, "model": ModelSection, "loss": LossSection,
    "optimizer": OptimizerSection, "sampler": SamplerSection, "schedule": ScheduleSection,
    "evaluation": EvaluationSection}


def _fields_at(location: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = _SECTIONS.get(str(location[0]), Recipe) if location else Recipe
    return list(model.model_fields)


def parse_recipe(raw: Mapping[str, Any]) -> Recipe:
    """Validate a recipe given as plain data (the parsed YAML); raise :class:`RecipeError`."""
    if not isinstance(raw, Mapping):
        raise RecipeError(f"recipe: received a {type(raw).__name__} ({raw!r:.80}); expected a "
                          "mapping of sections (data:, method:, ...). Fix: see docs/runner.md.")
    data = copy.deepcopy(dict(raw))
    problems: list[str] = []
    task = raw_task(data)
    if task in ("contrastive", "multilabel"):  # the method's task (not the data's)
        data.setdefault("task", task)
    for part, values in _TASK_DEFAULTS.get(task, {}).items():  # e.g. ranking: TriSampler, NDCG
        given = data.get(part)
        data[part] = {**values, **given} if isinstance(given, Mapping) else (
            values if given is None else given)
    _fill_method(data, problems)
    if problems:
        raise RecipeError(_format(problems))
    try:
        recipe = Recipe.model_validate(data)
    except pydantic.ValidationError as error:
        problems = _pydantic_problems(error)
        _check_class_options(_valid_sections(data), problems,  # report those too
                             task=task)
        raise RecipeError(_format(problems)) from None
    _check_class_options({"loss": recipe.loss, "optimizer": recipe.optimizer}, problems,
                         task=str(recipe.task))
    if recipe.sampler.batch_size > 0 and recipe.schedule.warmup_epochs >= recipe.epochs:
        problems.append(
            f"schedule.warmup_epochs: received {recipe.schedule.warmup_epochs} with epochs "
            f"{recipe.epochs}; expected fewer warm-up epochs than epochs. Fix: lower "
            "schedule.warmup_epochs or raise epochs.")
    if problems:
        raise RecipeError(_format(problems))
    return recipe


def _valid_sections(data: Mapping[str, Any]) -> dict[str, Any]:
    """The loss and optimizer sections of a recipe that failed elsewhere, where they are
    well-formed, so that their options are checked in the same report."""
    out = {}
    for part, model in (("loss", LossSection), ("optimizer", OptimizerSection)):
        try:
            out[part] = model.model_validate(data.get(part))
        except pydantic.ValidationError:
            continue
    return out


def _format(problems: list[str]) -> str:
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    return f"recipe has {count}:\n" + "\n".join(f"  - {p}" for p in problems)


_FLOAT = (r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
          r"|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
          r"|\.[0-9_]+(?:[eE][-+][0-9]+)?"
          r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load``, except that ``1e-3`` is a float (YAML 1.1, PyYAML's dialect,
    reads it as a string: only ``1.0e-3`` would be a number)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_FLOAT),
                                 list("-+0123456789."))
    return yaml.load(text, Loader=Loader)  # noqa: S506  (a SafeLoader subclass)


def _parse_value(text: str) -> Any:
    return _yaml_load(text)


def apply_overrides(raw: Mapping[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """Apply ``--set a.b=value`` assignments (values parsed as YAML) to a raw recipe.

    ``loss.<name>`` and ``optimizer.<name>`` set an option of the class, as a shorthand for
    ``loss.options.<name>``.

    >>> apply_overrides({"epochs": 3}, ["epochs=5", "loss.gamma=0.5"])
    {'epochs': 5, 'loss': {'options': {'gamma': 0.5}}}
    """
    out = copy.deepcopy(dict(raw))
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        if not sep or not key.strip():
            raise RecipeError(f"--set: received {assignment!r}; expected FIELD=VALUE, e.g. "
                              "loss.gamma=0.5. Fix: write the field, '=', then the value.")
        path = key.strip().split(".")
        if path[0] in ("loss", "optimizer") and len(path) == 2 and path[1] not in (
                "name", "options"):
            path = [path[0], "options", path[1]]
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise RecipeError(f"--set {assignment}: {part} holds {child!r}, not a section. "
                                  "Fix: set the section's fields, not a value's parts.")
            node = child
        node[path[-1]] = _parse_value(text)
    return out


def builtin_recipes() -> dict[str, Path]:
    """The recipes shipped with xrisk, by name (``xrisk train breast_cancer_auroc``)."""
    folder = Path(__file__).parent / "recipes"
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}


def read_recipe_file(source: str | Path) -> dict[str, Any]:
    """The raw recipe of a YAML file, or of a shipped recipe's name."""
    import yaml

    path = Path(source)
    if not path.exists():
        shipped = builtin_recipes()
        if str(source) in shipped:
            path = shipped[str(source)]
        else:
            raise RecipeError(
                f"recipe: received {str(source)!r}, neither a file nor a shipped recipe; "
                f"expected a YAML path or one of {sorted(shipped)}"
                f"{_did_you_mean(str(source), list(shipped))}. Fix: check the path.")
    try:
        raw = _yaml_load(path.read_text())
    except yaml.YAMLError as error:
        raise RecipeError(f"recipe {path}: not valid YAML ({error}). Fix: correct the "
                          "syntax at the position shown.") from None
    return raw if raw is not None else {}


def load_recipe(source: str | Path | Mapping[str, Any],
                overrides: Sequence[str] = ()) -> Recipe:
    """A validated :class:`Recipe` from a YAML file, a shipped recipe's name or a dict,
    with ``--set`` style ``overrides`` applied first."""
    raw = dict(source) if isinstance(source, Mapping) else read_recipe_file(source)
    return parse_recipe(apply_overrides(raw, overrides))
