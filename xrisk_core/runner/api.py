"""``train``, ``compare`` and ``report``: what the ``xrisk`` command calls.

A run folder holds ``recipe.yaml`` (the validated recipe), one sub-folder per
framework x method (``torch-soap``) with one folder per seed (``seed-0``: checkpoints,
``metrics.csv``, ``metrics.jsonl``, ``predictions.npz``, ``result.json``), and after the
runs ``report.md`` with its ``figures``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .engine import RunResult, run_seed
from .recipe import Recipe, RecipeError, load_recipe, parse_recipe

__all__ = ["CLAIMS", "Variant", "claim_recipes", "train", "compare", "reproduce", "report",
           "print_comparison", "label_of", "with_method"]


@dataclass(frozen=True)
class Variant:
    """One row of an ablation: ``method`` at its defaults with ``overrides`` (``--set``
    assignments) applied, run into the folder ``<framework>-<label>``."""

    label: str
    method: str
    overrides: tuple[str, ...] = ()


def _gammas(method: str, values: Sequence[float], extra: Sequence[str] = (),
            field: str = "gamma") -> tuple[Variant, ...]:
    name = field if field == "gamma" else f"{field}-"  # song-gamma0-0.1, not song-gamma00.1
    return tuple(Variant(f"{method}-{name}{g}" + (f"-{'-'.join(extra)}" if extra else ""),
                         method, (f"loss.{field}={g}", *extra)) for g in values)


def _batch_sizes(sizes: Sequence[int]) -> tuple[Variant, ...]:
    return tuple(Variant(f"soap-gamma{g}-batch{b}", "soap",
                         (f"loss.gamma={g}", f"sampler.batch_size={b}"))
                 for b in sizes for g in (0.9, 1.0))


#: ``xrisk reproduce CLAIM``: a shipped recipe and what it compares, 3 seeds. ``auroc``,
#: ``ap``, ``pauc``: the X-risk methods of one metric against cross-entropy and focal loss;
#: ``ranking``: SONG and K-SONG against ListwiseCE and pointwise BCE, on NDCG@10. The
#: ablations (:class:`Variant` rows): ``gamma``, SOAP and SOPAs with moving averages
#: (gamma < 1) against gamma = 1, the plain mini-batch estimator; ``gamma_ranking``, SONG's
#: ``gamma0`` (the moving average of its inner estimates) on MovieLens, NDCG@10;
#: ``gamma_contrastive``, SogCLR's gamma on digits, judged by the linear probe;
#: ``sampling``, AUC-M/PESG with DualSampler's positive share against the natural ratio
#: (random batches); ``sampling_ranking``, SONG with TriSampler's 1, 5 or 10 rated items per
#: user at 32 users x 100 unrated items a batch; ``batch_size``,
#: SOAP with gamma 0.9 and 1 at four batch sizes. ``contrastive``: SogCLR against InfoNCE
#: (trained at 2 tau x its value, the step-size rule) at a small batch (16) and a larger one
#: (128), judged by a linear probe on held-out digits. ``multilabel``: mAP (SOAP), AUC-M
#: (PESG) and one-way pAUC (SOPAs) on all Tox21 assays against the masked per-label BCE.
#: ``convergence``: SOAP against CE and focal from scratch, AP on the training split and the
#: training loss per epoch (the report's convergence figure). Each is judged on held-out data; the
#: report shows what was measured, whichever way it went.
CLAIMS: dict[str, tuple[str, tuple[str | Variant, ...]]] = {
    "auroc": ("breast_cancer_auroc", ("ce", "focal", "pesg", "pdsca")),
    "ap": ("digits_ap", ("ce", "focal", "soap")),
    "pauc": ("mnist_pauc", ("ce", "focal", "sopa", "sopas")),
    "ranking": ("movielens_ndcg", ("bce", "listwise_ce", "song", "ksong")),
    "gamma": ("digits_ap", (*_gammas("soap", (0.1, 0.9, 1.0)),
                            *_gammas("sopas", (0.1, 0.9, 1.0)))),
    "gamma_ranking": ("movielens_ndcg", _gammas("song", (0.1, 0.9, 1.0), field="gamma0")),
    "gamma_contrastive": ("digits_contrastive", tuple(  # the recipe's LARS rate, 0.075 sqrt(32)
        Variant(f"sogclr-gamma{g}", "sogclr", (f"loss.gamma={g}", "optimizer.learning_rate=0.42"))
        for g in (0.1, 0.9, 1.0))),
    "sampling": ("digits_ap", (
        Variant("pesg-natural", "pesg", ("sampler.name=random",)),
        *(Variant(f"pesg-rate{r}", "pesg", (f"sampler.sampling_rate={r}",))
          for r in (0.1, 0.25, 0.5)))),
    "sampling_ranking": ("movielens_ndcg", tuple(
        Variant(f"song-pos{n}", "song", (f"sampler.num_pos={n}",)) for n in (1, 5, 10))),
    "batch_size": ("digits_ap", _batch_sizes((128, 64, 32, 16))),
    "multilabel": ("tox21_multilabel", ("ml_bce", "ml_soap", "ml_pesg", "ml_sopas")),
    "convergence": ("digits_ap", tuple(  # from scratch, every epoch run, AP on the train split
        Variant(method, method, ("schedule.warmup_epochs=0", "evaluation.target=ap",
                                 "evaluation.early_stopping=false",
                                 "evaluation.train_metrics=true", "epochs=20"))
        for method in ("ce", "focal", "soap"))),
    "contrastive": ("digits_contrastive", tuple(  # LARS at SimCLR's 0.075 sqrt(batch size)
        Variant(f"{method}-batch{size}", method, (f"sampler.batch_size={size}",
                                                  f"optimizer.learning_rate={rate}"))
        for size, rate in ((16, 0.3), (128, 0.85)) for method in ("sogclr", "infonce"))),
}


def label_of(recipe: Recipe) -> str:
    """The folder of a recipe's runs: ``<framework>-<method>`` (or the loss's name)."""
    return f"{recipe.framework}-{recipe.method or recipe.loss.name}"


def _recipe(source: Recipe | str | Path | Mapping[str, Any], overrides: Sequence[str]) -> Recipe:
    if isinstance(source, Recipe):
        return load_recipe(source.to_dict(), overrides) if overrides else source
    return load_recipe(source, overrides)


def _save_recipe(out: Path, recipe: Recipe, name: str = "recipe.yaml") -> None:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(yaml.safe_dump(recipe.to_dict(), sort_keys=False))


def train(source: Recipe | str | Path | Mapping[str, Any], out: str | Path, *,
          overrides: Sequence[str] = (), resume: bool = False, progress: bool = True,
          write_report: bool = True, on_batch: Any = None,
          label: str | None = None) -> list[RunResult]:
    """Run every seed of a recipe into ``out/<framework>-<method>/seed-<s>`` (or
    ``out/<label>/seed-<s>``); then write the report of ``out`` (unless
    ``write_report=False``).

    ``source`` is a :class:`Recipe`, a YAML path, a shipped recipe's name or a dict;
    ``overrides`` are ``--set`` assignments (``"loss.gamma=0.5"``, ``"framework=jax"``).
    """
    recipe = _recipe(source, overrides)
    out = Path(out)
    _save_recipe(out, recipe)
    results = []
    for seed in recipe.seeds:
        run_dir = out / (label or label_of(recipe)) / f"seed-{seed}"
        results.append(run_seed(recipe, seed, run_dir, resume=resume, progress=progress,
                                on_batch=on_batch))
    if write_report:
        report(out)
    return results


def with_method(recipe: Recipe, method: str) -> Recipe:
    """``recipe`` with another method of the table: its loss, optimizer, sampler and
    target metric (its own metric, which early stopping watches), at their defaults; the
    recipe's data, model, schedule, evaluation metrics, seeds and framework are kept."""
    raw = recipe.to_dict()
    for part in ("loss", "optimizer"):
        raw.pop(part)
    raw["sampler"].pop("name")
    raw["evaluation"].pop("target")
    raw["method"] = method
    return parse_recipe(raw)


