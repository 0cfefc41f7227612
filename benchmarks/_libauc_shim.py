"""Import LibAUC 2.0.1 for the benchmarks without torchvision (benchmark-only helper).

LibAUC is never a dependency of xrisk; install it for benchmarking only::

    .venv/bin/pip install libauc==2.0.1 --no-deps

What LibAUC imports at module import time (2.0.1, read from the installed source):

- ``libauc.losses`` and ``libauc.optimizers``: torch, numpy, scipy (``dok_matrix``, in
  ``losses/ranking.py``) and ``libauc.utils`` (tqdm, scikit-learn). All of these are
  installed in the xrisk venv, so these two import as they are.
- ``libauc.sampler``: ``import torchvision`` at the top of ``sampler/sampler.py``, used
  only in ``ControlledDataSampler._get_labels`` for an
  ``isinstance(dataset, torchvision.datasets.ImageFolder)`` check (reached only when no
  ``labels`` are passed; the benchmarks always pass labels).
- ``libauc.datasets``: its package ``__init__`` imports every data set (PIL, cv2, pandas,
  torchvision.datasets.utils, ...). ``CustomDataset`` itself (``datasets/dataset.py``)
  needs only torch and ``from torchvision import transforms`` (imported, never used).

So, when torchvision is missing, :func:`load_libauc` puts a stub ``torchvision`` package
(``datasets.ImageFolder``: an empty class no object is an instance of; ``transforms``: an
empty module) into ``sys.modules`` for the duration of the two imports, loads
``datasets/dataset.py`` directly from its file (skipping the package ``__init__``), and
removes the stub again, so nothing else in the process sees a fake torchvision. LibAUC's
own modules keep their reference to the stub, which is all they touch.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["LibAUC", "load_libauc", "MISSING_MESSAGE"]

MISSING_MESSAGE = (
    "LibAUC is not importable, so there is nothing to compare with; skipping. "
    "Install it for benchmarking only (never as an xrisk dependency): "
    ".venv/bin/pip install libauc==2.0.1 --no-deps"
)


@dataclass(frozen=True)
class LibAUC:
    """The LibAUC pieces the benchmarks use."""

    version: str
    losses: Any  # libauc.losses
    optimizers: Any  # libauc.optimizers
    sampler: Any  # libauc.sampler
    CustomDataset: type  # libauc.datasets.dataset.CustomDataset
    stubbed: tuple[str, ...]  # names of the stub modules used during the import


def _torchvision_stub() -> dict[str, types.ModuleType]:
    """A fake ``torchvision`` with exactly the attributes LibAUC's sampler and dataset touch."""
    root = types.ModuleType("torchvision")
    root.__path__ = []  # a package, so "from torchvision import transforms" resolves
    datasets = types.ModuleType("torchvision.datasets")

    class ImageFolder:  # isinstance(labels_source, ImageFolder) is then always False
        pass

    datasets.ImageFolder = ImageFolder  # type: ignore[attr-defined]
    transforms = types.ModuleType("torchvision.transforms")
    root.datasets = datasets  # type: ignore[attr-defined]
    root.transforms = transforms  # type: ignore[attr-defined]
    return {"torchvision": root, "torchvision.datasets": datasets,
            "torchvision.transforms": transforms}


def _load_custom_dataset(package_dir: str) -> type:
    """Load ``libauc/datasets/dataset.py`` alone (its package __init__ needs PIL, cv2, ...)."""
    name = "libauc.datasets.dataset"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, f"{package_dir}/datasets/dataset.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot locate {package_dir}/datasets/dataset.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module.CustomDataset


def load_libauc() -> LibAUC | None:
    """Import LibAUC's losses, optimizers, sampler and CustomDataset; ``None`` if unavailable."""
    try:
        libauc = importlib.import_module("libauc")
        losses = importlib.import_module("libauc.losses")
        optimizers = importlib.import_module("libauc.optimizers")
    except ImportError:
        return None
    stubbed: tuple[str, ...] = ()
    try:
        importlib.import_module("torchvision")
    except ImportError:
        stub = _torchvision_stub()
        stubbed = tuple(stub)
        sys.modules.update(stub)
    try:
        sampler = importlib.import_module("libauc.sampler")
        custom_dataset = _load_custom_dataset(libauc.__path__[0])
    except ImportError:
        return None
    finally:
        for name in stubbed:  # keep the fake out of the rest of the process
            sys.modules.pop(name, None)
    return LibAUC(
        version=getattr(libauc, "__version__", "?"),
        losses=losses,
        optimizers=optimizers,
        sampler=sampler,
        CustomDataset=custom_dataset,
        stubbed=stubbed,
    )
