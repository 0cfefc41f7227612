"""Data sets that load with no network, and the ``(x, y, index)`` dataset wrapper.

- imbalanced binary classification: :class:`ImbalancedDataGenerator`,
  :func:`load_breast_cancer`, :func:`load_digits` (scikit-learn), :func:`load_mnist_5k`;
- learning to rank: :func:`load_movielens` (ml-latest-small, the paper's protocol),
  :func:`load_lightgbm_rank` (query-grouped features);
- contrastive learning: :func:`contrastive_views` / :func:`augment_images` on MNIST-5k;
- multi-label classification with missing labels: :func:`load_tox21` (SMILES, 12 tasks) and
  :func:`morgan_fingerprints` (needs RDKit: ``pip install "xrisk[chem]"``);
- :class:`IndexedDataset`: any array or map-style dataset (a ``numpy.memmap``, torchvision's
  ``ImageFolder``, a Hugging Face ``datasets.Dataset``) as ``(x, y, index)`` items, the
  examples read only when a batch asks for them.

The shipped files and their licences are listed in ``xrisk/datasets/data/README.md``.
"""

from .imbalanced import ImbalancedDataGenerator
from .indexed import IndexedDataset
from .letor import load_lightgbm_rank
from .mnist import augment_images, contrastive_views, load_mnist_5k
from .movielens import MovieLens, load_movielens
from .tabular import load_breast_cancer, load_digits
from .tox21 import TOX21_TASKS, load_tox21, morgan_fingerprints

__all__ = [
    "ImbalancedDataGenerator",
    "IndexedDataset",
    "load_breast_cancer",
    "load_digits",
    "load_mnist_5k",
    "augment_images",
    "contrastive_views",
    "load_movielens",
    "MovieLens",
    "load_lightgbm_rank",
    "TOX21_TASKS",
    "load_tox21",
    "morgan_fingerprints",
]
