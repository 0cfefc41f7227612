"""``xrisk tune``: search a method's hyper-parameters with Optuna (``pip install
"xrisk[tune]"``), pruning trials on the validation metric.

Each trial trains the recipe's first seed with values drawn from the method's search ranges
(:data:`xrisk.runner.methods.METHODS`), reports the validation target metric after every
epoch (Optuna's median pruner stops trials below the median of earlier ones at the same
epoch) and is scored by the validation metric of its selected epoch. The test split is never
looked at. ``tune.json`` lists every trial; ``best_recipe.yaml`` is the recipe with the best
values, ready for ``xrisk train``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .engine import run_seed
from .methods import METHODS
from .recipe import Recipe, RecipeError, load_recipe

__all__ = ["tune"]


def tune(recipe: Recipe, out: str | Path, *, trials: int = 20,
         progress: bool = True) -> dict[str, Any]:
    """Run ``trials`` Optuna trials; return ``{"value", "params", "recipe"}`` of the best."""
    try:
        import optuna
    except ImportError:
        raise ImportError('xrisk tune needs Optuna. Fix: pip install "xrisk[tune]".') from None
    if recipe.method is None or not METHODS[recipe.method].search:
        raise RecipeError(f"tune: the recipe names method {recipe.method!r}, which has no "
                          f"search ranges; expected one of {sorted(METHODS)}. Fix: set "
                          "method: in the recipe.")
    if trials < 1:
        raise RecipeError(f"tune: --trials {trials}; expected at least 1. Fix: --trials 20.")
    if recipe.data.validation_size == 0:
        raise RecipeError("tune: data.validation_size is 0; trials are scored on the "
                          "validation split. Fix: set data.validation_size, e.g. 0.2.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    space = METHODS[recipe.method].search
    seed, metric = recipe.seeds[0], recipe.metric

    def trial_recipe(values: dict[str, float]) -> Recipe:
        overrides = [f"{key}={value!r}" for key, value in values.items()]
        return load_recipe(recipe.to_dict(), [*overrides, f"seeds=[{seed}]"])

    def objective(trial: Any) -> float:
        values = {key: trial.suggest_float(key, r.low, r.high, log=r.log)
                  for key, r in space.items()}

        def report(epoch: int, row: dict[str, Any]) -> None:
            value = row.get(f"val_{metric}")
            if value is None:
                return
            trial.report(value, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()

        result = run_seed(trial_recipe(values), seed, out / "trials" / f"trial-{trial.number:03d}",
                          progress=False, on_epoch=report)
        return result.validation[metric]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=seed),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=3))
    study.optimize(objective, n_trials=trials, show_progress_bar=progress)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not finished:
        raise RuntimeError("tune: no trial finished (all pruned or failed). Fix: run more "
                           "trials or check a single run with xrisk train.")
    best = study.best_trial
    best_recipe = trial_recipe(best.params)
    import yaml

    (out / "best_recipe.yaml").write_text(yaml.safe_dump(
        {**best_recipe.to_dict(), "seeds": list(recipe.seeds)}, sort_keys=False))
    (out / "tune.json").write_text(json.dumps({
        "metric": f"val_{metric}", "best": {"number": best.number, "value": best.value,
                                            "params": best.params},
        "trials": [{"number": t.number, "state": t.state.name, "value": t.value,
                    "params": t.params} for t in study.trials]}, indent=1))
    return {"value": best.value, "params": best.params, "recipe": best_recipe}
