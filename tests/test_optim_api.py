"""The optimizers' public face: one registry, the same explicit class and signature in every
adapter, docs, readable reprs, validation with the fix in the message, LibAUC's names."""

from __future__ import annotations

import inspect
import math

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch

ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}
MIN_MAX = {"PESG": "AUCMLoss", "PDSCA": "CompositionalAUCLoss",
           "MIDAM": "AUCMLoss"}


def _parameters(callable_):
    return [(p.name, p.kind, p.default) for p in inspect.signature(callable_).parameters.values()]


@pytest.mark.parametrize("name", sorted(xrisk.OPTIMIZERS))
def test_every_adapter_has_the_entry_with_one_signature(name):
    signatures = {fw: _parameters(getattr(module, name)) for fw, module in ADAPTERS.items()}
    assert signatures["torch"] == signatures["tensorflow"] == signatures["jax"], signatures
    # = (params=None[, loss_fn=None], *, <the core rule's keyword-only hyper-parameters>)
    core = [p for p in _parameters(xrisk.OPTIMIZERS[name]) if p[0] != "loss_fn"]
    head = [("params", inspect.Parameter.POSITIONAL_OR_KEYWORD, None)]
    if name in MIN_MAX:
        head.append(("loss_fn", inspect.Parameter.POSITIONAL_OR_KEYWORD, None))
    assert signatures["torch"] == head + core
    for module in ADAPTERS.values():
        cls = getattr(module, name)
        assert name in module.__all__ and cls.rule_type is xrisk.OPTIMIZERS[name]
        # help() shows the adapter's text, then the core's parameters.
        assert "Parameters\n----------\n" in cls.__doc__
        assert "learning_rate : float or callable" in cls.__doc__


def test_registry_is_exported_by_the_core():
    for name, rule in xrisk.OPTIMIZERS.items():
        assert getattr(xrisk, name) is rule
    assert set(xrisk.OPTIMIZERS) == {"SOAP", "SOPA", "SOPAs", "SOTAs", "STACO", "SONG", "SGD",
                                     "Adam", "AdamW", "PESG", "PDSCA", "MIDAM",
                                     "LARS"}


def test_reprs_are_readable_and_hyper_parameters_exact():
    assert repr(xrisk.SGD(learning_rate=0.1)) == (
        "SGD(learning_rate=0.1, clip_value=1.0, weight_decay=0.0, epoch_decay=0.0, "
        "momentum=0.0, nesterov=False, dampening=0.0)")
    assert repr(xjax.SOAP()).startswith("xrisk.jax.SOAP(learning_rate=0.001, mode='adam'")
    assert repr(xtf.SOAP()).startswith("xrisk.tensorflow.SOAP(learning_rate=0.001")
    w = torch.zeros(2, requires_grad=True)
    assert repr(xtorch.SOAP([w])).startswith("xrisk.torch.SOAP(learning_rate=0.001")
    assert "loss_fn=AUCMLoss(margin=0.5" in repr(xjax.PESG(loss_fn=xjax.AUCMLoss(margin=0.5)))
    assert xrisk.SOAP(learning_rate=np.float32(0.5)).learning_rate == 0.5
    assert type(xrisk.SOAP(learning_rate=1).learning_rate) is float


def _build(framework, name, **kwargs):
    module = ADAPTERS[framework]
    params = [torch.zeros(2, requires_grad=True)] if framework == "torch" else None
    if name in MIN_MAX:
        kwargs.setdefault("loss_fn", getattr(module, MIN_MAX[name])())
    return getattr(module, name)(params, **kwargs)


