"""The shared argument validators of ``xrisk._arguments`` and the call sites built on them.

Every message names the received value, the expectation and a "Fix:" sentence; the error
types are the historic ones (TypeError for a value of the wrong kind where the validator says
so, ValueError otherwise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xrisk
from xrisk._arguments import (
    check_choice,
    check_count,
    check_fraction,
    check_interval,
    check_positive,
)
from xrisk.datasets import ImbalancedDataGenerator
from xrisk.metrics import (
    auroc,
    ndcg_at_k,
    one_way_partial_auroc,
    precision_at_k,
    two_way_partial_auroc,
)
from xrisk.samplers import DualSampler, TriSampler


def _fails(error, call, *texts):
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    for text in (*texts, "; expected ", "Fix: "):
        assert text in message, message
    return message


# -- check_interval ------------------------------------------------------------------------

@given(st.floats(allow_nan=False), st.floats(-2, 2), st.floats(-2, 2), st.booleans(),
       st.booleans())
def test_check_interval_matches_the_interval(value, a, b, low_open, high_open):
    low, high = min(a, b), max(a, b)
    inside = ((low < value or (not low_open and value == low))
              and (value < high or (not high_open and value == high)))
    if inside:
        assert check_interval("Owner", "x", value, low=low, high=high, low_open=low_open,
                              high_open=high_open) == value
    else:
        _fails(ValueError, lambda: check_interval("Owner", "x", value, low=low, high=high,
                                                  low_open=low_open, high_open=high_open),
               f"Owner: x={value!r}", "a number in ")


def test_check_interval_texts_and_infinity():
    message = _fails(ValueError, lambda: check_interval("O", "eps", 0.0, low=0.0, low_open=True),
                     "eps=0.0", "a number in (0, ∞)", "Fix: pass eps in (0, ∞).")
    assert message == "O: eps=0.0; expected a number in (0, ∞). Fix: pass eps in (0, ∞)."
    # infinity passes a closed infinite end only; the default open end asks for a finite one
    assert check_interval("O", "clip", math.inf, low=0.0, high_open=False) == math.inf
    _fails(ValueError, lambda: check_interval("O", "clip", math.inf, low=0.0), "clip=inf")
    _fails(ValueError, lambda: check_interval("O", "w", -math.inf, low=0.0), "w=-inf")


@pytest.mark.parametrize("value", ["0.5", True, np.True_, None, [0.5], np.array([0.5]),
                                   1 + 2j, math.nan, np.float32("nan")])
def test_check_interval_refuses_what_is_not_a_real_number(value):
    _fails(TypeError, lambda: check_interval("O", "x", value, low=0.0),
           f"x={value!r} (type {type(value).__name__})", "a real number in [0, ∞)")
    _fails(ValueError, lambda: check_interval("O", "x", value, low=0.0, type_error=ValueError),
           f"x={value!r}")


def test_check_interval_keeps_python_floats_and_converts_scalars():
    value = 0.1 + 0.2
    assert check_interval("O", "x", value, low=0.0) is value
    for scalar in (np.float32(0.5), np.int64(1), np.array(0.25), 1):
        result = check_interval("O", "x", scalar, low=0.0)
        assert type(result) is float and result == float(scalar)


def test_check_interval_custom_expectation_and_fix():
    message = _fails(ValueError, lambda: check_interval(
        "O", "rate", 1.0, low=0.0, high=1.0, low_open=True, expected="a share in (0, 1)",
        fix="pass e.g. rate=0.2"), "rate=1.0")
    assert message == "O: rate=1.0; expected a share in (0, 1). Fix: pass e.g. rate=0.2."


# -- the validators built on it ------------------------------------------------------------

@pytest.mark.parametrize(("call", "texts"), [
    (lambda: check_positive("L", "margin", -1), ("margin=-1", "a finite number > 0")),
    (lambda: check_positive("L", "margin", math.inf), ("margin=inf", "a finite number > 0")),
    (lambda: check_positive("L", "margin", "1"), ("margin='1'", "a finite number > 0")),
    (lambda: check_positive("L", "gamma", -0.5, allow_zero=True), ("a finite number >= 0",)),
    (lambda: check_fraction("L", "gamma", 0.0), ("gamma=0.0", "a number in (0, 1]")),
    (lambda: check_fraction("L", "gamma", True), ("gamma=True (type bool)", "number in (0, 1]")),
    (lambda: check_fraction("L", "alpha", 1.5, closed_low=True), ("a number in [0, 1]",)),
    (lambda: check_count("L", "n", 0), ("n=0", "an integer >= 1")),
    (lambda: check_choice("L", "version", "v3", ("v1", "v2")),
     ("version='v3'", "one of ('v1', 'v2')", "Fix: pass version='v1', for example.")),
])
def test_validators_raise_value_error_with_value_expectation_and_fix(call, texts):
    _fails(ValueError, call, *texts)


def test_check_positive_and_fraction_accept_their_intervals():
    assert check_positive("L", "m", 2) == 2.0 and check_positive("L", "g", 0, allow_zero=True) == 0
    assert check_fraction("L", "g", 1) == 1.0 and check_fraction("L", "a", 0, closed_low=True) == 0


@pytest.mark.parametrize("value", [10.0, "10", True, np.bool_(True), np.array(3.0), None])
def test_check_count_refuses_non_integers(value):
    _fails(TypeError, lambda: check_count("L", "n", value), f"n={value!r}", "an integer >= 1")
    _fails(ValueError, lambda: check_count("L", "n", value, type_error=ValueError), "n=")


@pytest.mark.parametrize("value", [3, np.int8(3), np.uint64(3), np.array(3)])
def test_check_count_accepts_integers_and_0d_integer_arrays(value):
    result = check_count("L", "n", value)
    assert type(result) is int and result == 3


def test_check_count_custom_fix():
    message = _fails(ValueError, lambda: check_count("L", "k", 0, fix="pass e.g. k=10"), "k=0")
    assert message.endswith("Fix: pass e.g. k=10.")


def test_check_choice_matches_strings_and_constants():
    assert type(check_choice("L", "s", np.str_("a"), ("a", "b"))) is str
    assert check_choice("L", "average", None, ("macro", None)) is None
    _fails(ValueError, lambda: check_choice("L", "average", 0, ("macro", None)), "average=0")
    _fails(ValueError, lambda: check_choice("L", "flag", 1, (True, False)), "flag=1")
    _fails(ValueError, lambda: check_choice("L", "s", ["a"], ("a",)), "s=['a']")


# -- call sites: metrics, data sets, samplers, losses, the check switch -------------------

Y, S = [0, 1, 0, 1], [0.1, 0.8, 0.3, 0.6]
BAD_CALLS = [
    (lambda: auroc(Y, S, average="micro"), "average='micro'", "one of ('macro', None)"),
    (lambda: one_way_partial_auroc(Y, S, max_fpr=0.0), "max_fpr=0.0", "a number in (0, 1]"),
    (lambda: one_way_partial_auroc(Y, S, max_fpr="0.3"), "max_fpr='0.3'", "(0, 1]"),
    (lambda: one_way_partial_auroc(Y, S, max_fpr=0.3, scale="x"), "scale='x'", "one of"),
    (lambda: two_way_partial_auroc(Y, S, max_fpr=0.5, min_tpr=1.0), "min_tpr=1.0", "[0, 1)"),
    (lambda: two_way_partial_auroc(Y, S, max_fpr=0.5, min_tpr=0.5, scale="mcclish"),
     "scale='mcclish'", "one of ('normalized', 'raw')"),
    (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 0), "k=0", "an integer >= 1"),
    (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 2.5), "k=2.5", "an integer >= 1"),
    (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 1, gain="log"), "gain='log'", "one of"),
    (lambda: precision_at_k([[1, 0]], [[0.1, 0.2]], 1, ties="random"), "ties='random'",
     "one of"),
    (lambda: ndcg_at_k([[1, 0]], [[0.1, 0.2]], 1, average="median"), "average='median'",
     "one of ('mean', None)"),
    (lambda: ImbalancedDataGenerator(0.7), "imratio=0.7", "a number in (0, 0.5]"),
    (lambda: ImbalancedDataGenerator(True), "imratio=True", "a number in (0, 0.5]"),
    (lambda: DualSampler(np.array([1, 0, 0, 0]), 2, sampling_rate=1.0), "sampling_rate=1.0",
     "a number in (0, 1)"),
    (lambda: TriSampler(np.array([[1, 0], [0, 1]]), 2, mode="dense"), "mode='dense'",
     "one of ('classification', 'ranking')"),
    (lambda: xrisk.APLoss(10, margin=0.0), "margin=0.0", "a finite number > 0"),
    (lambda: xrisk.AUCMLoss(imratio=1.5), "imratio=1.5", "a number in (0, 1]"),
    (lambda: xrisk.AUCMLoss(version="v3"), "version='v3'", "one of ('v1', 'v2')"),
    (lambda: xrisk.set_checks("loud"), "mode='loud'", "one of ('nan', 'raise')"),
]


@pytest.mark.parametrize(("call", "value", "expectation"), BAD_CALLS)
def test_bad_arguments_name_value_expectation_and_fix(call, value, expectation):
    _fails(ValueError, call, value, expectation)


@pytest.mark.parametrize(("state", "error", "value"), [
    ({"seed": 5, "epoch": 2.0, "position": 0}, TypeError, "state['epoch']=2.0 (type float)"),
    ({"seed": 5, "epoch": -1, "position": 0}, ValueError, "state['epoch']=-1"),
])
def test_sampler_state_values_are_checked_like_counts(state, error, value):
    sampler = DualSampler(np.array([1, 0] * 10), 4, num_pos=2, seed=5)
    _fails(error, lambda: sampler.load_state_dict(state), value, "an integer >= 0",
           "Fix: load the dict returned by state_dict() unchanged")


def test_sampler_state_accepts_0d_integer_arrays():
    sampler = DualSampler(np.array([1, 0] * 10), 4, num_pos=2, seed=5)
    sampler.load_state_dict({"seed": np.array(5), "epoch": np.int32(2), "position": 1})
    assert sampler.state_dict() == {"seed": 5, "epoch": 2, "position": 1}


@given(batch=st.integers(1, 9), column=st.booleans())
def test_a_passed_batch_signature_does_not_excuse_a_later_bad_one(batch, column):
    """check_inputs remembers shapes and dtypes that passed its static checks; a later call
    with another signature is checked in full, and a remembered (B, 1) input is still
    reshaped."""
    loss = xrisk.APLoss(20)
    state = loss.init(xp=np, dtype=np.float64)
    rng = np.random.default_rng(batch)
    scores = rng.uniform(size=(batch, 1) if column else batch)
    labels = np.arange(batch) % 2
    index = np.arange(batch)
    first, _ = loss.apply(state, scores, labels, index)
    again, _ = loss.apply(state, scores, labels, index)  # the remembered signature
    assert again == first
    flat, _ = loss.apply(state, np.reshape(scores, -1), labels, index)
    assert flat == first
    _fails(ValueError, lambda: loss.apply(state, scores, labels[:-1], index), "sizes differ")
    _fails(TypeError, lambda: loss.apply(state, scores, labels, index.astype(float)), "dtype")
    _fails(ValueError, lambda: loss.apply(state, np.ones((batch, 2)), labels, index), "shape")
    with pytest.raises(ValueError, match="must be 0 or 1"):
        loss.apply(state, scores, labels + 2, index)


def test_declarations_are_computed_once_and_handed_out_as_copies():
    loss = xrisk.pAUC_CVaR_Loss(10)
    tables = loss.state_tables()
    tables.clear()  # a caller's edit of its copy
    assert list(loss.state_tables()) == list(xrisk.pAUC_CVaR_Loss(10).state_tables())
    assert loss.inputs() is loss.inputs()  # tuples are immutable: one object


@given(dtype=st.sampled_from([np.float16, np.float32, np.float64]), data=st.data())
def test_the_one_reduction_interval_proof_is_exact(dtype, data):
    """The host check of probabilities proves [0, 1] from the largest unsigned view of the
    floats; it must be true exactly for finite values in [+0, 1] (anything else, -0 included,
    falls back to the exact min/max check), and a batch of every kind of value gives the same
    outcome (pass, warn, raise) as the exact rule."""
    import warnings

    from xrisk._value_checks import _inside_interval

    values = np.asarray(data.draw(st.lists(st.floats(width=np.finfo(dtype).bits,
                                                     allow_nan=True, allow_infinity=True),
                                           max_size=8)), dtype=dtype)
    inside = _inside_interval((0.0, 1.0), values.dtype)

    def exact(v):
        return bool(np.all((v >= 0) & (v <= 1) & ~np.signbit(v)))

    assert inside(values) == exact(values)
    one, zero = np.asarray(1, dtype), np.asarray(0, dtype)
    for edge in (0.0, -0.0, 1.0, np.nextafter(one, 2 * one), np.nextafter(zero, -one),
                 np.nextafter(zero, one), np.nan, -np.nan, np.inf, -np.inf, 0.5):
        edge = np.asarray([edge], dtype)
        assert inside(edge) == exact(edge), edge
    loss = xrisk.APLoss(20)
    state = loss.init(xp=np, dtype=np.float64)
    labels, index = np.arange(values.size) % 2, np.arange(values.size)
    finite = bool(np.all(np.isfinite(values)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if finite:
            loss.apply(state, values, labels, index)
        else:
            with pytest.raises(ValueError, match="non-finite"):
                loss.apply(state, values, labels, index)
    outside = finite and values.size and not bool(np.all((values >= 0) & (values <= 1)))
    assert len([w for w in caught if issubclass(w.category, xrisk.InputWarning)]) == outside


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8, np.bool_])
def test_the_one_reduction_relevance_proof_is_exact(dtype):
    """Every value of a one- or two-byte dtype: the quick proof of graded relevance (finite,
    >= +0) never holds where the exact rule fails (-0 and unsigned dtypes fall back to the
    exact check), and holds for every finite value > 0."""
    from xrisk._value_checks import _quick_proof

    spec = next(s for s in xrisk.NDCGLoss(5, 3, 8).inputs() if s.kind == "relevance")
    bits = np.dtype(dtype).itemsize * 8
    every = np.arange(2**bits, dtype=np.uint16 if bits == 16 else np.uint8)
    values = every.view(dtype) if dtype is not np.bool_ else np.array([False, True])
    proof = _quick_proof(spec, values.dtype, {})
    for value in values:
        one = np.asarray([value], dtype=values.dtype)
        exact = bool(np.isfinite(one.astype(np.float64)).all() and (one >= 0).all())
        assert not proof(one) or exact, one  # never a false proof
        if exact and values.dtype.kind in "if" and not np.signbit(one).any():
            assert proof(one), one  # and no needless fallback where it applies
