"""LibAUC argument names on the losses raise a TypeError that names the xrisk spelling.

Checked for the core definitions and the three adapters' classes, for every argument of
LibAUC 2.0.1's constructor of every registered loss: the arguments xrisk renamed or dropped
raise with the xrisk spelling and a fix (which then works); the ones xrisk keeps are taken.
The LibAUC signatures below are written from LibAUC 2.0.1's API, not from xrisk.
"""

from __future__ import annotations

import inspect
import re

import jax
import pytest

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch

FRAMEWORKS = {"core": xrisk, "torch": xtorch, "tensorflow": xtf, "jax": xjax}

#: LibAUC 2.0.1's constructor arguments of each of its losses (by the xrisk name), with example
#: values. LibAUC 2.0.1 is frozen, so this table is complete: a loss xrisk adds that LibAUC
#: lacks needs no entry (the guard is keyed by argument; it is checked on every loss below).
LIBAUC_ARGUMENTS = {
    "APLoss": dict(data_len=8, gamma=0.9, margin=1.0, surr_loss="squared_hinge",
                   device="cpu"),
    "AUCMLoss": dict(margin=1.0, imratio=None, version="v1", device="cpu"),
    "CompositionalAUCLoss": dict(margin=1.0, k=1, version="v1", imratio=None, backend="ce",
                                 device="cpu"),
    "pAUC_CVaR_Loss": dict(data_len=8, pos_len=4, num_neg=None, margin=1.0, beta=0.2, eta=0.1,
                           surr_loss="squared_hinge", device="cpu"),
    "pAUC_DRO_Loss": dict(data_len=8, gamma=0.9, margin=1.0, Lambda=1.0,
                          surr_loss="squared_hinge", device="cpu"),
    "tpAUC_KL_Loss": dict(data_len=8, tau=1.0, Lambda=1.0, gammas=(0.9, 0.9), margin=1.0,
                          surr_loss="squared_hinge", device="cpu"),
    # LibAUC's tpAUC_CVaR_loss (STACO)
    "tpAUC_CVaR_Loss": dict(data_length=8, threshold=0.5, alpha=0.1, beta_0=0.1, beta_1=0.1,
                            theta_0=0.5, theta_1=0.5, surr_loss="squared_hinge", device="cpu"),
    "PairwiseAUCLoss": dict(surr_loss="logistic", hparam=1.0),
    "MultiLabelAUCMLoss": dict(margin=1.0, version="v1", imratio=None, num_labels=3,
                               device="cpu"),
    # (LibAUC's top_k selector is not implemented: top_k= keeps Python's own TypeError)
    "meanAveragePrecisionLoss": dict(data_len=8, num_labels=3, margin=1.0, gamma=0.9,
                                     surr_loss="squared_hinge", device="cpu"),
    # its **kwargs go to the mode's loss (here pAUC_DRO_Loss's)
    "MultiLabelpAUCLoss": dict(mode="1w", num_labels=3, device="cpu", data_len=8, gamma=0.9,
                               margin=1.0, Lambda=1.0, surr_loss="squared_hinge"),
    "CrossEntropyLoss": dict(),
    "FocalLoss": dict(alpha=0.25, gamma=2, device="cpu"),
    "MIDAM_softmax_pooling_loss": dict(data_len=8, margin=1.0, tau=0.1, gamma=0.9,
                                       device="cpu"),
    "MIDAM_attention_pooling_loss": dict(data_len=8, margin=1.0, gamma=0.9, device="cpu"),
    "EntLossClassification": dict(data_size=8, alpha=10.0, gamma=0.9, is_scent=True,
                                  alpha_multiplier=1.0),
    # GCLoss_v1 (gamma_decay_epochs: LibAUC's -1 means "none", which xrisk spells None)
    "GlobalContrastiveLoss": dict(N=8, tau=0.1, gamma=0.9, eps=1e-8, device="cpu",
                                  distributed=False, enable_isogclr=False, tau_min=0.05,
                                  tau_max=0.7, rho=0.3, eta=0.01, beta=0.9,
                                  gamma_schedule="constant", gamma_decay_epochs=10),
    # GCLoss_v2 (temperature_scheme: LibAUC's 'global_constant' is xrisk's 'global')
    "BimodalContrastiveLoss": dict(N=8, tau=0.01, gamma=0.9, cache_labels=False, rank=0,
                                   world_size=1, distributed=False,
                                   temperature_scheme="global", tau_min=0.005, tau_max=0.05,
                                   rho=6.0, eta=0.01, beta=0.9, gamma_schedule="constant",
                                   gamma_decay_epochs=10),
    "ListwiseCELoss": dict(N=8, num_pos=2, gamma=0.9, eps=1e-10, device="cpu"),
    "NDCGLoss": dict(N=8, num_user=4, num_item=20, num_pos=2, gamma0=0.9, gamma1=0.9,
                     eta0=0.01, margin=1.0, topk=5, topk_version="theo", tau_1=0.01,
                     tau_2=0.0001, sigmoid_alpha=2.0, surrogate_loss="squared_hinge",
                     device="cpu"),
}

