"""Paths of the data files shipped inside the package (no network access)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["data_file"]


def data_file(*parts: str) -> Path:
    """Path of a shipped data file, e.g. ``data_file("mnist_5k", "mnist_5k.csv.gz")``."""
    path = Path(str(resources.files(__package__).joinpath("data", *parts)))
    if not path.is_file():
        raise FileNotFoundError(
            f"xrisk.datasets: the data file {path} is missing; expected it to ship with the "
            "package. Fix: reinstall xrisk (the wheel includes xrisk/datasets/data)."
        )
    return path
