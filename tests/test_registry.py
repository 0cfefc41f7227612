"""The registries (xrisk._registry) and what is derived from them (issue 19)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import xrisk
from xrisk._registry import by_mode, is_public, modes_of, register
from xrisk.losses import LossDefinition
from xrisk.losses.multilabel import MultiLabelpAUCLoss, _pauc_options
from xrisk.losses.pauc import PAUC_MODES
from xrisk.optim import ClippedRule


class _Toy(LossDefinition):
    pass


class Toy(LossDefinition):  # defined outside xrisk: a user's loss is not xrisk's
    pass


def test_only_xrisk_public_classes_register():
    assert "Toy" not in xrisk.LOSSES and "_Toy" not in xrisk.LOSSES
    assert not is_public(Toy) and not is_public(xrisk.losses._binary.BinaryLoss)
    assert all(is_public(cls) for cls in (*xrisk.LOSSES.values(), *xrisk.OPTIMIZERS.values()))
    assert set(xrisk.LOSSES) <= set(xrisk.__all__) and set(xrisk.OPTIMIZERS) <= set(
        xrisk.__all__)


def test_a_second_class_of_a_registered_name_is_refused():
    registry = dict(xrisk.LOSSES)
    twin = type("APLoss", (), {"__module__": "xrisk.losses.twin"})
    with pytest.raises(TypeError, match="'APLoss' is already registered by xrisk.losses.ap"):
        register(registry, twin)


def test_front_door_modes_come_from_the_classes():
    assert {m: c.__name__ for m, c in PAUC_MODES.items()} == {
        "SOPA": "pAUC_CVaR_Loss", "SOPAs": "pAUC_DRO_Loss", "1w": "pAUC_DRO_Loss",
        "SOTAs": "tpAUC_KL_Loss", "2w": "tpAUC_KL_Loss", "STACO": "tpAUC_CVaR_Loss"}
    with pytest.raises(TypeError, match="mode 'a' is already A's"):
        modes_of([type("A", (), {"modes": ("a",)}), type("B", (), {"modes": ("a",)})])
    with pytest.raises(ValueError, match=r"mode='x'; expected one of \['a'\] \('a': A\)"):
        by_mode("Door", {"a": type("A", (), {})}, "x", "Door('a')")


def test_multilabel_pauc_options_are_the_pauc_classes_signatures():
    """Every option of every mode, defaulting to None, and each mode gets its class's
    defaults (no table restates them)."""
    parameters = inspect.signature(MultiLabelpAUCLoss).parameters
    for cls, options in _pauc_options().items():
        assert set(options) <= set(parameters)
        loss = MultiLabelpAUCLoss(2, 4, mode=cls.modes[0])
        for name, parameter in options.items():
            assert parameters[name].default is None
            assert getattr(loss, name) == parameter.default, (cls.__name__, name)
    with pytest.raises(TypeError, match="unexpected keyword argument 'rho'"):
        MultiLabelpAUCLoss(2, 4, rho=1.0)


PRESETS = [name for name, cls in xrisk.OPTIMIZERS.items()
           if issubclass(cls, ClippedRule) and cls.__dict__.get("preset") is not None]


def test_the_clipped_optimizers_are_presets_of_one_rule():
    assert sorted(PRESETS) == sorted(["SOAP", "SOPA", "SOPAs", "SOTAs", "STACO", "SONG", "SGD",
                                      "Adam", "AdamW"])
    base = inspect.signature(ClippedRule).parameters
    for name in PRESETS:
        cls = xrisk.OPTIMIZERS[name]
        parameters = inspect.signature(cls).parameters
        assert set(parameters) == set(base) - set(cls.fixed), name
        for key, parameter in parameters.items():
            assert parameter.default == cls.preset.get(key, base[key].default), (name, key)


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("mode", ["sgd", "adam"])
def test_a_preset_updates_bit_for_bit_as_the_rule_with_its_values(name, mode):
    cls = xrisk.OPTIMIZERS[name]
    options = {"learning_rate": 0.05, "epoch_decay": 1e-3}
    if "mode" in inspect.signature(cls).parameters:
        options["mode"] = mode
    preset = cls(**options)
    values = {key: getattr(preset, key) for key in inspect.signature(ClippedRule).parameters}
    rule = type("_Plain", (ClippedRule,), {"decoupled_weight_decay":
                                           cls.decoupled_weight_decay})(**values)
    rng = np.random.default_rng(0)
    params = [rng.normal(size=5), rng.normal(size=(2, 3))]
    states = [preset.init(params), rule.init(params)]
    out = [list(params), list(params)]
    for _ in range(3):
        grads = [3 * rng.normal(size=p.shape) for p in params]
        for k, opt in enumerate((preset, rule)):
            out[k], _, states[k] = opt.update(grads, states[k], out[k])
    for ours, plain in zip(*out, strict=True):
        np.testing.assert_array_equal(ours, plain)


def test_the_presets_keep_their_defaults():
    """Each preset's defaults, as the classes wrote them out before they became presets
    (LibAUC 2.0.1's: libauc-reference.md)."""
    expected = {
        "SOAP": {"weight_decay": 1e-5, "dampening": 0.1},
        "SOPAs": {"clip_value": 2.0, "weight_decay": 1e-5, "dampening": 0.1},
        "SONG": {"learning_rate": inspect.Parameter.empty, "mode": "sgd"},
        "SGD": {"learning_rate": inspect.Parameter.empty, "momentum": 0.0},
        "AdamW": {"clip_value": 10.0, "weight_decay": 1e-2},
    }
    shared = {"learning_rate": 1e-3, "mode": "adam", "clip_value": 1.0, "weight_decay": 0.0,
              "epoch_decay": 0.0, "momentum": 0.9, "nesterov": False, "dampening": 0.0,
              "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False}
    for name in PRESETS:
        parameters = inspect.signature(xrisk.OPTIMIZERS[name]).parameters
        want = {**shared, **expected.get(name, {})}
        if name in ("Adam", "AdamW"):
            want.update(momentum=None, nesterov=None, dampening=None, mode=None)
        if name == "SGD":
            want.update(mode=None, betas=None, eps=None, amsgrad=None)
        got = {key: parameters[key].default if key in parameters else None for key in want}
        assert got == want, name