def compare(source: Recipe | str | Path | Mapping[str, Any], methods: Sequence[str],
            out: str | Path, *, overrides: Sequence[str] = (), resume: bool = False,
            progress: bool = True) -> dict[str, list[RunResult]]:
    """Train the recipe with each method (``["ce", "focal", "pesg", "soap", "sopas"]``),
    every seed, into one run folder; then write its report (a table of every method on
    every metric, mean ± std over seeds)."""
    base = _recipe(source, overrides)
    if not methods:
        raise RecipeError("compare: received no methods; expected names such as "
                          "ce,focal,pesg,soap,sopas. Fix: pass --methods.")
    recipes = {name: with_method(base, name) for name in methods}
    out = Path(out)
    _save_recipe(out, base)
    results = {}
    for name, recipe in recipes.items():
        results[name] = train(recipe, out, resume=resume, progress=progress,
                              write_report=False)
        _save_recipe(out / label_of(recipe), recipe)
    report(out)
    return results


def print_comparison(results: Mapping[str, Sequence[RunResult]], metrics: Sequence[str],
                     claims: Sequence[tuple[str, str, str]] = ()) -> dict[str, dict[str, float]]:
    """Print each method's test metrics, mean ± sample std over its seeds (as the report's
    table), then each claim's measured gap; return the means.

    ``results`` is what :func:`compare` returns (or ``{method: train(...)}``); a claim
    ``(method, baseline, metric)`` prints ``method``'s mean minus ``baseline``'s on
    ``metric``: what was measured, whichever way it went.

    >>> import numpy as np
    >>> from types import SimpleNamespace as Run
    >>> means = print_comparison({"ce": [Run(test={"ap": 0.5}), Run(test={"ap": 0.7})],
    ...                           "soap": [Run(test={"ap": 0.8})]}, ["ap"],
    ...                          [("soap", "ce", "ap")])  # doctest: +NORMALIZE_WHITESPACE
    method          test ap
    ce       0.6000 ± 0.1414
    soap     0.8000 ± 0.0000
    <BLANKLINE>
    The paper's comparison, as measured here (not asserted):
      soap - ce on test ap: +0.2000
    >>> means["ce"]["ap"]
    0.6
    """
    width = max(len(method) for method in results) + 2 if results else 8
    print(f"{'method':<{width}}" + "".join(f"{'test ' + m:>18}" for m in metrics))
    means = {}
    for method, runs in results.items():
        values = {m: [run.test[m] for run in runs] for m in metrics}
        means[method] = {m: float(np.mean(v)) for m, v in values.items()}
        print(f"{method:<{width}}" + "".join(
            f"{np.mean(v):>9.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0.0:.4f}"
            for v in values.values()))
    if claims:
        print("\nThe paper's comparison, as measured here (not asserted):")
    for method, baseline, metric in claims:
        if method in means and baseline in means:
            gap = means[method][metric] - means[baseline][metric]
            print(f"  {method} - {baseline} on test {metric}: {gap:+.4f}")
    return means


