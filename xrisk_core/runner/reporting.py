"""The report of a run folder: a Markdown table (mean ± std over seeds), figures, the recipe,
versions and wall time.

Figures (matplotlib, Agg backend, PNG): ``learning_curves.png`` (the validation target
metric per epoch, mean ± std band over seeds, one line per framework x method),
``convergence.png`` (the training loss per epoch and, with ``evaluation.train_metrics``, the
target metric on the training split),
``roc.png`` and ``pr.png`` (test ROC and precision-recall curves of the selected models,
first seed), ``comparison.png`` (test metrics, mean ± std, per method).
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
    fig.tight_layout()
    fig.savefig(folder / "learning_curves.png", dpi=100)
    plt.close(fig)
    made.append(("Learning curves", "figures/learning_curves.png"))

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
    fig.tight_layout()
    fig.savefig(folder / "convergence.png", dpi=100)
    plt.close(fig)
    made.append(("Convergence", "figures/convergence.png"))

    scored = {label: seeds for label, seeds in runs.items()  # contrastive runs: features
              if "test_logits" in seeds[0]["predictions"]}
    for name, title, curve, axes in (
            ("roc", "ROC (test, selected model, first seed)", roc_curve, ("FPR", "TPR")),
            ("pr", "Precision-recall (test, selected model, first seed)",
             precision_recall_curve, ("recall", "precision"))):
        if not scored:
            continue
        fig, ax = plt.subplots(figsize=(5, 4))
        for label, seeds in scored.items():
            p = seeds[0]["predictions"]
            if p["y_test"].ndim != 1 or p["y_test"].min() == p["y_test"].max():
                continue
            first, second, _ = curve(p["y_test"], p["test_logits"])
            x, y = (first, second) if name == "roc" else (second, first)
            ax.plot(x, y, label=label)
        ax.set_xlabel(axes[0])
        ax.set_ylabel(axes[1])
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=100)
        plt.close(fig)
        made.append((title, f"figures/{name}.png"))

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
    fig.tight_layout()
    fig.savefig(folder / "comparison.png", dpi=100)
    plt.close(fig)
    made.append(("Comparison", "figures/comparison.png"))
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
