"""``train``, ``compare`` and ``report``: what the ``xrisk`` command calls.

A run folder holds ``recipe.yaml`` (the validated recipe), one sub-folder per
framework x method (``torch-soap``) with one folder per seed (``seed-0``: checkpoints,
``metrics.csv``, ``metrics.jsonl``, ``predictions.npz``, ``result.json``), and after the
runs ``report.md`` with its ``figures``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .engine import RunResult, run_seed
from .recipe import Recipe, RecipeError, load_recipe, parse_recipe

__all__ = ["CLAIMS", "train", "compare", "reproduce", "report", "label_of", "with_method"]

#: ``xrisk reproduce CLAIM``: a shipped recipe and the methods it compares, 3 seeds. Each
#: pits the X-risk methods of one metric against cross-entropy and focal loss (ranking: SONG
#: and K-SONG against ListwiseCE and pointwise BCE, on NDCG@10), judged on that metric on
#: held-out data; the report shows what was measured, whichever way it went.
CLAIMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "auroc": ("breast_cancer_auroc", ("ce", "focal", "pesg", "pdsca")),
    "ap": ("digits_ap", ("ce", "focal", "soap")),
    "pauc": ("mnist_pauc", ("ce", "focal", "sopa", "sopas")),
    "ranking": ("movielens_ndcg", ("bce", "listwise_ce", "song", "ksong")),
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
          write_report: bool = True, on_batch: Any = None) -> list[RunResult]:
    """Run every seed of a recipe into ``out/<framework>-<method>/seed-<s>``; then write the
    report of ``out`` (unless ``write_report=False``).

    ``source`` is a :class:`Recipe`, a YAML path, a shipped recipe's name or a dict;
    ``overrides`` are ``--set`` assignments (``"loss.gamma=0.5"``, ``"framework=jax"``).
    """
    recipe = _recipe(source, overrides)
    out = Path(out)
    _save_recipe(out, recipe)
    results = []
    for seed in recipe.seeds:
        run_dir = out / label_of(recipe) / f"seed-{seed}"
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


def reproduce(claim: str, out: str | Path, *, overrides: Sequence[str] = (),
              resume: bool = False, progress: bool = True) -> dict[str, list[RunResult]]:
    """Run a claim of :data:`CLAIMS` (3 seeds unless ``overrides`` say otherwise)."""
    if claim not in CLAIMS:
        raise RecipeError(f"reproduce: received {claim!r}; expected one of {sorted(CLAIMS)}. "
                          "Fix: name a claim (xrisk reproduce --help lists them).")
    recipe_name, methods = CLAIMS[claim]
    return compare(recipe_name, methods, out, overrides=["seeds=3", *overrides],
                   resume=resume, progress=progress)


def report(run_dir: str | Path) -> Path:
    """Write ``report.md`` and its figures for the runs in ``run_dir``; return its path."""
    from .report import write_report

    return write_report(Path(run_dir))
