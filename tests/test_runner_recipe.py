"""The runner's recipe (validation, errors, overrides), its methods table and the checkpoint
codec: no framework, no training."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pydantic")
pytest.importorskip("yaml")

import xrisk  # noqa: E402
from xrisk.runner.checkpoint import (  # noqa: E402
    flatten_tree,
    load_checkpoint,
    save_checkpoint,
    unflatten_tree,
)
from xrisk.runner.methods import METHODS, class_defaults, defaults, defaults_table  # noqa: E402
from xrisk.runner.recipe import (  # noqa: E402
    RecipeError,
    apply_overrides,
    builtin_recipes,
    load_recipe,
    parse_recipe,
)

BASE = {"data": {"name": "breast_cancer"}, "method": "soap"}


def _error(raw):
    with pytest.raises(RecipeError) as info:
        parse_recipe(raw)
    return str(info.value)


def test_a_method_fills_loss_optimizer_sampler_and_target():
    recipe = parse_recipe(BASE)
    assert (recipe.loss.name, recipe.optimizer.name) == ("APLoss", "SOAP")
    assert recipe.sampler.name == "dual" and recipe.metric == "ap"
    assert recipe.loss.options == class_defaults(xrisk.APLoss)
    assert parse_recipe({**BASE, "method": "ce"}).sampler.name == "random"


def test_explicit_options_override_the_method_defaults():
    recipe = parse_recipe({**BASE, "loss": {"options": {"gamma": 0.5}},
                           "evaluation": {"target": "auroc"}})
    assert recipe.loss.options["gamma"] == 0.5 and recipe.loss.options["margin"] == 1.0
    assert recipe.metric == "auroc"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_defaults_are_the_classes_own(method):
    row = METHODS[method]
    values = defaults(method)
    for part, cls in (("loss", xrisk.LOSSES[row.loss]),
                      ("optimizer", xrisk.OPTIMIZERS[row.optimizer])):
        signature = inspect.signature(cls).parameters
        for name, value in values[part].items():
            if name in row.overrides.get(part, {}):
                continue
            default = signature[name].default
            assert value == (None if default is inspect.Parameter.empty else default)
    for key in row.search:
        part, _, name = key.partition(".")
        assert name in values[part], key  # a search range names a real option
    # every method's defaults are accepted, on data of its task
    data = {"data": {"name": {"ranking": "movielens", "contrastive": "digits",
                              "multilabel": "tox21"}[row.task]}} if row.task != "binary" else {}
    parse_recipe({**BASE, **data, "method": method})


def test_defaults_table_lists_every_method():
    table = defaults_table()
    assert all(f"`{name}`" in table for name in METHODS)


@pytest.mark.parametrize("raw, pieces", [
    ({**BASE, "epochs": 0}, ["epochs", "received 0", ">= 1", "Fix"]),
    ({**BASE, "epoch": 3}, ["epoch", "unknown field", "did you mean 'epochs'", "Fix"]),
    ({**BASE, "framework": "pytorch"}, ["framework", "'pytorch'", "'torch'", "Fix"]),
    ({**BASE, "method": "soapp"}, ["method", "'soapp'", "did you mean 'soap'", "Fix"]),
    ({**BASE, "loss": {"options": {"gama": 0.5}}},
     ["loss.options.gama", "did you mean 'gamma'", "Fix"]),
    ({**BASE, "loss": {"options": {"gamma": 1.5}}}, ["loss.options", "gamma", "1.5"]),
    ({**BASE, "data": {"name": "csv"}}, ["data.path", "Fix"]),
    ({**BASE, "data": {"name": "breast_cancer", "positive_class": 3}},
     ["data.positive_class", "Fix: remove"]),
    ({**BASE, "data": {"name": "breast_cancer", "imratio": 0.7}},
     ["data.imratio", "received 0.7", "<= 0.5"]),
    ({**BASE, "evaluation": {"metrics": ["aucroc"]}}, ["evaluation.metrics", "'aucroc'",
                                                    "did you mean 'auroc'"]),
    ({**BASE, "schedule": {"decay_at": [1.5]}}, ["schedule.decay_at", "[1.5]", "(0, 1)"]),
    ({**BASE, "schedule": {"warmup_epochs": 20}}, ["schedule.warmup_epochs", "Fix"]),
    ({"data": {"name": "breast_cancer"}}, ["loss: missing", "Fix"]),
    ({**BASE, "loss": {"name": "NDCGLoss"}}, ["loss.name", "'NDCGLoss'", "Fix"]),
    ({**BASE, "seeds": [0, 0]}, ["seeds", "distinct"]),
    ({**BASE, "data": {"name": "tox21", "task": "NR-ARR"}},
     ["data.task", "'NR-ARR'", "did you mean 'NR-AR'", "Fix"]),
    ({**BASE, "data": {"name": "digits", "task": "NR-AR"}}, ["data.task", "tox21 only"]),
    ({**BASE, "model": {"name": "resnet20"}},
     ["model.name", "'resnet20'", "'breast_cancer'", "image data", "Fix: use model.name mlp"]),
    ({**BASE, "data": {"name": "tox21"}, "method": "ml_soap", "model": {"name": "resnet20"}},
     ["model.name", "'resnet20'", "image data", "Fix"]),
    ({**BASE, "data": {"name": "tox21", "imratio": 0.1}, "method": "ml_pesg"},
     ["data.imratio", "multilabel", "Fix: remove data.imratio"]),
    ({**BASE, "data": {"name": "tox21"}, "method": "ml_bce", "sampler": {"name": "dual"}},
     ["sampler.name", "'dual'", "multilabel", "['random']"]),
    ({**BASE, "data": {"name": "tox21"}, "method": "ml_soap", "loss": {"name": "APLoss"}},
     ["loss.name", "'APLoss'", "meanAveragePrecisionLoss", "multi-label loss"]),
    ({**BASE, "data": {"name": "digits"}, "method": "ml_soap"},
     ["task: received 'multilabel'", "'digits'", "['tox21', 'chexpert', 'medmnist']"]),
    ({**BASE, "data": {"name": "digits"}, "model": {"name": "neumf"}},
     ["model.name", "'neumf'", "'digits'", "Fix"]),
    ({**BASE, "model": {"name": "resnet"}}, ["model.name", "'resnet'", "'resnet20'"]),
])
def test_errors_name_the_field_the_value_and_the_fix(raw, pieces):
    message = _error(raw)
    for piece in pieces:
        assert piece in message, (piece, message)


def test_every_problem_is_reported_at_once():
    message = _error({**BASE, "epochs": 0, "framework": "pytorch",
                      "loss": {"options": {"gama": 0.5}}})
    assert "3 problems" in message and "epochs" in message and "framework" in message
    assert "loss.options.gama" in message


def test_overrides_set_nested_fields_and_class_options():
    raw = apply_overrides(BASE, ["epochs=3", "loss.gamma=0.5", "sampler.batch_size=16",
                                 "seeds=[1, 2]"])
    recipe = parse_recipe(raw)
    assert recipe.epochs == 3 and recipe.loss.options["gamma"] == 0.5
    assert recipe.sampler.batch_size == 16 and recipe.seeds == (1, 2)
    assert BASE == {"data": {"name": "breast_cancer"}, "method": "soap"}  # not changed
    with pytest.raises(RecipeError, match="FIELD=VALUE"):
        apply_overrides(BASE, ["epochs"])
    with pytest.raises(RecipeError, match="not a section"):
        apply_overrides(BASE, ["method.x=1"])


def test_seeds_as_a_count():
    assert parse_recipe({**BASE, "seeds": 3}).seeds == (0, 1, 2)


@pytest.mark.parametrize("name", sorted(builtin_recipes()))
def test_shipped_recipes_validate(name):
    recipe = load_recipe(name)
    assert recipe.name == name


def test_an_unknown_recipe_file_names_the_shipped_ones(tmp_path):
    with pytest.raises(RecipeError, match="shipped recipe"):
        load_recipe(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [unclosed")
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe(bad)


# -- the checkpoint codec --------------------------------------------------------------------
_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
    st.text(max_size=5),
    st.builds(lambda n, s: np.arange(n, dtype=np.float64) * s, st.integers(0, 4),
              st.floats(-3, 3)))
_trees = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, max_size=3),
    st.dictionaries(st.integers(0, 5), inner, min_size=1, max_size=3)), max_leaves=8)


def _same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b) and a.dtype == b.dtype
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@given(_trees)
def test_flatten_then_unflatten_is_the_identity(tree):
    import json

    skeleton, arrays = flatten_tree(tree, "root")
    skeleton = json.loads(json.dumps(skeleton))  # what the .json file keeps
    assert _same(unflatten_tree(skeleton, arrays), tree)


def test_checkpoints_round_trip_and_keep_the_newest(tmp_path):
    for epoch in range(4):
        save_checkpoint(tmp_path, epoch, {"w": np.full(3, float(epoch))}, {"note": epoch})
    arrays, meta = load_checkpoint(tmp_path)
    assert meta["epoch"] == 3 and meta["note"] == 3 and arrays["w"].tolist() == [3.0] * 3
    assert sorted(p.name for p in tmp_path.glob("epoch-*")) == [
        "epoch-0002.json", "epoch-0002.npz", "epoch-0003.json", "epoch-0003.npz"]
    with pytest.raises(TypeError, match="expected arrays"):
        flatten_tree({"x": object()}, "root")


def test_exponent_floats_are_numbers_in_files_and_overrides(tmp_path):
    """PyYAML reads ``1e-4`` as a string (YAML 1.1); recipes read it as the number meant."""
    path = tmp_path / "r.yaml"
    path.write_text("data: {name: breast_cancer}\nmethod: soap\noptimizer:\n"
                    "  options: {learning_rate: 1e-4}\n")
    assert load_recipe(path).optimizer.options["learning_rate"] == 1e-4
    assert load_recipe(path, ["loss.margin=5e-1"]).loss.options["margin"] == 0.5


def test_the_user_guide_shows_the_generated_methods_table():
    from pathlib import Path

    guide = Path(__file__).parent.parent / "docs" / "runner.md"
    if not guide.is_file():
        pytest.skip("docs/runner.md is not shipped here")
    assert defaults_table() in guide.read_text()


@pytest.mark.parametrize("name", ["resnet20", "conv_encoder"])
def test_conv_models_take_image_data(name):
    recipe = parse_recipe({**BASE, "data": {"name": "mnist_5k"}, "model": {"name": name}})
    assert recipe.model.name == name
