"""A CSV of SMILES and 0/1 labels, and the Bemis-Murcko scaffold split (needs RDKit).

The featurisation is :func:`xrisk.datasets.morgan_fingerprints`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._arguments import check_interval

__all__ = ["read_smiles_csv", "murcko_scaffolds", "scaffold_split"]


def read_smiles_csv(path: str | Path, *, smiles_column: str = "smiles",
                    label_columns: Sequence[str] = ("label",)
                    ) -> tuple[np.ndarray, np.ndarray]:
    """SMILES strings and 0/1 labels of a CSV file with a header row.

    Parameters
    ----------
    path : str or Path
    smiles_column : str, default "smiles"
    label_columns : sequence of str, default ("label",)
        One column per task; an empty cell is a missing label (NaN).

    Returns
    -------
    smiles : numpy.ndarray of str, shape (N,)
    labels : numpy.ndarray of float64, shape (N, T)
        0, 1 or NaN (missing).

    Raises
    ------
    ValueError
        A missing column, or a label other than 0, 1 or empty, named with its row.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from xrisk.datasets import read_smiles_csv
    >>> path = Path(tempfile.mkdtemp()) / "mols.csv"
    >>> _ = path.write_text("smiles,active\\nCCO,1\\nc1ccccc1,\\n")
    >>> smiles, labels = read_smiles_csv(path, label_columns=["active"])
    >>> smiles.tolist(), labels[:, 0].tolist()
    (['CCO', 'c1ccccc1'], [1.0, nan])
    """
    owner = "read_smiles_csv"
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{owner}: path={str(path)!r} is not a file; expected a CSV of "
                                "SMILES. Fix: check the path.")
    if isinstance(label_columns, str):
        label_columns = [label_columns]
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
        header = list(rows[0].keys()) if rows else []
    if not rows:
        raise ValueError(f"{owner}: {path} has no data rows; expected a header and rows.")
    for column in [smiles_column, *label_columns]:
        if column not in header:
            raise ValueError(f"{owner}: column {column!r} is not in {path} (columns {header}). "
                             "Fix: pass smiles_column / label_columns naming its columns.")
    labels = np.empty((len(rows), len(label_columns)), dtype=np.float64)
    for r, row in enumerate(rows):
        for t, column in enumerate(label_columns):
            cell = (row[column] or "").strip()
            value = float(cell) if cell in ("0", "1", "0.0", "1.0") else (
                np.nan if cell == "" else None)
            if value is None:
                raise ValueError(f"{path}, row {r + 2}, column {column!r}: received {cell!r}; "
                                 "expected 0, 1 or an empty cell (missing). Fix: encode the "
                                 "label as 0/1.")
            labels[r, t] = value
    smiles = np.asarray([(row[smiles_column] or "").strip() for row in rows], dtype=object)
    return smiles.astype(str), labels


def murcko_scaffolds(smiles: Sequence[str] | Any) -> list[str | None]:
    """The Bemis-Murcko scaffold (canonical SMILES, chirality dropped) of each molecule;
    ``""`` for an acyclic molecule, None for a SMILES RDKit cannot parse.

    >>> from xrisk.datasets import murcko_scaffolds
    >>> murcko_scaffolds(["Cc1ccccc1O", "CCO", "oops"])
    ['c1ccccc1', '', None]
    """
    try:
        from rdkit import Chem, rdBase
        from rdkit.Chem.Scaffolds import MurckoScaffold
    except ImportError:
        raise ImportError('murcko_scaffolds: RDKit is not installed. Fix: pip install '
                          '"xrisk[chem]" (or pip install rdkit).') from None
    rdBase.DisableLog("rdApp.*")  # a bad SMILES is reported as None, not on stderr
    out: list[str | None] = []
    for text in smiles:
        mol = Chem.MolFromSmiles(str(text))
        out.append(None if mol is None else
                   MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=False))
    return out


def scaffold_split(smiles: Sequence[str] | Any, *, validation_size: float = 0.1,
                   test_size: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic Bemis-Murcko scaffold split: no scaffold is shared between splits.

    The convention of DeepChem and MoleculeNet/OGB: molecules are grouped by scaffold; the
    groups, **largest first** (ties: the group whose first molecule comes first), fill the
    training split while it stays within ``1 - validation_size - test_size`` of the data,
    then validation within ``1 - test_size``, the rest is test. The rare scaffolds (the
    hardest, most novel molecules) thus end up in validation and test.

    Parameters
    ----------
    smiles : sequence of str, length N
        Unparsable SMILES are left out of every split.
    validation_size, test_size : float in [0, 1), sum below 1

    Returns
    -------
    train, validation, test : numpy.ndarray of int64
        Row indices, each sorted.

    Examples
    --------
    >>> from xrisk.datasets import scaffold_split
    >>> mols = ["c1ccccc1C", "c1ccccc1O", "c1ccccc1N", "C1CCCCC1C", "CCO", "c1ccncc1"]
    >>> [part.tolist() for part in scaffold_split(mols, validation_size=0.2, test_size=0.2)]
    [[0, 1, 2], [3], [4, 5]]
    """
    owner = "scaffold_split"
    val = float(check_interval(owner, "validation_size", validation_size, low=0.0, high=1.0,
                               low_open=False, high_open=True, expected="a share in [0, 1)",
                               fix="pass e.g. validation_size=0.1", type_error=ValueError))
    test = float(check_interval(owner, "test_size", test_size, low=0.0, high=1.0,
                                low_open=False, high_open=True, expected="a share in [0, 1)",
                                fix="pass e.g. test_size=0.1", type_error=ValueError))
    if val + test >= 1:
        raise ValueError(f"{owner}: validation_size + test_size = {val + test}; expected below "
                         "1 (a training split must remain). Fix: lower them.")
    groups: dict[str, list[int]] = {}
    for i, scaffold in enumerate(murcko_scaffolds(smiles)):
        if scaffold is not None:
            groups.setdefault(scaffold, []).append(i)
    count = sum(len(g) for g in groups.values())
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0]))
    train_cut, val_cut = (1 - val - test) * count, (1 - test) * count
    parts: tuple[list[int], list[int], list[int]] = ([], [], [])
    for group in ordered:
        if len(parts[0]) + len(group) <= train_cut:
            parts[0].extend(group)
        elif len(parts[0]) + len(parts[1]) + len(group) <= val_cut:
            parts[1].extend(group)
        else:
            parts[2].extend(group)
    train_idx, val_idx, test_idx = (np.sort(np.asarray(p, dtype=np.int64)) for p in parts)
    return train_idx, val_idx, test_idx