BAD_VALUES = [
    ("SOAP", dict(dampening=1.5), ValueError, r"dampening=1.5; expected a number in \[0, 1\]"),
    ("SOAP", dict(mode="sgd", nesterov="False"), TypeError,
     r"nesterov='False' \(type str\); expected True or False"),
    ("SOAP", dict(amsgrad=1), TypeError, r"amsgrad=1 \(type int\); expected True or False"),
    ("SOAP", dict(momentum=1.0), ValueError, r"momentum=1.0; expected a number in \[0, 1\)"),
    ("PESG", dict(momentum=1.5), ValueError, r"momentum=1.5; expected a number in \[0, 1\]"),
    ("SOAP", dict(betas=(0.9, 1.0)), ValueError, r"betas=\(0.9, 1.0\); expected two numbers"),
    ("SOAP", dict(betas=0.9), ValueError, r"betas=0.9; expected two numbers"),
    ("Adam", dict(eps=0.0), ValueError, r"eps=0.0; expected a number in \(0, ∞\)"),
    ("Adam", dict(eps="1e-8"), TypeError, r"eps='1e-8' \(type str\); expected a real number"),
    ("SGD", dict(learning_rate=-0.1), ValueError, r"learning_rate=-0.1; expected a number in"),
    ("SGD", dict(learning_rate=math.nan), TypeError, r"learning_rate=nan"),
    ("SOAP", dict(clip_value=0.0), ValueError, r"clip_value=0.0; expected a number in \(0, ∞\]"),
    ("SOAP", dict(weight_decay=-1e-5), ValueError, r"weight_decay=-1e-05"),
    ("SOAP", dict(mode="rmsprop"), ValueError, r"mode='rmsprop'; expected one of \('sgd', "),
    ("SOAP", dict(mode="adam", nesterov=True), ValueError, r"Nesterov momentum needs mode='sgd'"),
    ("SOAP", dict(mode="sgd", amsgrad=True), ValueError, r"AMSGrad is a variant of Adam"),
    ("PDSCA", dict(beta2=0.0), ValueError, r"beta2=0.0; expected a number in \(0, 1\]"),
    ("PDSCA", dict(beta1=-0.1), ValueError, r"beta1=-0.1"),
]


@pytest.mark.parametrize("framework", ["core", *ADAPTERS])
@pytest.mark.parametrize("name, kwargs, error, message", BAD_VALUES)
def test_bad_hyper_parameters_name_value_expectation_and_fix(framework, name, kwargs, error,
                                                              message):
    with pytest.raises(error, match=message) as raised:
        if framework == "core":
            loss = [getattr(xrisk, MIN_MAX[name])()] if name in MIN_MAX else []
            xrisk.OPTIMIZERS[name](*loss, **kwargs)
        else:
            _build(framework, name, **kwargs)
    assert "Fix:" in str(raised.value)


LIBAUC_NAMES = [
    ("PESG", dict(margin=1.0), r"margin comes from the loss: AUCMLoss\(margin=\.\.\.\)"),
    ("SOAP", dict(lr=0.01), r"called learning_rate in xrisk.*SOAP\(\.\.\., learning_rate=0.01\)"),
    ("PDSCA", dict(lr0=0.1), r"ce_learning_rate"),
    ("SOPA", dict(eta=1.0), r"SOPA's eta had no effect in LibAUC and is dropped"),
    ("STACO", dict(loss_fn=object()), r"STACO takes no loss"),
    ("SOAP", dict(device="cuda"), r"drop device="),
    ("PESG", dict(verbose=True), r"drop verbose="),
    ("PDSCA", dict(k=3), r"k comes from the loss"),
]


@pytest.mark.parametrize("framework", ["core", *ADAPTERS])
@pytest.mark.parametrize("name, kwargs, message", LIBAUC_NAMES)
def test_libauc_argument_names_raise_naming_ours(framework, name, kwargs, message):
    with pytest.raises(TypeError, match=message):
        if framework == "core":
            loss = [getattr(xrisk, MIN_MAX[name])()] if name in MIN_MAX else []
            xrisk.OPTIMIZERS[name](*loss, **kwargs)
        else:
            _build(framework, name, **kwargs)


@pytest.mark.parametrize("framework", ADAPTERS)
def test_unknown_arguments_are_type_errors(framework):
    with pytest.raises(TypeError, match="unexpected keyword argument 'moment'"):
        _build(framework, "SOAP", moment=0.9)


@pytest.mark.parametrize("framework", ADAPTERS)
def test_min_max_optimizers_check_their_loss(framework):
    module = ADAPTERS[framework]
    with pytest.raises(TypeError, match="APLoss, which declares no ascent auxiliary"):
        _build(framework, "PESG", loss_fn=module.APLoss(4))
    with pytest.raises(TypeError, match="AUCMLoss, whose k is None"):
        _build(framework, "PDSCA", loss_fn=module.AUCMLoss())
    with pytest.raises(TypeError, match=r"loss_fn is None.*PESG\(loss_fn=loss_fn, \.\.\.\)"):
        params = [torch.zeros(1, requires_grad=True)] if framework == "torch" else None
        module.PESG(params, loss_fn=None)


