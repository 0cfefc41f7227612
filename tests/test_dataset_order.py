"""Loaders return a documented order: MNIST-5k's file is sorted by digit, the loader is not.

The contrastive guide's quick starts (docs/guides/contrastive.md) train on
``load_mnist_5k()[0][:320]``; in the file's order those are 320 zeros, a one-class "data set".
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xrisk.datasets import load_mnist_5k

#: The contrastive guide, whose quick starts moved there from the README.
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "contrastive.md"


def test_the_default_order_mixes_every_digit_into_the_first_320():
    images, digits = load_mnist_5k()
    assert set(np.unique(digits[:320]).tolist()) == set(range(10))
    np.testing.assert_array_equal(np.bincount(digits), [500] * 10)
    again_images, again_digits = load_mnist_5k()  # one documented order, call after call
    np.testing.assert_array_equal(again_digits, digits)
    np.testing.assert_array_equal(again_images, images)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_seeded_order_is_a_permutation_of_the_file(seed):
    file_images, file_digits = load_mnist_5k(shuffle=False)
    images, digits = load_mnist_5k(seed=seed)
    assert len(np.unique(digits[:320])) == 10  # P(miss a digit) ~ 10 * 0.9**320 < 1e-13
    # Rows move together: each shuffled image is the file's image of the same digit.
    order = np.lexsort(images.reshape(5000, -1).T[::-1])
    file_order = np.lexsort(file_images.reshape(5000, -1).T[::-1])
    np.testing.assert_array_equal(images[order], file_images[file_order])
    np.testing.assert_array_equal(digits[order], file_digits[file_order])


def test_the_file_order_is_still_available_and_sorted():
    _, digits = load_mnist_5k(shuffle=False)
    assert np.all(np.diff(digits) >= 0)


def test_one_vs_rest_labels_are_shuffled_too():
    _, labels = load_mnist_5k(positive_class=0)
    assert 10 < int(labels[:320].sum()) < 320  # the file would give 320 positives


def test_shuffle_must_be_a_bool():
    with pytest.raises(TypeError, match="shuffle='yes'"):
        load_mnist_5k(shuffle="yes")


def test_the_contrastive_quick_starts_train_on_several_digits():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
    slices = [line for block in blocks for line in block.splitlines()
              if "load_mnist_5k(" in line and "images =" in line]
    assert len(slices) >= 3, slices  # the torch, TensorFlow and JAX quick starts
    for line in slices:
        # The same call, with each image replaced by its row number: the line's slice of the
        # images then names the rows it trains on.
        loaded: dict = {}

        def rows_and_digits(*args, loaded=loaded, **kwargs):
            _, loaded["digits"] = load_mnist_5k(*args, **kwargs)
            return np.arange(len(loaded["digits"])), loaded["digits"]

        namespace = {"load_mnist_5k": rows_and_digits}
        exec(line.split("#")[0].strip(), namespace)  # noqa: S102 (the guide's own line)
        assert len(np.unique(loaded["digits"][namespace["images"]])) >= 5, line
