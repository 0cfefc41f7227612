"""The ``xrisk`` command (train, compare, report, tune, methods, recipes), the report it
writes (files, figures that open, a table that parses) and the import cost of the runner."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("matplotlib")

from xrisk.runner.cli import main  # noqa: E402

TINY = """
name: tiny_cli
method: ce
epochs: 2
seeds: 2
data: {name: breast_cancer, imratio: 0.2, limit: 160}
model: {hidden: [4]}
sampler: {batch_size: 16}
evaluation: {metrics: [auroc, ap]}
"""


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def compared(recipe_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    assert main(["compare", str(recipe_file), "--methods", "ce,soap", "--out", str(out),
                 "--quiet"]) == 0
    return out


def _table(report: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in report.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert set(lines[1]) <= set("|-")
    return cells[0], cells[2:]


def test_compare_writes_one_row_per_method_with_mean_and_std(compared):
    report = (compared / "report.md").read_text()
    header, rows = _table(report)
    assert header[:3] == ["run", "target", "seeds"] and "test auroc" in header
    assert [row[0] for row in rows] == ["torch-ce", "torch-soap"]
    assert [row[1] for row in rows] == ["auroc", "ap"]  # each method's own metric
    column = header.index("test auroc")
    for row in rows:
        values = [json.loads((compared / row[0] / f"seed-{s}" / "result.json").read_text())
                  ["test"]["auroc"] for s in (0, 1)]
        mean, std = (float(x) for x in re.fullmatch(r"(\S+) ± (\S+)", row[column]).groups())
        assert mean == pytest.approx(np.mean(values), abs=1e-4)
        assert std == pytest.approx(np.std(values, ddof=1), abs=1e-4)
    assert "## Recipe" in report and "## Versions" in report and "Wall time" in report


def test_report_figures_exist_and_open(compared):
    from PIL import Image

    report = (compared / "report.md").read_text()
    paths = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert sorted(paths) == sorted(f"figures/{name}.png" for name in
                                   ("learning_curves", "convergence", "roc", "pr",
                                    "comparison"))
    for path in paths:
        with Image.open(compared / path) as image:
            image.verify()
            assert image.size[0] > 100 and image.size[1] > 100


def test_report_command_rewrites_the_report(compared, capsys):
    (compared / "report.md").unlink()
    assert main(["report", str(compared)]) == 0
    assert (compared / "report.md").is_file()
    assert str(compared / "report.md") in capsys.readouterr().out


def test_the_report_function_stays_after_a_report_is_written(compared):
    """Writing a report imports the module that draws it; that must not replace the package's
    ``report`` function (a submodule of the same name did)."""
    import xrisk.runner

    assert callable(xrisk.runner.report)
    assert xrisk.runner.report(compared) == compared / "report.md"
    from xrisk.runner import report

    assert report is xrisk.runner.api.report


def test_report_of_a_folder_without_runs_explains(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no finished runs" in capsys.readouterr().err


def test_train_with_overrides_and_resume(recipe_file, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", str(recipe_file), "--out", str(out), "--quiet", "--seeds", "1",
            "--set", "loss.name=FocalLoss", "--set", "evaluation.metrics=[auroc]"]
    assert main(args) == 0
    assert "seed 0: best epoch" in capsys.readouterr().out
    result = json.loads((out / "torch-ce" / "seed-0" / "result.json").read_text())
    assert result["loss"] == "FocalLoss" and set(result["test"]) == {"auroc"}
    assert main(args) == 2  # the folder holds a run
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0  # a finished run resumes to the same result
    assert json.loads((out / "torch-ce" / "seed-0" / "result.json").read_text())[
        "test"] == result["test"]


def test_a_bad_recipe_exits_with_status_2_and_the_fix(recipe_file, tmp_path, capsys):
    assert main(["train", str(recipe_file), "--out", str(tmp_path), "--set",
                 "sampler.batch_sise=8"]) == 2
    err = capsys.readouterr().err
    assert "sampler.batch_sise" in err and "did you mean 'batch_size'" in err
    assert main(["train", "no_such_recipe", "--out", str(tmp_path)]) == 2
    assert "breast_cancer_auroc" in capsys.readouterr().err  # the shipped recipes are named
    (tmp_path / "bad.csv").write_text("a,label\n1,x\n")
    assert main(["train", str(recipe_file), "--out", str(tmp_path / "csv"), "--set",
                 "data={name: csv, path: %s}" % (tmp_path / "bad.csv")]) == 2
    assert "row 2, column 'label'" in capsys.readouterr().err


def test_methods_and_recipes_list_what_exists(capsys):
    assert main(["methods"]) == 0
    assert "| `soap` | APLoss | SOAP | ap |" in capsys.readouterr().out
    assert main(["recipes"]) == 0
    assert "digits_ap" in capsys.readouterr().out


def test_tune_searches_the_method_ranges(recipe_file, tmp_path):
    pytest.importorskip("optuna")
    assert main(["tune", str(recipe_file), "--trials", "2", "--out", str(tmp_path),
                 "--quiet", "--set", "method=soap", "--seeds", "1"]) == 0
    summary = json.loads((tmp_path / "tune.json").read_text())
    assert len(summary["trials"]) == 2 and summary["metric"] == "val_ap"
    rate = summary["best"]["params"]["optimizer.learning_rate"]
    assert 1e-4 <= rate <= 1e-2
    from xrisk.runner import load_recipe

    best = load_recipe(tmp_path / "best_recipe.yaml")
    assert best.optimizer.options["learning_rate"] == rate


def test_reproduce_runs_a_claim_and_refuses_an_unknown_one(tmp_path, capsys):
    assert main(["reproduce", "ap", "--out", str(tmp_path), "--quiet", "--seeds", "1",
                 "--epochs", "2", "--set", "schedule.warmup_epochs=1",
                 "--set", "data.limit=200"]) == 0
    _, rows = _table((tmp_path / "report.md").read_text())
    assert [row[0] for row in rows] == ["torch-ce", "torch-focal", "torch-soap"]
    assert main(["reproduce", "ndcg", "--out", str(tmp_path)]) == 2
    assert ("expected one of ['ap', 'auroc', 'batch_size', 'contrastive', 'convergence', "
            "'gamma', 'gamma_contrastive', 'gamma_ranking', 'multilabel', 'pauc', 'ranking', "
            "'sampling', 'sampling_ranking']") in capsys.readouterr().err


def test_the_help_names_every_claim(capsys):
    from xrisk.runner.api import CLAIMS

    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert [claim for claim in CLAIMS if f"{claim} (" not in shown] == []


def test_reproduce_runs_an_ablation_row_by_row(tmp_path):
    """A claim of Variant rows (sampling): one folder per row, each with the method and the
    fields the row changes (the caller's --set applying to every row), in the report."""
    import yaml

    assert main(["reproduce", "sampling", "--out", str(tmp_path), "--quiet", "--seeds", "1",
                 "--epochs", "1", "--set", "schedule.warmup_epochs=0",
                 "--set", "data.limit=300"]) == 0
    _, rows = _table((tmp_path / "report.md").read_text())
    labels = ["torch-pesg-natural", "torch-pesg-rate0.1", "torch-pesg-rate0.25",
              "torch-pesg-rate0.5"]
    assert [row[0] for row in rows] == labels
    saved = {label: yaml.safe_load((tmp_path / label / "recipe.yaml").read_text())
             for label in labels}
    assert saved["torch-pesg-natural"]["sampler"]["name"] == "random"
    assert saved["torch-pesg-rate0.1"]["sampler"] == {**saved["torch-pesg-rate0.5"]["sampler"],
                                                      "sampling_rate": 0.1}
    assert all(r["loss"]["name"] == "AUCMLoss" and r["epochs"] == 1 and r["data"]["limit"] == 300
               for r in saved.values())


def test_reproduce_runs_the_ranking_sampling_rows(tmp_path):
    """sampling_ranking trains SONG with 1, 5 and 10 rated items per user, each row its own
    folder and report row, the caller's --set applying to every row."""
    import yaml

    assert main(["reproduce", "sampling_ranking", "--out", str(tmp_path), "--quiet",
                 "--seeds", "1", "--epochs", "1", "--set", "schedule.warmup_epochs=0",
                 "--set", "data.limit=20", "--set", "sampler.num_neg=10",
                 "--set", "sampler.num_queries=8", "--set", "evaluation.metrics=[ndcg@5]"]) == 0
    _, rows = _table((tmp_path / "report.md").read_text())
    labels = [f"torch-song-pos{n}" for n in (1, 5, 10)]
    assert sorted(row[0] for row in rows) == sorted(labels)  # the report sorts by label
    saved = {label: yaml.safe_load((tmp_path / label / "recipe.yaml").read_text())["sampler"]
             for label in labels}
    assert [(s["num_pos"], s["num_neg"], s["num_queries"]) for s in saved.values()] == [
        (1, 10, 8), (5, 10, 8), (10, 10, 8)]


def test_python_m_xrisk_runs_the_command():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-m", "xrisk", "recipes"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "breast_cancer_auroc" in done.stdout


def test_importing_xrisk_and_an_adapter_does_not_import_the_runner():
    code = ("import sys, xrisk; "
            "print(sorted(m for m in ('pydantic', 'yaml', 'matplotlib', 'optuna', "
            "'xrisk.runner') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_ablation_rows_change_what_they_name():
    from xrisk.runner.api import claim_recipes

    gamma = claim_recipes("gamma")
    assert {label: (r.loss.name, r.loss.options["gamma"]) for label, r in gamma.items()} == {
        f"torch-{m}-gamma{g}": (loss, g) for m, loss in (("soap", "APLoss"),
                                                          ("sopas", "pAUC_DRO_Loss"))
        for g in (0.1, 0.9, 1.0)}
    song = claim_recipes("gamma_ranking")
    assert {label: (r.loss.name, r.loss.options["gamma0"], r.loss.options["gamma1"])
            for label, r in song.items()} == {
        f"torch-song-gamma0-{g}": ("NDCGLoss", g, 0.9) for g in (0.1, 0.9, 1.0)}
    sogclr = claim_recipes("gamma_contrastive")
    assert {label: (r.loss.name, r.loss.options["gamma"], r.sampler.batch_size,
                    r.optimizer.options["learning_rate"]) for label, r in sogclr.items()} == {
        f"torch-sogclr-gamma{g}": ("GlobalContrastiveLoss", g, 32, 0.42) for g in (0.1, 0.9, 1.0)}
    positives = claim_recipes("sampling_ranking")
    assert {label: (r.loss.name, r.sampler.name, r.sampler.num_queries, r.sampler.num_pos,
                    r.sampler.num_neg) for label, r in positives.items()} == {
        f"torch-song-pos{n}": ("NDCGLoss", "tri", 32, n, 100) for n in (1, 5, 10)}
    assert all(r.data.name == "movielens" for r in (*song.values(), *positives.values()))
    sizes = claim_recipes("batch_size", ["seeds=1"])
    assert sorted({r.sampler.batch_size for r in sizes.values()}) == [16, 32, 64, 128]
    assert all(r.seeds == (0,) and r.data.name == "digits" for r in sizes.values())


def test_the_contrastive_multilabel_and_convergence_claims_run_what_they_name():
    from xrisk.runner.api import claim_recipes

    contrastive = claim_recipes("contrastive")
    assert {label: (r.loss.name, r.sampler.batch_size, r.optimizer.options["learning_rate"])
            for label, r in contrastive.items()} == {
        f"torch-{m}-batch{b}": (loss, b, rate) for b, rate in ((16, 0.3), (128, 0.85))
        for m, loss in (("sogclr", "GlobalContrastiveLoss"), ("infonce", "InfoNCELoss"))}
    multilabel = claim_recipes("multilabel")
    assert {r.task for r in multilabel.values()} == {"multilabel"}
    convergence = claim_recipes("convergence")
    assert all(r.evaluation.train_metrics and r.metric == "ap"
               and not r.evaluation.early_stopping and r.schedule.warmup_epochs == 0
               for r in convergence.values())


def test_train_metrics_give_the_convergence_curves(tmp_path):
    from PIL import Image

    assert main(["train", "breast_cancer_auroc", "--out", str(tmp_path), "--quiet", "--epochs",
                 "2", "--set", "data.limit=120", "--set", "evaluation.train_metrics=true",
                 "--set", "schedule.warmup_epochs=0"]) == 0
    rows = [json.loads(line) for line in
            (tmp_path / "torch-pesg" / "seed-0" / "metrics.jsonl").read_text().splitlines()]
    assert all({"train_auroc", "train_ap", "val_auroc"} <= set(row) for row in rows)
    with Image.open(tmp_path / "figures" / "convergence.png") as image:
        image.verify()


def test_report_rows_and_seeds_follow_the_numbers_in_their_names(tmp_path):
    """pos5 before pos10 and seed-2 before seed-10 (a plain string sort swaps them)."""
    from xrisk.runner.reporting import collect

    for label in ("song-pos1", "song-pos10", "song-pos5", "rate0.5", "rate0.25"):
        for seed in (0, 10, 2):
            run = tmp_path / label / f"seed-{seed}"
            run.mkdir(parents=True)
            (run / "result.json").write_text(json.dumps({"seed": seed}))
            (run / "metrics.jsonl").write_text("")
            np.savez(run / "predictions.npz", scores=np.zeros(1))
    runs = collect(tmp_path)
    assert list(runs) == ["rate0.25", "rate0.5", "song-pos1", "song-pos5", "song-pos10"]
    assert [run["result"]["seed"] for run in runs["song-pos5"]] == [0, 2, 10]


def _fake_run(folder, y_test, test_logits):
    """A finished seed folder as the runner writes it (two epochs of history)."""
    run = folder / "seed-0"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({
        "seed": 0, "metric": "auroc", "test": {"auroc": 0.5}, "best_epoch": 1, "seconds": 1.0}))
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(
        {"epoch": e, "loss": 1.0 - e / 4, "val_auroc": 0.5 + e / 10}) for e in (0, 1)))
    np.savez(run / "predictions.npz", y_test=y_test, test_logits=test_logits)


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_multilabel_curve_is_the_mean_of_the_labels_curves(seed):
    """Labels (N, K) with NaN where missing: the ROC drawn is the mean over the labels with
    both classes of each label's ROC on its observed rows, so its area is the mean of their
    AUROCs (up to the grid); labels of one class are left out, as the metric leaves them."""
    from sklearn.metrics import roc_auc_score, roc_curve

    from xrisk.runner.reporting import _curve_points

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=(40, 4)).astype(np.float64)
    labels[:, 0] = 1.0  # one class: left out
    labels[rng.random(labels.shape) < 0.2] = np.nan
    labels[:2, 1:] = [[0, 0, 0], [1, 1, 1]]  # every other label keeps both classes
    scores = np.round(labels + rng.normal(size=labels.shape), 1)  # ties too
    fpr, tpr = _curve_points("roc", roc_curve, labels, scores)
    expected = np.mean([roc_auc_score(labels[~np.isnan(labels[:, k]), k],
                                      scores[~np.isnan(labels[:, k]), k]) for k in (1, 2, 3)])
    assert np.trapezoid(tpr, fpr) == pytest.approx(expected, abs=0.01)
    assert np.all(np.diff(tpr) >= 0) and tpr[-1] == 1.0


def test_multilabel_reports_draw_curves_and_single_class_runs_draw_none(tmp_path):
    """A multi-label run (Tox21, CheXpert) gets ROC and PR figures of the mean over labels;
    a run whose test labels have one class gets no (empty) ROC or PR figure."""
    from xrisk.runner.reporting import write_report

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=(30, 3)).astype(np.float64)
    labels[::4, 1] = np.nan
    _fake_run(tmp_path / "multi" / "torch-ml_soap", labels, rng.normal(size=labels.shape))
    report = write_report(tmp_path / "multi").read_text()
    assert "figures/roc.png" in report and "figures/pr.png" in report
    assert "mean over labels" in report

    _fake_run(tmp_path / "one" / "torch-pesg", np.ones(10), rng.normal(size=10))
    report = write_report(tmp_path / "one").read_text()
    assert "roc.png" not in report and "pr.png" not in report
    assert not (tmp_path / "one" / "figures" / "roc.png").exists()