#: LibAUC name -> xrisk name (hparam: PairwiseAUCLoss's default surrogate is logistic, whose
#: hparam is the scale).
RENAMED = {"data_len": "num_samples", "data_length": "num_samples", "N": "num_samples",
           "data_size": "num_samples", "surr_loss": "surrogate",
           "Lambda": "lam", "threshold": "margin", "hparam": "scale",
           "num_user": "num_queries", "num_item": "num_items", "topk": "top_k",
           "topk_version": "top_k_version", "surrogate_loss": "surrogate"}
#: LibAUC names xrisk does not take -> what the message must say.
DROPPED = {"pos_len": "Fix: drop pos_len=", "num_neg": "Fix: drop num_neg=",
           "backend": "Fix: drop backend=", "enable_isogclr": "temperature_scheme='individual'",
           "eps": "Fix: drop eps=", "distributed": "Fix: drop distributed=",
           "rank": "Fix: drop rank=", "world_size": "Fix: drop world_size=",
           "cache_labels": "Fix: drop cache_labels=",
           "is_scent": "Fix: EntLossClassification(..., mode=",
           "num_pos": "Fix: drop num_pos="}
#: Sizes a loss needs besides the argument under test.
SIZES = {"num_samples": 8, "num_labels": 3, "num_interactions": 8, "num_queries": 4,
         "num_items": 20}
DEVICE = ("pass device= to the adapter loss (xrisk.torch.{loss}(..., device=...)); the core "
          "definition has no device")


def _cases(kind):
    return [(loss, name) for loss, arguments in LIBAUC_ARGUMENTS.items() for name in arguments
            if name in kind]


def _sizes(loss, skip=()):
    """The size arguments ``loss`` requires, but those in ``skip``."""
    parameters = inspect.signature(xrisk.LOSSES[loss]).parameters
    return {name: size for name, size in SIZES.items() if name in parameters
            and name not in skip}


def _target(loss, name):
    """The xrisk spelling of LibAUC's ``name`` for ``loss`` (N is the interaction count of
    the ranking losses, the sample count of the others)."""
    if name == "N" and "num_interactions" in inspect.signature(xrisk.LOSSES[loss]).parameters:
        return "num_interactions"
    return RENAMED[name]


def _build(framework, loss, **kwargs):
    return getattr(FRAMEWORKS[framework], loss)(**{**_sizes(loss, skip=kwargs), **kwargs})


def test_the_table_names_registered_losses():
    assert set(LIBAUC_ARGUMENTS) <= set(xrisk.LOSSES)


def _spellings_of_every_loss():
    """(loss, LibAUC spelling) for every registered loss, LibAUC's or not, whose signature has
    the xrisk spelling of a renamed LibAUC argument."""
    return [(loss, old) for loss in sorted(xrisk.LOSSES) for old, new in RENAMED.items()
            if new in inspect.signature(xrisk.LOSSES[loss]).parameters]


