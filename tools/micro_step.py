"""Micro-benchmarks of an xrisk.torch step's suspects and of cheaper alternatives, each
interleaved with the others (µs per call, best of the runs). Run through
``tools/profile_step.py --parts micro``; the functions here take its arguments.

Labels name the helpers they time; a helper a checkout renamed or removed is shown as
``[n/a: ...]`` instead of stopping the run.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _libauc_shim import LibAUC
from _timing import micro_interleaved
from profile_step import build, make_model


def micro_benchmarks(args: argparse.Namespace, batches: list, lib: LibAUC) -> None:
    """Isolated costs of the suspects and of cheaper alternatives (µs per call)."""
    import array_api_compat.torch as xp

    x, y, index = batches[0]
    size = args.batch_size
    num_pos = int(y.sum())
    scores = torch.rand(size)
    u = torch.zeros(args.sizes[-1], 2)
    small = torch.rand(32)
    entries: list[tuple[str, Callable[[], Any] | None, int]] = []

    def add(label: str, fn: Callable[[], Any] | None, number: int = 100) -> None:
        if fn is not None:
            try:
                fn()
            except Exception as error:  # noqa: BLE001  (a renamed helper must not stop the run)
                label, fn = f"{label}  [n/a: {type(error).__name__}: {error}]", None
        entries.append((label, fn, number))

    def section(title: str) -> None:
        entries.append((f"[{title}]", None, 0))

    section("per-op floor")
    add("one torch op on a (32,) tensor (a + b)", lambda: small + small)
    add("torch.tensor(python float)", lambda: torch.tensor(1e-3, dtype=torch.float32))
    add("float(0-d tensor) (a host read; a device sync on a GPU)", lambda: float(scores[0]))
    section("array_api_compat wrappers")
    add("xp.take(u, index) (index_select + lt/add/where)", lambda: xp.take(u, index, axis=0))
    add("torch.index_select(u, 0, index)", lambda: torch.index_select(u, 0, index))
    add("xp.astype(scores, float32) (same dtype: copies)", lambda: xp.astype(scores, torch.float32))
    add("xp.astype(..., copy=False) (same dtype: no-op)",
        lambda: xp.astype(scores, torch.float32, copy=False))
    section("validation")
    try:
        from xrisk.backends import backend_of
        add("backend_of(scores, labels, index, state.u)",
            lambda: backend_of(scores, y, index, u, names=("s", "y", "i", "u")))
    except ImportError:
        pass
    try:
        from xrisk.backends import get_backend
        backend = get_backend("torch")
        add("backend.to_numpy(labels) (x3 in check_batch)", lambda: backend.to_numpy(y))

        def numpy_checks() -> None:
            labels_np = backend.to_numpy(y)
            labels_np[(labels_np != 0) & (labels_np != 1)]
            scores_np = backend.to_numpy(scores)
            scores_np[~np.isfinite(scores_np)]
            index_np = backend.to_numpy(index)
            index_np[(index_np < 0) | (index_np >= u.shape[0])]

        add("value checks as check_batch does them (numpy)", numpy_checks)
    except ImportError:
        pass
    add("xp.isdtype(scores.dtype, 'real floating')",
        lambda: xp.isdtype(scores.dtype, "real floating"))
    add("torch.compiler.is_compiling()", torch.compiler.is_compiling)

    def fused_check() -> bool:
        bad = (((y != 0) & (y != 1)).any() | ~torch.isfinite(scores).all()
               | (index < 0).any() | (index >= u.shape[0]).any())
        return bool(bad)

    add("alternative: the checks as torch ops + one bool()", fused_check)
    section(f"duplicate-index handling at B={size}")
    try:
        from xrisk._grouping import group_keys, last_occurrence
        from xrisk.backends import get_backend

        torch_backend = get_backend("torch")
        add("last_occurrence(index) (sort + segment max, as write_rows calls it)",
            lambda: last_occurrence(index, backend=torch_backend, xp=xp))
        add("group_keys(index) (sort + binary search, ranked in the graph)",
            lambda: group_keys(index, backend=torch_backend, xp=xp, dtype=torch.float32))
    except (ImportError, TypeError):
        pass
    add("index[:, None] == index[None, :] (B x B)", lambda: index[:, None] == index[None, :])

    def duplicate_probe() -> bool:
        ordered = torch.sort(index).values
        return bool((ordered[1:] == ordered[:-1]).any())

    add("alternative: sort + 'any duplicate?' probe (then skip)", duplicate_probe)

    def last_by_scatter() -> torch.Tensor:
        _, inverse = torch.unique(index, return_inverse=True)
        last = torch.zeros(size, dtype=torch.int64)
        return last.scatter_reduce_(0, inverse, torch.arange(size), "amax")[inverse]

    add("alternative: unique + scatter_reduce(amax) (torch only)", last_by_scatter)
    section("pair matrix and pooling")
    column, row = scores[:, None], scores[None, :]
    add(f"squared hinge on B x B = {size}x{size} (xrisk computes all rows)",
        lambda: torch.clamp(1.0 - (column - row), min=0) ** 2)
    add(f"squared hinge on n+ x B = {num_pos}x{size} (LibAUC: positive rows)",
        lambda: torch.clamp(1.0 - (column[:num_pos] - row), min=0) ** 2)
    same = (index[:, None] == index[None, :]).to(torch.float32)
    estimate = torch.rand(size, 2)
    add("(B x B) @ (B x 2) duplicate pooling matmul", lambda: same @ estimate)
    add("the same pooling as (B x 2)^T @ (B x B), transposed back (same is symmetric)",
        lambda: (estimate.T @ same).T)
    for label, fn in ap_formulations(size, num_pos):
        add(label, fn)
    section("optimizer update")
    optimizer_micro(args, add, lib)
    section("LibAUC's own hot spot")
    mask = y == 1
    mask_2d = mask[:, None].float()
    add(f"APLoss: builtin sum(pos_mask) over {size} elements", lambda: sum(mask), number=10)
    add(f"AUCMLoss: builtin sum(pos_mask) over ({size}, 1)", lambda: sum(mask_2d), number=10)
    labels = [label for label, _, _ in entries]
    if len(set(labels)) != len(labels):
        raise RuntimeError(f"duplicate micro-benchmark labels in {labels}")
    timed = {label: (fn, number) for label, fn, number in entries if fn is not None}
    best = micro_interleaved(timed, rounds=args.micro_rounds)
    width = max(len(label) for label, _, _ in entries)
    print(f"\n-- micro-benchmarks (µs per call: best of {args.micro_rounds} interleaved runs)")
    for label, _, _ in entries:
        if label.startswith("["):
            print(f"  {label}")
        else:
            print(f"    {label:<{width}}  " + (f"{best[label]:>8.1f}" if label in best else ""))


def ap_formulations(size: int, num_pos: int
                    ) -> list[tuple[str, Callable[[], Any] | None]]:
    """AP's weighted pair sum, forward + backward with autograd, in algebraically equal forms
    (benchmark-local code, float32). With w_ij = sg[(u_pos_i - u_all_i y_j) / u_all_i^2] pos_i:

    - matrix (xrisk's form): build the (B, B) weights, sum(w * pair_loss);
    - rows: sum_i a_i R_i - b_i P_i with a = sg[u_pos / u_all^2 pos], b = sg[pos / u_all],
      R = pair_loss.sum(1), P = pair_loss @ y (the row sums the estimators need anyway);
    - stacked: the same as one (2, B) @ (B, B) product; and with max(gap, 0)^2 as surrogate.
    """
    rng = torch.Generator().manual_seed(0)
    scores = torch.rand(size, generator=rng)
    y = torch.zeros(size)
    y[:num_pos] = 1
    u_all = torch.rand(size, generator=rng) + 0.5
    u_pos = torch.rand(size, generator=rng) * u_all
    safe = torch.where(y > 0, u_all, torch.ones_like(u_all))
    scale = num_pos * size

    def where_hinge(s: torch.Tensor) -> torch.Tensor:  # as xrisk.surrogates writes it
        gap = 1.0 - (s[:, None] - s[None, :])
        return torch.where(gap > 0, gap * gap, torch.zeros_like(gap))

    def clamp_hinge(s: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1.0 - (s[:, None] - s[None, :]), min=0) ** 2

    def matrix() -> torch.Tensor:
        s = scores.clone().requires_grad_(True)
        weights = (u_pos[:, None] - u_all[:, None] * y[None, :]) / (safe * safe)[:, None]
        torch.sum((weights * y[:, None]).detach() * where_hinge(s)).div(scale).backward()
        return s.grad  # type: ignore[return-value]

    def rows() -> torch.Tensor:
        s = scores.clone().requires_grad_(True)
        losses = where_hinge(s)
        a, b = u_pos / (safe * safe) * y, y / safe
        torch.sum(a * losses.sum(1) - b * (losses @ y)).div(scale).backward()
        return s.grad  # type: ignore[return-value]

    def stacked(hinge: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            s = scores.clone().requires_grad_(True)
            m = torch.stack([u_pos / (safe * safe) * y, y / safe]) @ hinge(s)  # (2, B)
            ((m[0].sum() - m[1] @ y) / scale).backward()
            return s.grad  # type: ignore[return-value]
        return run

    fns = {"matrix": matrix, "rows": rows, "stacked": stacked(where_hinge),
           "stacked_clamp": stacked(clamp_hinge)}
    reference = matrix()
    agree = all(torch.allclose(reference, fn(), rtol=1e-4, atol=1e-7) for fn in fns.values())
    return [
        ("AP pair sum fwd+bwd: (B x B) weight matrix (xrisk's form)", fns["matrix"]),
        ("  row sums R = L.sum(1), P = L @ y, no weight matrix", fns["rows"]),
        ("  one (2 x B) @ (B x B) product", fns["stacked"]),
        ("  the same with clamp(gap, 0)^2 as surrogate", fns["stacked_clamp"]),
        (f"  (every form gives the matrix form's gradient within 1e-4: {agree})", None),
    ]


class FlatMLP(torch.nn.Module):
    """The benchmark MLP with all weights in ONE parameter vector (views per layer), to time
    an optimizer on one tensor instead of four through the public API."""

    def __init__(self, reference: torch.nn.Module) -> None:
        super().__init__()
        tensors = [p.detach() for p in reference.parameters()]
        self.shapes = [t.shape for t in tensors]
        self.flat = torch.nn.Parameter(torch.cat([t.reshape(-1) for t in tensors]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = (v.view(shape) for v, shape in zip(
            self.flat.split([s.numel() for s in self.shapes]), self.shapes, strict=True))
        return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)),
                                          w2, b2)


def optimizer_micro(args: argparse.Namespace, add: Callable[..., None], lib: LibAUC) -> None:
    """One optimizer step (gradients fixed) through the public constructors: the MLP's four
    tensors vs the same weights as one flat parameter; LibAUC and torch's Adam for scale."""
    base = make_model(args.features, args.hidden, args.seed)

    def stepper(impl: str, objective: str, flat: bool) -> Callable[[], Any]:
        model = FlatMLP(base) if flat else copy.deepcopy(base)
        loss_fn, optimizer = build(impl, objective, 1000, model, lib)
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        if objective == "aucm":
            for name in ("a", "b", "alpha"):
                getattr(loss_fn, name).grad = torch.full_like(getattr(loss_fn, name), 1e-3)
        return optimizer.step

    for objective, name in (("ap", "SOAP"), ("aucm", "PESG")):
        for impl, flat, label in (("xrisk", False, f"xrisk {name}.step, MLP as 4 tensors"),
                                  ("xrisk", True, f"  xrisk {name}, the same weights as 1 "
                                                  "flat tensor"),
                                  ("libauc", False, f"LibAUC {name}.step, 4 tensors"),
                                  ("libauc", True, f"  LibAUC {name}, 1 flat tensor")):
            try:
                add(label, stepper(impl, objective, flat))
            except Exception as error:  # noqa: BLE001  (constructor APIs may change)
                add(f"{label} [n/a: {type(error).__name__}: {error}]", None)
    for foreach in (False, True):
        reference = copy.deepcopy(base)
        for p in reference.parameters():
            p.grad = torch.randn_like(p)
        adam = torch.optim.Adam(reference.parameters(), lr=1e-3, foreach=foreach)
        add(f"torch.optim.Adam(foreach={foreach}).step, 4 tensors (reference)", adam.step)


