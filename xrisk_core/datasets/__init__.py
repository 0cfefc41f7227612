"""Data sets that load with no network, and the ``(x, y, index)`` dataset wrapper.

- imbalanced binary classification: :class:`ImbalancedDataGenerator`,
  :func:`load_breast_cancer`, :func:`load_digits` (scikit-learn), :func:`load_mnist_5k`;
- learning to rank: :func:`load_movielens` (ml-latest-small, the paper's protocol),
  :func:`load_lightgbm_rank` (query-grouped features);
- contrastive learning: :func:`contrastive_views` / :func:`augment_images` on MNIST-5k;
- :class:`IndexedDataset`.

The shipped files and their licences are listed in ``xrisk/datasets/data/README.md``.
"""

from .imbalanced import ImbalancedDataGenerator
from .indexed import IndexedDataset
from .letor import load_lightgbm_rank
from .mnist import augment_images, contrastive_views, load_mnist_5k
from .movielens import MovieLens, load_movielens
from .tabular import load_breast_cancer, load_digits

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
]