def test_torch_needs_params_and_number_learning_rates():
    with pytest.raises(TypeError, match=r"params is None.*SOAP\(model.parameters\(\), \.\.\.\)"):
        xtorch.SOAP()
    with pytest.raises(TypeError, match="use a torch.optim.lr_scheduler"):
        xtorch.SOAP([torch.zeros(1, requires_grad=True)], learning_rate=lambda step: 0.1)


def test_torch_pesg_refuses_the_loss_ascent_auxiliary_as_a_parameter():
    loss_fn = xtorch.AUCMLoss()
    with pytest.raises(ValueError, match="the loss's ascent auxiliary"):
        xtorch.PESG([torch.zeros(1, requires_grad=True), loss_fn.alpha], loss_fn)
    with pytest.raises(ValueError, match="more than one parameter group"):
        xtorch.PESG([loss_fn.a], loss_fn)


def test_jax_pesg_finds_the_loss_node_by_its_type():
    loss_fn = xjax.AUCMLoss()
    xjax.PESG({"deep": [{"loss": loss_fn.init_params()}], "w": jnp.ones(2)}, loss_fn)
    with pytest.raises(ValueError, match="holds 0 AUCMParams nodes; expected exactly one"):
        xjax.PESG({"w": jnp.ones(2)}, loss_fn)
    with pytest.raises(ValueError, match="holds 2 AUCMParams nodes"):
        xjax.PESG([loss_fn.init_params(), loss_fn.init_params()], loss_fn)


def test_keras_config_round_trips_exactly():
    opt = xtf.SOAP(learning_rate=0.001, mode="sgd", betas=(0.8, 0.99))
    config = opt.get_config()
    assert config["learning_rate"] == 0.001 and type(config["learning_rate"]) is float
    rebuilt = xtf.SOAP.from_config(config)
    assert repr(rebuilt) == repr(opt)
    assert float(opt.learning_rate) == 0.001


def test_core_rules_are_frozen():
    rule = xrisk.SOAP()
    with pytest.raises(AttributeError, match="read-only"):
        rule.learning_rate = 0.1
    assert rule.replace(weight_decay=0.0).weight_decay == 0.0


def test_core_update_checks_its_arguments():
    rule = xrisk.SOAP()
    params = [np.ones(2)]
    state = rule.init(params)
    with pytest.raises(ValueError, match="1 gradients for 2 parameters"):
        rule.update([np.ones(2)], state, [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="aux=.*expected None"):
        rule.update([np.ones(2)], state, params, aux=xrisk.AUCMParams(0.0, 0.0, 0.0))


def test_tensorflow_pesg_needs_the_descent_auxiliaries_in_the_variables():
    loss_fn = xtf.AUCMLoss()
    w = tf.Variable([0.5, -0.5])
    opt = xtf.PESG(loss_fn=loss_fn)
    with pytest.raises(ValueError, match=r"lack the loss's descent auxiliaries"):
        opt.apply_gradients([(tf.ones(2), w)])


def test_optimizers_know_auxiliaries_by_role_never_by_name():
    """No optimizer code names AUC-M's a, b, alpha, its AUCMParams or its margin (as an
    attribute or a string; docstrings and the table of LibAUC's argument names aside): they
    read the loss's declared roles, bounds and ascent direction."""
    import ast
    import pathlib

    root = pathlib.Path(xrisk.__file__).parent
    files = [*root.joinpath("optim").glob("*.py"),
             *(pathlib.Path(m.__file__).parent / "optim.py" for m in ADAPTERS.values())]
    forbidden = {"a", "b", "alpha", "AUCMParams", "margin"}
    for path in files:
        tree = ast.parse(path.read_text())
        allowed = {id(node.body[0].value) for node in ast.walk(tree)  # docstrings
                   if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                   and node.body and isinstance(node.body[0], ast.Expr)}
        allowed |= {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict)
                    for key in node.keys}  # FOREIGN_ARGUMENTS: LibAUC's argument names
        for node in ast.walk(tree):
            used = (node.attr if isinstance(node, ast.Attribute) else
                    node.id if isinstance(node, ast.Name) and node.id == "AUCMParams" else
                    node.value if isinstance(node, ast.Constant) and id(node) not in allowed
                    else None)
            assert used not in forbidden, f"{path.name}:{node.lineno} uses {used!r}"
