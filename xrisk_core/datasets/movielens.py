"""MovieLens ml-latest-small (shipped) with the LibAUC paper's learning-to-rank protocol."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field

import numpy as np

from .._arguments import check_choice, check_count
from ..metrics.ranking import ideal_dcg
from ..samplers._base import check_seed
from ..samplers._interactions import Interactions
from ._files import data_file

__all__ = ["MovieLens", "load_movielens"]

_SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class MovieLens:
    """Ratings split per user by time, with contiguous user and movie ids.

    Attributes
    ----------
    num_users, num_items : int
        610 users and 9,724 movies (ids ``0 .. num_users - 1`` and ``0 .. num_items - 1``).
    user_ids, movie_ids : numpy.ndarray of int64
        Original MovieLens ``userId`` of each user and ``movieId`` of each item.
    splits : dict of str to numpy.ndarray, each of shape (n, 3) float64
        ``"train"``, ``"val"``, ``"test"``: rows ``(user, item, rating)``.
    ideal_dcg_train : numpy.ndarray of float64, shape (num_users,)
        Ideal DCG of every user's training ratings (gain ``2**rating - 1``, all positions), as
        needed by the NDCG losses.
    """

    num_users: int
    num_items: int
    user_ids: np.ndarray
    movie_ids: np.ndarray
    splits: dict[str, np.ndarray]
    ideal_dcg_train: np.ndarray
    _all: Interactions = field(repr=False)

    def interactions(self, split: str = "train") -> np.ndarray:
        """Rows ``(user, item, rating)`` of a split, shape (n, 3), for ``TriSampler`` ranking."""
        return self.splits[check_choice("MovieLens", "split", split, _SPLITS)]

    def eval_candidates(
        self, split: str = "test", *, num_negatives: int = 100, seed: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidates to rank per user: the split's rated movies, then sampled unrated movies.

        Parameters
        ----------
        split : {"val", "test"}, default "test"
        num_negatives : int, default 100
            Movies drawn per user, distinct, uniformly among the movies the user never rated
            (in any split).
        seed : int, default 0

        Returns
        -------
        items : numpy.ndarray of int64, shape (num_users, per_user + num_negatives)
        relevance : numpy.ndarray of float64, same shape: the rating of the held-out movies
            and 0 for the sampled ones.
        users : numpy.ndarray of int64, shape (num_users,)

        Pass ``relevance`` and the model's scores of ``items`` to
        :func:`xrisk.metrics.ndcg_at_k`.
        """
        split = check_choice("MovieLens", "split", split, ("val", "test"),
                             fix="pass split='test', or split='val' for model selection")
        count = check_count("MovieLens", "num_negatives", num_negatives)
        rng = np.random.default_rng([check_seed("MovieLens", seed), _SPLITS.index(split)])
        rows = self.splits[split]
        users = np.unique(rows[:, 0]).astype(np.int64)
        per_user = rows.shape[0] // users.size
        held = rows.reshape(users.size, per_user, 3)  # rows are grouped per user in time order
        negatives = self._all.sample_unrated(rng, users, count)
        items = np.concatenate([held[:, :, 1].astype(np.int64), negatives], axis=1)
        relevance = np.concatenate([held[:, :, 2], np.zeros(negatives.shape)], axis=1)
        return items, relevance, users


def _read_ratings() -> np.ndarray:
    with zipfile.ZipFile(data_file("movielens", "ml-latest-small.zip")) as archive:
        text = archive.read("ml-latest-small/ratings.csv")
    return np.loadtxt(io.BytesIO(text), delimiter=",", skiprows=1, dtype=np.float64)


def load_movielens(*, num_test: int = 5, num_val: int = 5) -> MovieLens:
    """Load ml-latest-small and split it as in the LibAUC paper (NDCG experiments).

    Per user, ratings are sorted by time (ties by movie id): the last ``num_test`` are the
    test split, the ``num_val`` before them the validation split, the rest training. The
    relevance of a rated movie is its rating (0.5 to 5 stars); evaluation ranks the held-out
    movies among movies the user never rated (:meth:`MovieLens.eval_candidates`). Every user
    of ml-latest-small has at least 20 ratings.

    Returns
    -------
    MovieLens
        Training split: 100,836 - 610 * (num_test + num_val) ratings.

    Examples
    --------
    >>> from xrisk.datasets import load_movielens
    >>> data = load_movielens()
    >>> data.num_users, data.num_items, data.interactions("test").shape
    (610, 9724, (3050, 3))
    """
    test = check_count("load_movielens", "num_test", num_test)
    val = check_count("load_movielens", "num_val", num_val, minimum=0)
    table = _read_ratings()
    user_ids, user = np.unique(table[:, 0].astype(np.int64), return_inverse=True)
    movie_ids, item = np.unique(table[:, 1].astype(np.int64), return_inverse=True)
    order = np.lexsort((item, table[:, 3], user))
    user, item, rating = user[order], item[order], table[order, 2]
    counts = np.bincount(user)
    short = np.flatnonzero(counts <= test + val)
    if short.size:
        raise ValueError(
            f"load_movielens: users {short[:5].tolist()} have <= num_test + num_val = "
            f"{test + val} ratings; expected more. Fix: lower num_test or num_val."
        )
    from_end = np.repeat(counts, counts) - (
        np.arange(user.size) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    part = np.where(from_end <= test, 2, np.where(from_end <= test + val, 1, 0))
    rows = np.column_stack([user, item, rating]).astype(np.float64)
    splits = {name: rows[part == code] for code, name in enumerate(_SPLITS)}
    num_users, num_items = int(user_ids.size), int(movie_ids.size)
    train = splits["train"]
    train_counts = np.bincount(train[:, 0].astype(np.int64), minlength=num_users)
    padded = np.zeros((num_users, int(train_counts.max())))
    slot = np.arange(train.shape[0]) - np.repeat(
        np.cumsum(train_counts) - train_counts, train_counts
    )
    padded[train[:, 0].astype(np.int64), slot] = train[:, 2]
    everything = Interactions.build("load_movielens", rows[:, :2], num_items)
    return MovieLens(
        num_users, num_items, user_ids, movie_ids, splits, ideal_dcg(padded), everything
    )