@pytest.mark.parametrize(("loss", "name"), _spellings_of_every_loss())
def test_every_loss_refuses_libauc_spellings_of_its_arguments(loss, name):
    """Also the losses LibAUC lacks (no table entry): the guard is keyed by argument."""
    target = RENAMED[name]
    default = inspect.signature(xrisk.LOSSES[loss]).parameters[target].default
    value = SIZES.get(target, 8) if default is inspect.Parameter.empty else default
    # (hparam's xrisk name depends on the surrogate: margin or scale; the message says which)
    with pytest.raises(TypeError, match=rf"unexpected argument {name}=.*{name} is \w+ in xrisk"):
        xrisk.LOSSES[loss](**{name: value, **_sizes(loss, skip=(target,))})


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("loss", "name"), _cases(RENAMED))
def test_renamed_argument_names_the_xrisk_spelling_and_the_fix_works(framework, loss, name):
    value = LIBAUC_ARGUMENTS[loss][name]
    target = _target(loss, name)
    kwargs = {name: value, **_sizes(loss, skip=(target,))}
    with pytest.raises(TypeError) as raised:
        getattr(FRAMEWORKS[framework], loss)(**kwargs)
    message = str(raised.value)
    assert message.startswith(f"{loss}: unexpected argument {name}={value!r}"), message
    assert f"{name} is {target} in xrisk" in message, message
    assert f"{loss}({target}=...)" in message, message
    assert f"Fix: rename {name}= to {target}=" in message, message
    built = _build(framework, loss, **{target: value})
    assert getattr(built, target) == value


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("surrogate", "targets"), [
    (None, ("scale",)), ("logistic", ("scale",)), ("squared_hinge", ("margin",)),
    ("hinge", ("margin",)), ("barrier_hinge", ("margin", "scale")),
])
def test_hparam_is_the_margin_or_the_scale_of_the_surrogate(framework, surrogate, targets):
    kwargs = {"hparam": 2.0} if surrogate is None else {"surrogate": surrogate, "hparam": 2.0}
    with pytest.raises(TypeError, match="hparam is " + " and ".join(targets) + " in xrisk"):
        FRAMEWORKS[framework].PairwiseAUCLoss(**kwargs)
    kwargs.pop("hparam")
    built = FRAMEWORKS[framework].PairwiseAUCLoss(
        **kwargs, **{target: 2.0 for target in targets})
    assert all(getattr(built, target) == 2.0 for target in targets)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("loss", "name"), _cases(DROPPED))
def test_dropped_argument_says_why_and_how_to_fix(framework, loss, name):
    with pytest.raises(TypeError) as raised:
        _build(framework, loss, **{name: LIBAUC_ARGUMENTS[loss][name]})
    message = str(raised.value)
    assert message.startswith(f"{loss}: unexpected argument {name}="), message
    assert DROPPED[name] in message, message


@pytest.mark.parametrize(("loss", "name"), _cases({"device"}))
def test_core_device_points_at_the_adapters(loss, name):
    with pytest.raises(TypeError) as raised:
        _build("core", loss, device="cuda")
    message = str(raised.value)
    assert message.startswith(f"{loss}: unexpected argument device='cuda'"), message
    assert DEVICE.format(loss=loss) in message and "Fix: " in message, message


ADAPTER_DEVICES = {"torch": "cpu", "tensorflow": "/CPU:0", "jax": jax.devices("cpu")[0]}


@pytest.mark.parametrize("framework", ADAPTER_DEVICES)
@pytest.mark.parametrize("loss", sorted(xrisk.LOSSES))
def test_adapters_take_device(framework, loss):
    _build(framework, loss, device=ADAPTER_DEVICES[framework])


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("loss", sorted(LIBAUC_ARGUMENTS))
def test_arguments_xrisk_keeps_are_taken_unchanged(framework, loss):
    kept = {name: value for name, value in LIBAUC_ARGUMENTS[loss].items()
            if name not in RENAMED and name not in DROPPED and name != "device"}
    built = _build(framework, loss, **kept)
    assert all(getattr(built, name) == value for name, value in kept.items())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_other_unknown_arguments_keep_pythons_error(framework):
    module = FRAMEWORKS[framework]
    with pytest.raises(TypeError, match=re.escape("unexpected keyword argument 'data_len'")):
        module.AUCMLoss(data_len=8)  # LibAUC's AUCMLoss has no data_len either
    with pytest.raises(TypeError, match=re.escape("unexpected keyword argument 'colour'")):
        module.APLoss(8, colour="red")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_pauc_front_door_and_subclasses_are_guarded(framework):
    module = FRAMEWORKS[framework]
    with pytest.raises(TypeError, match=r"data_len is num_samples in xrisk: pAUC_CVaR_Loss\("):
        module.pAUCLoss("SOPA", data_len=8)

    class MyAP(module.APLoss):
        pass

    with pytest.raises(TypeError, match=r"^MyAP: unexpected argument surr_loss='hinge'"):
        MyAP(8, surr_loss="hinge")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("loss", sorted(xrisk.LOSSES))
def test_the_guard_keeps_the_signatures(framework, loss):
    parameters = inspect.signature(getattr(FRAMEWORKS[framework], loss)).parameters
    core = inspect.signature(xrisk.LOSSES[loss]).parameters
    assert list(parameters)[:len(core)] == list(core)
    assert not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in parameters.values())
