"""Learning to rank in the runner: recipes, data (MovieLens, LETOR), TriSampler batches,
NDCG@K evaluation, and tiny torch runs (with a bit-exact resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")

from xrisk.metrics import ndcg_at_k  # noqa: E402
from xrisk.runner.methods import METHODS, defaults  # noqa: E402
from xrisk.runner.recipe import RecipeError, parse_recipe  # noqa: E402

RANKING = ("song", "ksong", "listwise_ce", "bce")


@pytest.mark.parametrize("method", RANKING)
def test_ranking_methods_parse_with_the_classes_defaults(method):
    recipe = parse_recipe({"data": {"name": "movielens"}, "method": method})
    row = METHODS[method]
    assert recipe.task == "ranking" and row.task == "ranking"
    assert recipe.sampler.name == "tri" and recipe.metric == "ndcg@10"
    assert recipe.evaluation.metrics == ("ndcg@5", "ndcg@10")
    assert recipe.loss.name == row.loss and dict(recipe.loss.options) == defaults(method)["loss"]


def test_ranking_recipes_refuse_the_other_task():
    with pytest.raises(RecipeError, match="'soap', a binary method, with ranking data.*'song'"):
        parse_recipe({"data": {"name": "letor"}, "method": "soap"})
    with pytest.raises(RecipeError, match="'song', a ranking method, with binary data"):
        parse_recipe({"data": {"name": "digits"}, "method": "song"})
    with pytest.raises(RecipeError, match="received 'auroc' for a ranking task"):
        parse_recipe({"data": {"name": "movielens"}, "method": "song",
                      "evaluation": {"metrics": ["auroc"]}})
    with pytest.raises(RecipeError, match="'ndgc@5' is not a metric"):
        parse_recipe({"data": {"name": "movielens"}, "method": "song",
                      "evaluation": {"metrics": ["ndgc@5"]}})
    with pytest.raises(RecipeError, match="loss.name: received 'APLoss'.*learning-to-rank"):
        parse_recipe({"data": {"name": "movielens"}, "loss": {"name": "APLoss"},
                      "optimizer": {"name": "Adam", "options": {"learning_rate": 0.01}}})
    with pytest.raises(RecipeError, match="task: received 'binary' with data.name 'letor'"):
        parse_recipe({"data": {"name": "letor"}, "method": "song", "task": "binary"})


@pytest.fixture(scope="module")
def letor():
    pytest.importorskip("sklearn")
    from xrisk.runner.ranking import load_ranking

    recipe = parse_recipe({"data": {"name": "letor", "validation_size": 0.25},
                           "method": "song"})
    return recipe, load_ranking(recipe.data, seed=0)


def test_letor_holds_out_validation_queries_and_pads_positions(letor):
    from xrisk.datasets import load_lightgbm_rank

    recipe, data = letor
    _, relevance, query = load_lightgbm_rank("train")
    num_val = round(0.25 * (query.max() + 1))
    assert np.unique(data.val.query_ids).size == num_val
    assert data.num_queries == query.max() + 1 - num_val
    assert data.features.shape[0] == relevance.size - data.val.relevance.size
    # every rated row is a relevant document or a padding position past its query's end
    rows = data.rows
    relevant = rows[:, 2] > 0
    assert (rows[~relevant, 1] >= data.num_candidates[rows[~relevant, 0].astype(int)]).all()
    assert (rows[relevant, 1] < data.num_candidates[rows[relevant, 0].astype(int)]).all()
    other = __import__("xrisk.runner.ranking", fromlist=["load_ranking"]).load_ranking(
        recipe.data, seed=1)
    assert not np.array_equal(np.unique(other.val.query_ids), np.unique(data.val.query_ids))


def test_batch_inputs_per_loss_and_ksong_top_k_ideal_dcg(letor):
    from xrisk.runner.ranking import batch_inputs, ranking_phases
    from xrisk.samplers import TriSampler

    _, data = letor
    sampler = TriSampler(data.rows, 6, num_pos=2, num_sampled_tasks=4, mode="ranking",
                         num_items=data.num_items, seed=0)
    items, queries = sampler.batch(0)
    shapes = {}
    for method in RANKING:
        _, phase = ranking_phases(parse_recipe({"data": {"name": "letor"}, "method": method}))
        batch = batch_inputs(phase, data, sampler, items, queries, "float64")
        assert batch["model"]["rows"].shape == items.shape
        assert np.array_equal(batch["model"]["rows"], data.offsets[queries][:, None] + items)
        shapes[method] = batch["loss"]
    assert shapes["bce"]["labels"].tolist() == ([1.0] * 2 + [0.0] * 4) * 4
    assert set(shapes["listwise_ce"]) == {"interaction", "mask"}
    assert np.array_equal(shapes["song"]["num_candidates"], data.num_candidates[queries])
    top = sampler.ranking_inputs(items, queries, ideal_k=10)
    full = sampler.ranking_inputs(items, queries)
    key = next(k for k in top if not np.array_equal(top[k], full[k]))  # the ideal DCG
    assert np.array_equal(shapes["ksong"][key], top[key])
    assert np.array_equal(shapes["song"][key], full[key])


def test_ranking_metrics_are_the_metrics_functions(letor):
    from xrisk.runner.ranking import ranking_metrics

    _, data = letor
    scores = np.random.default_rng(0).standard_normal(data.val.relevance.size)
    got = ranking_metrics(["ndcg@5", "map@3"], data.val, scores)
    assert got["ndcg@5"] == pytest.approx(float(ndcg_at_k(
        data.val.relevance, scores, 5, query_ids=data.val.query_ids)))
    assert 0 <= got["map@3"] <= 1


def test_movielens_candidates_follow_the_protocol():
    from xrisk.runner.ranking import EVAL_NEGATIVES, load_ranking

    recipe = parse_recipe({"data": {"name": "movielens", "limit": 25}, "method": "song"})
    data = load_ranking(recipe.data, seed=0)
    assert data.num_queries == 25 and data.rows[:, 0].max() == 24
    for split in (data.val, data.test):
        assert split.inputs["items"].shape == (25, 5 + EVAL_NEGATIVES)
        assert (split.relevance[:, :5] > 0).all() and (split.relevance[:, 5:] == 0).all()
    # held-out movies are not training rows of their user
    train = {(int(u), int(i)) for u, i, _ in data.rows}
    held = data.test.inputs["items"][:, :5]
    assert not any((u, int(i)) in train for u in range(25) for i in held[u])


TINY = {"name": "tiny-rank", "method": "ksong", "epochs": 3, "dtype": "float64",
        "data": {"name": "movielens", "limit": 20}, "model": {"hidden": [8]},
        "sampler": {"num_queries": 8, "num_pos": 3, "num_neg": 6},
        "schedule": {"warmup_epochs": 1, "reinit_last_layer": True, "decay_at": [0.5]},
        "evaluation": {"early_stopping": False}}


def test_a_tiny_ranking_run_resumes_bit_exactly(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    from xrisk.runner import train

    [whole] = train(TINY, tmp_path / "whole", progress=False)
    assert [row["phase"] for row in whole.history] == ["warmup", "main", "main"]
    assert set(whole.test) == {"ndcg@5", "ndcg@10"}
    assert (tmp_path / "whole" / "report.md").is_file()

    class Crash(Exception):
        pass

    def crash(epoch, batch, loss):
        if epoch == 2 and batch == 1:
            raise Crash

    with pytest.raises(Crash):
        train(TINY, tmp_path / "cut", progress=False, on_batch=crash)
    [resumed] = train(TINY, tmp_path / "cut", resume=True, progress=False)
    assert resumed.history == whole.history and resumed.test == whole.test
    saved = json.loads((tmp_path / "cut" / "torch-ksong" / "seed-0" / "result.json").read_text())
    assert saved["metric"] == "ndcg@10" and saved["test"] == whole.test


def test_the_three_frameworks_give_the_same_float64_ranking_run(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    pytest.importorskip("jax")
    from xrisk.runner import train

    # K-SONG after a ListwiseCE warm-up epoch and a redrawn output layer, a decay point:
    # NeuMF, both losses' states and SONG's Adam in play
    histories = {}
    for framework in ("torch", "tensorflow", "jax"):
        [result] = train({**TINY, "framework": framework}, tmp_path / framework,
                         progress=False, write_report=False)
        histories[framework] = np.array([[row["loss"], row["val_ndcg@10"], row["test_ndcg@5"]]
                                         for row in result.history])
    np.testing.assert_allclose(histories["tensorflow"], histories["torch"], rtol=1e-9)
    np.testing.assert_allclose(histories["jax"], histories["torch"], rtol=1e-9)


def test_reproduce_ranking_compares_the_four_methods(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    from xrisk.runner.api import reproduce

    results = reproduce("ranking", tmp_path, progress=False, overrides=[
        "seeds=1", "epochs=2", "schedule.warmup_epochs=1", "data.limit=20",
        "sampler.num_queries=8", "sampler.num_neg=10"])
    assert list(results) == ["bce", "listwise_ce", "song", "ksong"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert sorted(row[0] for row in summary["rows"]) == [
        "torch-bce", "torch-ksong", "torch-listwise_ce", "torch-song"]
    assert summary["header"][3:5] == ["test ndcg@5", "test ndcg@10"]
    assert all(row[1] == "ndcg@10" for row in summary["rows"])


def test_letor_svmlight_file_splits_its_queries(tmp_path):
    pytest.importorskip("sklearn")
    from xrisk.runner.ranking import load_ranking

    rng = np.random.default_rng(0)
    lines = []
    for q in range(40):
        for d in range(6):
            features = " ".join(f"{j + 1}:{rng.standard_normal():.3f}" for j in range(4))
            lines.append(f"{int(d < 2) * (1 + d % 2)} qid:{100 + q} {features}")
    path = tmp_path / "train.svm"
    path.write_text("\n".join(lines) + "\n")
    recipe = parse_recipe({"data": {"name": "letor", "path": str(path), "test_size": 0.25,
                                    "validation_size": 0.2}, "method": "listwise_ce"})
    data = load_ranking(recipe.data, seed=0)
    val, test = set(data.val.query_ids.tolist()), set(data.test.query_ids.tolist())
    assert (len(val), len(test), data.num_queries) == (8, 10, 22)
    assert not val & test and data.features.shape == (22 * 6, 4)
    assert data.test.relevance.tolist() == [2.0 if d == 1 else float(d == 0) for d in
                                            range(6)] * 10
    limited = load_ranking(parse_recipe({"data": {"name": "letor", "path": str(path),
                                                  "limit": 20}, "method": "song"}).data, seed=0)
    assert limited.num_queries + np.unique(limited.val.query_ids).size + np.unique(
        limited.test.query_ids).size == 20
    with pytest.raises(FileNotFoundError, match="data.path: received"):
        load_ranking(parse_recipe({"data": {"name": "letor", "path": str(tmp_path / "no")},
                                   "method": "song"}).data, seed=0)
