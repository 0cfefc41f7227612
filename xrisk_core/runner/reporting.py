"""The report of a run folder: a Markdown table (mean ± std over seeds), figures, the recipe,
versions and wall time.

Figures (matplotlib, Agg backend, PNG): ``learning_curves.png`` (the validation target
metric per epoch, mean ± std band over seeds, one line per framework x method),
``convergence.png`` (the training loss per epoch and, with ``evaluation.train_metrics``, the
target metric on the training split),
``roc.png`` and ``pr.png`` (test ROC and precision-recall curves of the selected models,
first seed; multi-label runs: the mean over labels of each label's curve; no figure when no
run has both classes in its test labels), ``comparison.png`` (test metrics, mean ± std, per
method).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["collect", "summary_table", "write_report"]


def _natural_order(path: Path) -> list[Any]:
    """Sort key reading the numbers in a path as numbers: seed-2 before seed-10, a row
    ``pos5`` before ``pos10``, ``rate0.25`` before ``rate0.5`` (a plain sort puts the first
    two the other way round)."""
    parts = re.split(r"(\d+(?:\.\d+)?)", path.relative_to(path.parents[2]).as_posix())
    return [float(part) if index % 2 else part for index, part in enumerate(parts)]


def collect(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every finished seed under ``run_dir``, by label (labels and seeds in natural order):
    result, history and predictions."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for result_file in sorted(run_dir.glob("*/seed-*/result.json"), key=_natural_order):
        seed_dir = result_file.parent
        history = [json.loads(line) for line in
                   (seed_dir / "metrics.jsonl").read_text().splitlines() if line]
        with np.load(seed_dir / "predictions.npz", allow_pickle=False) as data:
            predictions = {key: data[key] for key in data.files}
        runs.setdefault(seed_dir.parent.name, []).append({
            "result": json.loads(result_file.read_text()), "history": history,
            "predictions": predictions})
    if not runs:
        raise FileNotFoundError(
            f"{run_dir}: no finished runs (no */seed-*/result.json). Fix: point at the "
            "folder given to xrisk train or xrisk compare (--out), after a run finished.")
    return runs


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


def summary_table(runs: dict[str, list[dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per label, each test metric as mean ± std over seeds (sample std),
    the selected epoch and the wall time."""
    metrics = list(dict.fromkeys(m for seeds in runs.values() for s in seeds
                                 for m in s["result"]["test"]))
    header = ["run", "target", "seeds", *[f"test {m}" for m in metrics], "best epoch",
              "seconds"]
    rows = []
    for label, seeds in runs.items():
        results = [s["result"] for s in seeds]
        rows.append([label, results[0]["metric"], str(len(seeds)),
                     *[_mean_std([r["test"][m] for r in results if m in r["test"]])
                       for m in metrics],
                     ", ".join(str(r["best_epoch"]) for r in results),
                     f"{sum(r['seconds'] for r in results):.1f}"])
    return header, rows


def _band(ax: Any, label: str, key: str, seeds: list[dict[str, Any]]) -> None:
    """Plot ``key`` of the seeds' histories per epoch: the mean, a ± std band."""
    curves = [[row.get(key, np.nan) for row in s["history"]] for s in seeds]
    length = max(len(c) for c in curves)  # early-stopped seeds end sooner
    table = np.full((len(curves), length), np.nan)
    for i, curve in enumerate(curves):
        table[i, : len(curve)] = curve
    counts = np.sum(~np.isnan(table), axis=0)
    if not counts.any():
        return
    mean = np.nanmean(table, axis=0)
    std = np.array([np.nanstd(col, ddof=1) if n > 1 else 0.0
                    for col, n in zip(table.T, counts)])
    epochs = np.arange(1, length + 1)
    ax.plot(epochs, mean, label=f"{label} ({key})")
    ax.fill_between(epochs, mean - std, mean + std, alpha=0.2)