def reproduce(claim: str, out: str | Path, *, overrides: Sequence[str] = (),
              resume: bool = False, progress: bool = True) -> dict[str, list[RunResult]]:
    """Run a claim of :data:`CLAIMS` (3 seeds unless ``overrides`` say otherwise)."""
    if claim not in CLAIMS:
        raise RecipeError(f"reproduce: received {claim!r}; expected one of {sorted(CLAIMS)}. "
                          "Fix: name a claim (xrisk reproduce --help lists them).")
    recipe_name, entries = CLAIMS[claim]
    overrides = ["seeds=3", *overrides]
    if all(isinstance(entry, str) for entry in entries):
        return compare(recipe_name, [str(entry) for entry in entries], out,
                       overrides=overrides, resume=resume, progress=progress)
    base = _recipe(recipe_name, overrides)
    out = Path(out)
    recipes = claim_recipes(claim, overrides)  # every row checked before the first trains
    _save_recipe(out, base)
    results = {}
    for label, recipe in recipes.items():
        results[label] = train(recipe, out, resume=resume, progress=progress,
                               write_report=False, label=label)
        _save_recipe(out / label, recipe)
    report(out)
    return results


def claim_recipes(claim: str, overrides: Sequence[str] = ()) -> dict[str, Recipe]:
    """The recipe of each row of a claim of :data:`CLAIMS`, by its folder's label: the
    method at its defaults, the row's overrides, then ``overrides`` (``--epochs 2`` shortens
    every row)."""
    recipe_name, entries = CLAIMS[claim]
    base = _recipe(recipe_name, overrides)
    recipes = {}
    for entry in entries:
        variant = entry if isinstance(entry, Variant) else Variant(entry, entry)
        recipe = load_recipe(with_method(base, variant.method).to_dict(),
                             [*variant.overrides, *overrides])
        recipes[f"{recipe.framework}-{variant.label}"] = recipe
    return recipes


def report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and its figures for the runs in ``run_dir``; return its path."""
    from .reporting import write_report

    return write_report(Path(run_dir))
