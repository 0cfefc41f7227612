"""Checkpoints without pickle: numpy arrays in an ``.npz``, everything else in JSON.

A checkpoint is a pair ``epoch-0003.npz`` / ``epoch-0003.json`` in a run's ``checkpoints``
folder, and ``latest.json`` names the newest complete pair. Files are written to a temporary
name and renamed, and ``latest.json`` is renamed last, so a run killed at any moment leaves
the previous checkpoint intact. Loading uses ``np.load(..., allow_pickle=False)``.

Nested containers of arrays (a torch optimizer's ``state_dict()``) are split by
:func:`flatten_tree` into a JSON tree, where each array is replaced by its key, and a flat
dict of numpy arrays; :func:`unflatten_tree` puts them back.

>>> import numpy as np
>>> tree = {"step": 3, "betas": (0.9, 0.999), "slots": [np.zeros(2)]}
>>> skeleton, arrays = flatten_tree(tree, "opt")
>>> skeleton["__dict__"]["slots"], sorted(arrays)
([{'__array__': 'opt/slots/0'}], ['opt/slots/0'])
>>> unflatten_tree(skeleton, arrays)["betas"]
(0.9, 0.999)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["flatten_tree", "unflatten_tree", "save_checkpoint", "load_checkpoint",
           "latest_checkpoint", "write_json_atomic"]

FORMAT = 1


def flatten_tree(tree: Any, prefix: str,
                 to_numpy: Callable[[Any], np.ndarray | None] = lambda v: None,
                 ) -> tuple[Any, dict[str, np.ndarray]]:
    """Split ``tree`` into a JSON-able skeleton and its arrays.

    ``to_numpy(value)`` returns the numpy copy of a framework array, or None for anything
    else; numpy arrays and numpy scalars are taken as they are. Dict keys become strings
    (their type is kept: ``{"__int_keys__": ...}``), tuples are marked so they come back
    as tuples.
    """
    arrays: dict[str, np.ndarray] = {}

    def visit(value: Any, path: str) -> Any:
        converted = value if isinstance(value, np.ndarray) else to_numpy(value)
        if converted is not None:
            arrays[path] = np.asarray(converted)
            return {"__array__": path}
        if isinstance(value, np.generic):
            arrays[path] = np.asarray(value)
            return {"__array__": path, "scalar": True}
        if isinstance(value, Mapping):
            keys = list(value)
            if all(isinstance(k, int) and not isinstance(k, bool) for k in keys) and keys:
                return {"__int_keys__": {str(k): visit(value[k], f"{path}/{k}") for k in keys}}
            for key in keys:
                if not isinstance(key, str):
                    raise TypeError(f"checkpoint: key {key!r} at {path} is a "
                                    f"{type(key).__name__}; expected str or int keys.")
            return {"__dict__": {k: visit(v, f"{path}/{k}") for k, v in value.items()}}
        if isinstance(value, tuple):
            return {"__tuple__": [visit(v, f"{path}/{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [visit(v, f"{path}/{i}") for i, v in enumerate(value)]
        if value is None or isinstance(value, bool | int | float | str):
            if isinstance(value, float) and not np.isfinite(value):
                return {"__float__": repr(value)}
            return value
        raise TypeError(f"checkpoint: {path} holds a {type(value).__name__} ({value!r:.60}); "
                        "expected arrays, numbers, strings, lists, tuples or dicts.")

    return visit(tree, prefix), arrays


def unflatten_tree(skeleton: Any, arrays: Mapping[str, np.ndarray],
                   from_numpy: Callable[[np.ndarray], Any] = lambda a: a) -> Any:
    """The tree :func:`flatten_tree` split, arrays passed through ``from_numpy``."""
    if isinstance(skeleton, list):
        return [unflatten_tree(v, arrays, from_numpy) for v in skeleton]
    if not isinstance(skeleton, dict):
        return skeleton
    if "__array__" in skeleton:
        value = arrays[skeleton["__array__"]]
        return value[()] if skeleton.get("scalar") else from_numpy(value)
    if "__tuple__" in skeleton:
        return tuple(unflatten_tree(v, arrays, from_numpy) for v in skeleton["__tuple__"])
    if "__int_keys__" in skeleton:
        return {int(k): unflatten_tree(v, arrays, from_numpy)
                for k, v in skeleton["__int_keys__"].items()}
    if "__float__" in skeleton:
        return float(skeleton["__float__"])
    return {k: unflatten_tree(v, arrays, from_numpy) for k, v in skeleton["__dict__"].items()}


def write_json_atomic(path: Path, data: Any, *, sort_keys: bool = True) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=sort_keys))
    os.replace(temporary, path)


def save_checkpoint(folder: Path, epoch: int, arrays: Mapping[str, np.ndarray],
                    meta: Mapping[str, Any], *, keep: int = 2) -> Path:
    """Write the checkpoint of ``epoch`` (0-based, finished) and point ``latest.json`` at it;
    older pairs beyond the newest ``keep`` are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"epoch-{epoch:04d}"
    temporary = folder / f"{stem}.tmp.npz"
    savez: Any = np.savez  # typed as if a key could be its allow_pickle flag
    with temporary.open("wb") as handle:
        savez(handle, **arrays)
    os.replace(temporary, folder / f"{stem}.npz")
    write_json_atomic(folder / f"{stem}.json", {"format": FORMAT, "epoch": epoch, **meta})
    write_json_atomic(folder / "latest.json", {"format": FORMAT, "epoch": epoch, "stem": stem})
    stems = sorted(p.stem for p in folder.glob("epoch-*.json"))
    for old in stems[:-keep]:
        for suffix in (".npz", ".json"):
            (folder / f"{old}{suffix}").unlink(missing_ok=True)
    return folder / f"{stem}.npz"


def latest_checkpoint(folder: Path) -> int | None:
    """The epoch of the newest complete checkpoint in ``folder``, or None."""
    pointer = folder / "latest.json"
    if not pointer.is_file():
        return None
    return int(json.loads(pointer.read_text())["epoch"])


def load_checkpoint(folder: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of the newest checkpoint in ``folder``."""
    pointer = folder / "latest.json"
    if not pointer.is_file():
        raise FileNotFoundError(f"{folder}: no checkpoint (latest.json is missing). Fix: run "
                                "without --resume to start the run.")
    stem = json.loads(pointer.read_text())["stem"]
    meta = json.loads((folder / f"{stem}.json").read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder / stem}.json: format {meta.get('format')!r}; this xrisk "
                         f"reads format {FORMAT}. Fix: resume with the xrisk that wrote it.")
    with np.load(folder / f"{stem}.npz", allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    return arrays, meta
