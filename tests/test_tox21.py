"""Tox21 (shipped) and Morgan fingerprints: shapes, missing labels as NaN, copies, bad input,
and a clear error without RDKit (the ``chem`` extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys

import numpy as np
import pytest

from xrisk.datasets import TOX21_TASKS, load_tox21, morgan_fingerprints
from xrisk.datasets._files import data_file

HAS_RDKIT = importlib.util.find_spec("rdkit") is not None
needs_rdkit = pytest.mark.skipif(not HAS_RDKIT, reason='needs RDKit: pip install "xrisk[chem]"')


def test_shipped_file_is_the_documented_one():
    digest = hashlib.sha256(data_file("tox21", "tox21.csv.gz").read_bytes()).hexdigest()
    assert digest == "dca7155cd9271648794c540ccbac1235ad7bd5ae126d1c4b84a232419772f63b"


def test_load_tox21_labels_and_missing_entries():
    smiles, labels = load_tox21()
    assert smiles.shape == (8014,) and labels.shape == (8014, len(TOX21_TASKS)) == (8014, 12)
    assert labels.dtype == np.float64 and all(isinstance(s, str) and s for s in smiles)
    observed = labels[~np.isnan(labels)]
    assert set(np.unique(observed)) == {0.0, 1.0}
    missing = np.isnan(labels).mean()
    assert 0.15 < missing < 0.2  # 16,595 empty cells: missing labels, not negatives
    rates = np.nanmean(labels, axis=0)
    assert rates.min() > 0.028 and rates.max() < 0.165  # 2.8-16 % positives per task
    assert TOX21_TASKS[0] == "NR-AR" and TOX21_TASKS[-1] == "SR-p53"


def test_load_tox21_returns_fresh_copies():
    smiles, labels = load_tox21()
    labels[:] = 7.0
    smiles[0] = "C"
    again_smiles, again = load_tox21()
    assert not (again == 7.0).any() and again_smiles[0] != "C"


@needs_rdkit
def test_morgan_fingerprints_bits_and_unparsable_rows():
    bits, parsed = morgan_fingerprints(["CCO", "c1ccccc1", "not a molecule", "CCO"],
                                       radius=2, num_bits=128)
    assert bits.shape == (4, 128) and bits.dtype == np.uint8
    assert parsed.tolist() == [True, True, False, True]
    assert set(np.unique(bits)) <= {0, 1} and bits[2].sum() == 0
    np.testing.assert_array_equal(bits[0], bits[3])  # a pure function of the molecule
    assert bits[0].sum() > 0 and not np.array_equal(bits[0], bits[1])
    wider, _ = morgan_fingerprints(["c1ccccc1CCO"], radius=3, num_bits=128)
    narrow, _ = morgan_fingerprints(["c1ccccc1CCO"], radius=0, num_bits=128)
    assert wider.sum() > narrow.sum()  # a larger radius sets more bits


@pytest.mark.parametrize(("smiles", "options", "error", "match"), [
    ("CCO", {}, TypeError, "one string"),
    (["CCO", 3], {}, TypeError, "holds int"),
    (["CCO"], {"num_bits": 0}, ValueError, "num_bits"),
    (["CCO"], {"radius": -1}, ValueError, "radius"),
])
def test_morgan_fingerprints_rejects_bad_input(smiles, options, error, match):
    with pytest.raises(error, match=match):
        morgan_fingerprints(smiles, **options)


def test_morgan_fingerprints_without_rdkit_says_how_to_install(monkeypatch):
    for name in [m for m in sys.modules if m == "rdkit" or m.startswith("rdkit.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rdkit", None)  # import rdkit -> ImportError
    with pytest.raises(ImportError, match=r'pip install "xrisk\[chem\]"'):
        morgan_fingerprints(["CCO"])
