"""Tox21 (shipped): 8,014 molecules, 12 toxicity tasks, missing labels; Morgan fingerprints.

The features need RDKit, an optional extra: ``pip install "xrisk[chem]"``. The labels and
SMILES load without it.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .._arguments import check_count
from ._files import data_file

__all__ = ["TOX21_TASKS", "load_tox21", "morgan_fingerprints"]

#: The 12 tasks of Tox21, in the column order of :func:`load_tox21`'s label matrix.
TOX21_TASKS = (
    "NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD", "NR-PPAR-gamma",
    "SR-ARE", "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53",
)

_CHEM_FIX = ('Fix: install the chemistry extra, pip install "xrisk[chem]" (or pip install '
             "rdkit).")


@lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray]:
    text = gzip.decompress(data_file("tox21", "tox21.csv.gz").read_bytes()).decode("ascii")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    columns = [header.index(task) for task in TOX21_TASKS]
    smiles = np.array([row[header.index("smiles")] for row in body], dtype=object)
    # An empty cell is a missing label (the assay did not test that molecule): NaN, never 0.
    labels = np.array([[float(row[c]) if row[c] else np.nan for c in columns] for row in body])
    return smiles, labels


def load_tox21() -> tuple[np.ndarray, np.ndarray]:
    """Tox21 (MoleculeNet's layout): SMILES and 12 binary toxicity labels with missing entries.

    Returns
    -------
    smiles : numpy.ndarray of str (object dtype), shape (8014,)
        One molecule per row, as SMILES.
    labels : numpy.ndarray of float64, shape (8014, 12)
        1.0 toxic, 0.0 not, NaN where the molecule was not tested (17 % of the entries);
        columns in the order of :data:`TOX21_TASKS`. Positives are 2.8-16 % of each task's
        observed entries.

    Notes
    -----
    Tox21 Data Challenge 2014 (NIH / NCATS), public data, as distributed by MoleculeNet /
    DeepChem (MIT); cite Wu et al., "MoleculeNet: a benchmark for molecular machine
    learning", Chemical Science 2018. Features: :func:`morgan_fingerprints` (needs RDKit).
    The multi-label losses (:class:`xrisk.MultiLabelAUCMLoss`,
    :class:`xrisk.meanAveragePrecisionLoss`) take the NaN entries as missing labels.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import load_tox21
    >>> smiles, labels = load_tox21()
    >>> smiles.shape, labels.shape
    ((8014,), (8014, 12))
    >>> int(np.isnan(labels).sum()), int(np.nansum(labels[:, 0]))  # missing; NR-AR positives
    (16595, 310)
    """
    smiles, labels = _raw()
    return smiles.copy(), labels.copy()


def morgan_fingerprints(smiles: Sequence[str] | Any, *, radius: int = 2,
                        num_bits: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Morgan (ECFP-like) bit fingerprints of SMILES strings, computed with RDKit.

    Parameters
    ----------
    smiles : sequence of str, length N
    radius : int, default 2
        Neighbourhood radius (2 is ECFP4).
    num_bits : int, default 2048
        Length of the folded bit vector.

    Returns
    -------
    fingerprints : numpy.ndarray of uint8, shape (N, num_bits)
        0/1 bits; all 0 for a SMILES that RDKit cannot parse.
    parsed : numpy.ndarray of bool, shape (N,)
        False where RDKit could not parse the SMILES (drop those rows).

    Raises
    ------
    ImportError
        RDKit is not installed (``pip install "xrisk[chem]"``).

    Examples
    --------
    >>> from xrisk.datasets import morgan_fingerprints
    >>> bits, parsed = morgan_fingerprints(["CCO", "c1ccccc1", "not a molecule"], num_bits=64)
    >>> bits.shape, parsed.tolist()
    ((3, 64), [True, True, False])
    """
    owner = "morgan_fingerprints"
    size = check_count(owner, "num_bits", num_bits)
    depth = check_count(owner, "radius", radius, minimum=0)
    if isinstance(smiles, str):
        raise TypeError(
            f"{owner}: smiles is one string ({smiles[:40]!r}); expected a sequence of SMILES "
            f"strings. Fix: pass a list, e.g. {owner}([{smiles[:20]!r}])."
        )
    items = list(smiles)
    bad = [item for item in items if not isinstance(item, str)]
    if bad:
        raise TypeError(
            f"{owner}: smiles holds {type(bad[0]).__name__} values (e.g. {bad[0]!r}); expected "
            "strings. Fix: pass the SMILES column as text."
        )
    try:
        from rdkit import Chem, rdBase
        from rdkit.Chem import rdFingerprintGenerator
    except ImportError as error:
        raise ImportError(f"{owner}: RDKit is not installed ({error}). {_CHEM_FIX}") from None
    rdBase.DisableLog("rdApp.*")  # unparsable SMILES are reported through ``parsed``
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=depth, fpSize=size)
    out = np.zeros((len(items), size), dtype=np.uint8)
    parsed = np.zeros(len(items), dtype=bool)
    for row, text in enumerate(items):
        molecule = Chem.MolFromSmiles(text)
        if molecule is not None:
            out[row] = generator.GetFingerprintAsNumPy(molecule)
            parsed[row] = True
    return out, parsed
