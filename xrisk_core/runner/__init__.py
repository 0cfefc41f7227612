"""Train, compare and report from one recipe, in torch, TensorFlow or JAX.

``xrisk train RECIPE`` (or :func:`train`) runs a recipe (:mod:`xrisk.runner.recipe`) for
each seed: the data set, a reference model with the same initial weights in every framework
(MLP, ResNet20, the conv encoder, NeuMF), a method (loss + optimizer + sampler, with
per-method defaults from :mod:`xrisk.runner.methods`), the schedule (cross-entropy warm-up,
last-layer re-initialisation, stage-wise decay), evaluation with early stopping on the
method's own metric, a checkpoint per epoch (``--resume`` continues bit-exactly), per-epoch
logs (CSV, JSONL), figures and a Markdown report. One loop
(:func:`xrisk.runner.engine.run_seed`) runs every task through its hooks: binary
classification, learning to rank (:mod:`~xrisk.runner.ranking`), contrastive learning
(:mod:`~xrisk.runner.contrastive`) and multi-label classification
(:mod:`~xrisk.runner.multilabel`).

Needs the ``runner`` extra (``pip install "xrisk[runner]"``): pydantic, PyYAML, matplotlib,
tqdm. ``import xrisk`` does not import this package.
"""

from .api import compare, print_comparison, report, train
from .recipe import Recipe, RecipeError, load_recipe

__all__ = ["Recipe", "RecipeError", "load_recipe", "train", "compare", "report",
           "print_comparison"]
