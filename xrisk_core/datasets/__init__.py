"""Data sets that load with no network, and the ``(x, y, index)`` dataset wrapper.

- imbalanced binary classification: :class:`ImbalancedDataGenerator`,
  :func:`load_breast_cancer`, :func:`load_digits` (scikit-learn), :func:`load_mnist_5k`;
- learning to rank: :func:`load_movielens` (ml-latest-small, the paper's protocol),
  :func:`load_lightgbm_rank` (query-grouped features);
- contrastive learning: :func:`contrastive_views` / :func:`augment_images` on MNIST-5k;
- multi-label classification with missing labels: :func:`load_tox21` (SMILES, 12 tasks) and
  :func:`morgan_fingerprints` (needs RDKit: ``pip install "xrisk[chem]"``);
- files of your own: :class:`ImageFolder` / :func:`binary_image_folder` (class folders of
  JPEG/PNG, read lazily; LibAUC's imbalance conversion), :func:`load_medmnist_npz`,
  :func:`load_chexpert` (the five competition tasks, uncertain-label policy),
  :func:`read_smiles_csv` with :func:`scaffold_split` (Bemis-Murcko, RDKit);
- :class:`IndexedDataset`: any array or map-style dataset (a ``numpy.memmap``, torchvision's
  ``ImageFolder``, a Hugging Face ``datasets.Dataset``) as ``(x, y, index)`` items, the
  examples read only when a batch asks for them.

The shipped files and their licences are listed in ``xrisk/datasets/data/README.md``.
"""

from .chexpert import CHEXPERT_TASKS, CHEXPERT_UNCERTAIN, load_chexpert
from .image_folder import ImageFolder, binary_image_folder
from .imbalanced import ImbalancedDataGenerator
from .indexed import IndexedDataset
from .letor import load_lightgbm_rank
from .medmnist import load_medmnist_npz
from .mnist import augment_images, contrastive_views, load_mnist_5k
from .movielens import MovieLens, load_movielens
from .smiles import murcko_scaffolds, read_smiles_csv, scaffold_split
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
    "ImageFolder",
    "binary_image_folder",
    "load_medmnist_npz",
    "CHEXPERT_TASKS",
    "CHEXPERT_UNCERTAIN",
    "load_chexpert",
    "read_smiles_csv",
    "murcko_scaffolds",
    "scaffold_split",
]
