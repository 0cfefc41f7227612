"""A CheXpert-style CSV of image paths and labels: frontal views, the five competition tasks,
a per-label policy for uncertain labels (LibAUC's CheXpert loader)."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .indexed import IndexedDataset

__all__ = ["CHEXPERT_TASKS", "CHEXPERT_UNCERTAIN", "ChestImages", "load_chexpert"]

#: The five competition tasks, in the column order of :func:`load_chexpert`'s labels.
CHEXPERT_TASKS = ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")

#: LibAUC's policy for uncertain (-1) labels: U-Ones for Edema and Atelectasis, U-Zeros for
#: the others (Irvin et al., 2019, found these best per task on the validation set).
CHEXPERT_UNCERTAIN = {"Cardiomegaly": "zeros", "Edema": "ones", "Consolidation": "zeros",
                      "Atelectasis": "ones", "Pleural Effusion": "zeros"}


class ChestImages:
    """A map-style dataset of image files, item ``i`` the (H, W) float32 image in [0, 1]
    read from ``paths[i]`` when asked (grayscale; resized to ``image_size`` squared)."""

    def __init__(self, paths: list[Path], image_size: int | None) -> None:
        self.paths, self.image_size = paths, image_size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> np.ndarray:
        from .image_folder import read_image

        return read_image(self.paths[i], image_size=self.image_size, grayscale=True)


def load_chexpert(csv_path: str | Path, image_root: str | Path = "", *,
                  uncertain: Mapping[str, str] | None = None, frontal_only: bool = True,
                  image_size: int | None = 320) -> IndexedDataset:
    """The five competition tasks of a CheXpert CSV (``train.csv``, ``valid.csv``), its
    images read lazily.

    Parameters
    ----------
    csv_path : str or Path
        Columns ``Path``, ``Frontal/Lateral`` and the five tasks (1.0 positive, 0.0 negative,
        -1.0 uncertain, empty not mentioned).
    image_root : str or Path, default ""
        Prefixed to each ``Path`` (the folder that holds ``CheXpert-v1.0-small``).
    uncertain : mapping of task to {"ones", "zeros"}, optional
        Per task, what an uncertain label becomes; tasks not named follow
        :data:`CHEXPERT_UNCERTAIN` (LibAUC's policy). A label not mentioned is 0, as in LibAUC.
    frontal_only : bool, default True
        Keep the rows whose ``Frontal/Lateral`` is ``Frontal``.
    image_size : int or None, default 320
        Square size images are resized to (LibAUC's default); None keeps their size.

    Returns
    -------
    IndexedDataset
        ``targets`` float64 (N, 5) of 0/1 in :data:`CHEXPERT_TASKS` order; ``data`` a
        :class:`ChestImages` over the files (never read here). Choose one task with
        ``IndexedDataset(ds.data, ds.targets[:, CHEXPERT_TASKS.index("Edema")])``.

    Raises
    ------
    ValueError
        A missing column, a policy other than "ones"/"zeros" or for an unknown task, or a
        label cell other than 1, 0, -1 or empty (named with its row).

    Notes
    -----
    Not done here (LibAUC does them in its loader): up-sampling the Cardiomegaly and
    Consolidation positives (use :class:`xrisk.samplers.DualSampler` instead), shuffling
    (the samplers shuffle), ImageNet normalisation and augmentation (the model's input
    pipeline).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from PIL import Image
    >>> from xrisk.datasets import load_chexpert
    >>> root = Path(tempfile.mkdtemp())
    >>> for name in ("a", "b", "c"):
    ...     Image.new("L", (8, 8), 128).save(root / f"{name}.jpg")
    >>> _ = (root / "train.csv").write_text(
    ...     "Path,Frontal/Lateral,Cardiomegaly,Edema,Consolidation,Atelectasis,Pleural Effusion\\n"
    ...     "a.jpg,Frontal,1.0,-1.0,,-1.0,0.0\\n"
    ...     "b.jpg,Lateral,1.0,1.0,1.0,1.0,1.0\\n"
    ...     "c.jpg,Frontal,-1.0,0.0,-1.0,,1.0\\n")
    >>> ds = load_chexpert(root / "train.csv", root, image_size=4)
    >>> ds.targets.tolist()
    [[1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]
    >>> ds.batch([1])[0].shape
    (1, 4, 4)
    """
    owner = "load_chexpert"
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise FileNotFoundError(f"{owner}: csv_path={str(csv_path)!r} is not a file; expected "
                                "CheXpert's train.csv or valid.csv. Fix: check the path.")
    policy = dict(CHEXPERT_UNCERTAIN)
    for task, rule in (uncertain or {}).items():
        if task not in CHEXPERT_TASKS or rule not in ("ones", "zeros"):
            raise ValueError(f"{owner}: uncertain[{task!r}] = {rule!r}; expected a task of "
                             f"{list(CHEXPERT_TASKS)} mapped to 'ones' or 'zeros'. Fix: e.g. "
                             "uncertain={'Cardiomegaly': 'ones'}.")
        policy[task] = rule
    with csv_path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        needed = ["Path", *(["Frontal/Lateral"] if frontal_only else []), *CHEXPERT_TASKS]
        missing = [c for c in needed if c not in header]
        if missing:
            raise ValueError(f"{owner}: {csv_path} lacks the columns {missing} (it has "
                             f"{header}); expected CheXpert's. Fix: pass a CheXpert-style CSV.")
        rows: list[dict[str, Any]] = list(reader)
    values = {"1.0": 1.0, "1": 1.0, "0.0": 0.0, "0": 0.0, "": 0.0}
    paths, labels = [], []
    for r, row in enumerate(rows, start=2):
        if frontal_only and row["Frontal/Lateral"] != "Frontal":
            continue
        line = []
        for task in CHEXPERT_TASKS:
            cell = (row[task] or "").strip()
            if cell in ("-1.0", "-1"):
                line.append(1.0 if policy[task] == "ones" else 0.0)
            elif cell in values:
                line.append(values[cell])
            else:
                raise ValueError(f"{csv_path}, row {r}, column {task!r}: received {cell!r}; "
                                 "expected 1.0, 0.0, -1.0 (uncertain) or empty. Fix: correct "
                                 "the cell.")
        paths.append(Path(image_root) / row["Path"])
        labels.append(line)
    if not paths:
        raise ValueError(f"{owner}: {csv_path} has no {'frontal ' if frontal_only else ''}"
                         "rows; expected at least one image. Fix: check the file, or pass "
                         "frontal_only=False.")
    targets = np.asarray(labels, dtype=np.float64)
    return IndexedDataset(ChestImages(paths, image_size), targets, inputs=None)
