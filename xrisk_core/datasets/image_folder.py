"""An image folder (one sub-folder per class, JPEG/PNG) read lazily, and its binary,
imbalanced version (LibAUC's conversion).

The images need Pillow (``pip install pillow``), imported only when an image is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._arguments import check_count
from .imbalanced import ImbalancedDataGenerator
from .indexed import IndexedDataset

__all__ = ["ImageFolder", "binary_image_folder", "read_image"]

#: The file endings read as images (case-insensitive).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def read_image(path: str | Path, *, image_size: int | None = None,
               grayscale: bool = False) -> np.ndarray:
    """One image file as float32 in [0, 1]: (H, W, 3), or (H, W) with ``grayscale``.

    ``image_size`` resizes to a square ``image_size x image_size`` (bilinear), so that the
    images of a folder stack into one batch.
    """
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("read_image: Pillow is not installed; expected it to decode JPEG/"
                          "PNG files. Fix: pip install pillow.") from None
    with Image.open(path) as image:
        image = image.convert("L" if grayscale else "RGB")
        if image_size is not None:
            image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
        pixels = np.asarray(image, dtype=np.float32)
    return pixels / np.float32(255.0)


class ImageFolder:
    """A map-style dataset of ``root/<class>/<image>`` files; item ``i`` is
    ``(image (H, W, 3) or (H, W) float32 in [0, 1], class index)``, read from disk when asked.

    Parameters
    ----------
    root : str or Path
        A folder with one sub-folder per class; the classes are the sub-folder names in
        sorted order (class ``k`` is ``classes[k]``), as torchvision's ``ImageFolder``.
    image_size : int, optional
        Resize every image to ``image_size x image_size`` (needed to batch images of
        different sizes).
    grayscale : bool, default False

    Attributes
    ----------
    classes : tuple of str
    paths : tuple of Path, length N
        Sorted by class, then by file name.
    targets : numpy.ndarray of int64, shape (N,)
        Class index of each image (listed without reading an image).

    Raises
    ------
    FileNotFoundError
        ``root`` is not a folder, or holds no class sub-folder with an image.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from PIL import Image
    >>> from xrisk.datasets import ImageFolder, IndexedDataset
    >>> root = Path(tempfile.mkdtemp())
    >>> for name in ("cat", "dog"):
    ...     (root / name).mkdir()
    ...     Image.new("RGB", (4, 4), (255, 0, 0)).save(root / name / "a.png")
    >>> folder = ImageFolder(root)
    >>> folder.classes, folder.targets.tolist(), folder[0][0].shape
    (('cat', 'dog'), [0, 1], (4, 4, 3))
    >>> x, y, index = IndexedDataset(folder).batch([1, 0])   # read lazily, two files
    >>> x.shape, y.tolist()
    ((2, 4, 4, 3), [1, 0])
    """

    def __init__(self, root: str | Path, *, image_size: int | None = None,
                 grayscale: bool = False) -> None:
        owner = "ImageFolder"
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"{owner}: root={str(root)!r} is not a folder; expected a "
                                    "folder with one sub-folder per class. Fix: check the path.")
        self.image_size = None if image_size is None else check_count(owner, "image_size",
                                                                        image_size)
        self.grayscale = bool(grayscale)
        classes: list[str] = []
        paths: list[Path] = []
        targets: list[int] = []
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
            files = sorted(p for p in folder.iterdir()
                           if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            if not files:
                continue
            targets += [len(classes)] * len(files)
            classes.append(folder.name)
            paths += files
        if not paths:
            raise FileNotFoundError(
                f"{owner}: {self.root} holds no class sub-folder with {IMAGE_EXTENSIONS} "
                "files; expected root/<class>/<image>. Fix: point root at the folder that "
                "holds the class folders.")
        self.classes = tuple(classes)
        self.paths = tuple(paths)
        self.targets = np.asarray(targets, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return (read_image(self.paths[i], image_size=self.image_size, grayscale=self.grayscale),
                int(self.targets[i]))


def binary_image_folder(root: str | Path | ImageFolder, positive_classes: Sequence[str], *,
                        imratio: float | None = None, seed: int = 0,
                        image_size: int | None = None,
                        grayscale: bool = False) -> IndexedDataset:
    """An image folder as a binary (and, on request, imbalanced) task, read lazily.

    Parameters
    ----------
    root : str, Path or ImageFolder
    positive_classes : sequence of str
        The class folders labelled 1; every other class is 0. (LibAUC's
        ``ImbalancedDataGenerator`` pools the upper half of the class indices instead; name
        those classes to get its split.)
    imratio : float in (0, 0.5], optional
        Keep every negative and the first ``floor(imratio / (1 - imratio) * negatives)``
        positives of a seeded shuffle (LibAUC's rule, :class:`ImbalancedDataGenerator`).
        Apply it to the **training** folder only: evaluate on the natural ratio.
    seed : int, default 0
    image_size, grayscale
        As :class:`ImageFolder`.

    Returns
    -------
    IndexedDataset
        Over the kept images, ``targets`` the 0/1 labels (int64, (N,)); ``dataset.data`` is
        the :class:`ImageFolder` (or a subset of it) that reads the files.

    Raises
    ------
    ValueError
        A positive class that is not a folder, or no negative class left.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from PIL import Image
    >>> from xrisk.datasets import binary_image_folder
    >>> root = Path(tempfile.mkdtemp())
    >>> for name, count in (("normal", 9), ("tumour", 5)):
    ...     (root / name).mkdir()
    ...     for i in range(count):
    ...         Image.new("L", (4, 4), i).save(root / name / f"{i}.png")
    >>> train = binary_image_folder(root, ["tumour"], imratio=0.1, seed=0)
    >>> len(train), int(train.targets.sum())
    (10, 1)
    """
    owner = "binary_image_folder"
    folder = root if isinstance(root, ImageFolder) else ImageFolder(
        root, image_size=image_size, grayscale=grayscale)
    if isinstance(positive_classes, str):
        positive_classes = [positive_classes]
    unknown = [c for c in positive_classes if c not in folder.classes]
    if unknown or not positive_classes:
        raise ValueError(f"{owner}: positive_classes={list(positive_classes)!r}; expected one "
                         f"or more of the class folders {list(folder.classes)}. Fix: name "
                         "the folders whose images are positive.")
    positive = np.isin(np.asarray(folder.classes), list(positive_classes))
    labels = positive[folder.targets].astype(np.int64)
    if labels.all():
        raise ValueError(f"{owner}: every class of {list(folder.classes)} is positive; "
                         "expected at least one negative class. Fix: name fewer classes.")
    if imratio is None:
        return IndexedDataset(folder, labels, inputs=0)
    kept, labels = ImbalancedDataGenerator(imratio, seed=seed).transform(
        np.arange(labels.size), labels)
    return IndexedDataset(_Subset(folder, kept), labels, inputs=0)


class _Subset:
    """Items ``indices[i]`` of a dataset (the kept images), still read lazily."""

    def __init__(self, data: Any, indices: np.ndarray) -> None:
        self.data, self.indices = data, np.asarray(indices, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.indices.size)

    def __getitem__(self, i: int) -> Any:
        return self.data[int(self.indices[i])]