def _on_grid(grid: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The polyline through ``(x, y)`` (x ascending from ``grid[0]`` to ``grid[-1]``, with
    repeats: a vertical step) read at ``grid``: between two distinct x the segment from the
    value the curve leaves the left one with to the value it reaches the right one with, so
    a staircase stays a staircase (interpolating one value per x would cut its corners)."""
    distinct, first = np.unique(x, return_index=True)
    last = np.r_[first[1:] - 1, x.size - 1]
    enter, leave = y[first], y[last]
    if distinct.size == 1:
        return np.full(grid.shape, leave[0])
    left = np.clip(np.searchsorted(distinct, grid, side="right") - 1, 0, distinct.size - 2)
    share = (grid - distinct[left]) / (distinct[left + 1] - distinct[left])
    values = leave[left] + share * (enter[left + 1] - leave[left])
    return np.where(grid >= distinct[-1], leave[-1], values)


def _curve_points(name: str, curve: Any, labels: np.ndarray, scores: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The ROC (``name`` "roc": FPR, TPR) or precision-recall ("pr": recall, precision)
    curve of ``scores`` against ``labels``; None without both classes.

    Multi-label runs (labels (N, K), NaN where missing) get the mean over the labels of each
    label's curve on its observed examples, interpolated on one grid of the x axis; labels
    with a single class are left out, as the reported metric leaves them out.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import roc_curve
    >>> from xrisk.runner.reporting import _curve_points
    >>> labels = np.array([[0, 1], [1, 0], [1, np.nan], [0, 1]])
    >>> scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.7, 0.3], [0.4, 0.6]])
    >>> fpr, tpr = _curve_points("roc", roc_curve, labels, scores)
    >>> float(tpr[0]), float(tpr[-1])  # both labels perfectly ranked: TPR 1 from FPR 0 on
    (1.0, 1.0)
    """
    if labels.ndim == 1:
        if labels.min() == labels.max():
            return None
        first, second, _ = curve(labels, scores)
        return (first, second) if name == "roc" else (second, first)
    grid = np.linspace(0.0, 1.0, 201)
    per_label = []
    for k in range(labels.shape[1]):
        observed = ~np.isnan(labels[:, k])
        y_k = labels[observed, k]
        if y_k.size == 0 or y_k.min() == y_k.max():
            continue
        first, second, _ = curve(y_k, scores[observed, k])
        if name == "roc":
            x, y = first, second  # FPR ascending
        else:  # recall ascending; precision interpolated: the best at this recall or more
            x, y = second[::-1], np.maximum.accumulate(first)[::-1]
        per_label.append(_on_grid(grid, x, y))
    if not per_label:
        return None
    return grid, np.mean(per_label, axis=0)


def _save(fig: Any, folder: Path, name: str, title: str) -> tuple[str, str]:
    """Write ``fig`` to ``folder/<name>.png`` and close it; ``(title, path in the report)``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(folder / f"{name}.png", dpi=100)
    plt.close(fig)
    return title, f"figures/{name}.png"


def _figures(run_dir: Path, runs: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve, roc_curve

    folder = run_dir / "figures"
    folder.mkdir(exist_ok=True)
    made = []

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, seeds in runs.items():
        key = f"val_{seeds[0]['result']['metric']}"
        _band(ax, label, key, seeds)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation metric")
    ax.set_title("Learning curves (mean ± std over seeds)")
    ax.legend(fontsize=7)
    made.append(_save(fig, folder, "learning_curves", "Learning curves"))

    # convergence: the training loss and (with evaluation.train_metrics) the target metric on
    # the training split, per epoch
    trained = any(f"train_{s['result']['metric']}" in s["history"][0]
                  for seeds in runs.values() for s in seeds if s["history"])
    fig, panels = plt.subplots(1, 2 if trained else 1, figsize=(11 if trained else 6, 4),
                               squeeze=False)
    for label, seeds in runs.items():
        _band(panels[0, 0], label, "loss", seeds)
        if trained:
            _band(panels[0, 1], label, f"train_{seeds[0]['result']['metric']}", seeds)
    panels[0, 0].set_ylabel("training loss (epoch mean)")
    panels[0, 0].set_title("Training loss (mean ± std over seeds)", fontsize=9)
    if trained:
        panels[0, 1].set_ylabel("target metric on the training split")
        panels[0, 1].set_title("Training-split metric (mean ± std over seeds)", fontsize=9)
    for ax in panels[0]:
        ax.set_xlabel("epoch")
        ax.legend(fontsize=7)
    made.append(_save(fig, folder, "convergence", "Convergence"))

    scored = {label: seeds for label, seeds in runs.items()  # contrastive runs: features
              if "test_logits" in seeds[0]["predictions"]}
    for name, title, curve, axes in (
            ("roc", "ROC (test, selected model, first seed)", roc_curve, ("FPR", "TPR")),
            ("pr", "Precision-recall (test, selected model, first seed)",
             precision_recall_curve, ("recall", "precision"))):
        lines = [(label, points) for label, seeds in scored.items()
                 if (points := _curve_points(name, curve, seeds[0]["predictions"]["y_test"],
                                             seeds[0]["predictions"]["test_logits"]))]
        if not lines:  # no method has both classes in its test labels: no figure
            continue
        if any(seeds[0]["predictions"]["y_test"].ndim == 2 for seeds in scored.values()):
            title += ", mean over labels"
        fig, ax = plt.subplots(figsize=(5, 4))
        for label, (x, y) in lines:
            ax.plot(x, y, label=label)
        ax.set_xlabel(axes[0])
        ax.set_ylabel(axes[1])
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        made.append(_save(fig, folder, name, title))

    metrics = list(dict.fromkeys(m for seeds in runs.values() for s in seeds
                                 for m in s["result"]["test"]))
    fig, ax = plt.subplots(figsize=(max(6.5, 0.6 * len(runs) * len(metrics) + 2.5), 4))
    width = 0.8 / max(len(runs), 1)
    lowest = 1.0
    for i, (label, seeds) in enumerate(runs.items()):
        values = [[s["result"]["test"].get(m, np.nan) for s in seeds] for m in metrics]
        means = [np.mean(v) for v in values]
        stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values]
        lowest = min(lowest, *(m - s for m, s in zip(means, stds) if np.isfinite(m)))
        ax.bar(np.arange(len(metrics)) + i * width, means, width, yerr=stds, label=label,
               capsize=2)
    ax.set_xticks(np.arange(len(metrics)) + width * (len(runs) - 1) / 2, metrics)
    ax.set_ylabel("test metric (mean ± std)")
    ax.set_ylim(max(0.0, np.floor((lowest - 0.05) * 10) / 10), 1)  # the differences show
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    made.append(_save(fig, folder, "comparison", "Comparison"))
    return made


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("xrisk", "numpy", "torch", "tensorflow", "tensorflow-cpu", "jax", "optax",
                 "scikit-learn"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def write_report(run_dir: Path) -> Path:
    """``run_dir/report.md`` (and ``figures/``, ``summary.json``) from the finished runs."""
    runs = collect(run_dir)
    header, rows = summary_table(runs)
    figures = _figures(run_dir, runs)
    recipe_file = run_dir / "recipe.yaml"
    lines = [f"# Report: {run_dir.name}", "",
             "Test metrics of the model selected on the validation split (the method's own "
             "metric, `target`), mean ± sample std over seeds. The training loss of the "
             "X-risk methods is a gradient surrogate (it can be negative or near 0): judge "
             "runs by these metrics.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines.append("")
    for title, path in figures:
        lines += [f"![{title}]({path})", ""]
    total = sum(s["result"]["seconds"] for seeds in runs.values() for s in seeds)
    lines += [f"Wall time of the runs: {total:.1f} s.", "", "## Versions", ""]
    lines += [f"- {name} {version}" for name, version in _versions().items()]
    if recipe_file.is_file():
        lines += ["", "## Recipe", "", "```yaml", recipe_file.read_text().rstrip(), "```"]
    report_file = run_dir / "report.md"
    report_file.write_text("\n".join(lines) + "\n")
    (run_dir / "summary.json").write_text(json.dumps(
        {"header": header, "rows": rows}, indent=1))
    return report_file
