"""Multi-label classification with missing labels in PyTorch: Tox21, mean AUROC and mean AP.

Tox21 (shipped) holds 8,014 molecules and 12 toxicity assays; 2.8-16 % of each assay's
tested molecules are toxic and 17 % of the labels are missing (not tested). The molecules
become 2048-bit Morgan fingerprints (radius 2) through RDKit, an optional extra
(``pip install "xrisk[chem]"``). An MLP (fingerprint -> 128 -> 12 logits) is trained with

- ``CE``: binary cross-entropy per label, missing labels masked out, Adam, random batches;
- ``AUCM``: ``MultiLabelAUCMLoss`` (AUC-margin per label) with ``PESG``, a new proximal
  stage (``update_regularizer``) at 50 % and 75 % of the epochs;
- ``mAP``: ``meanAveragePrecisionLoss`` (SOAP per label, state per label x molecule) with
  ``SOAP``.

The X-risk losses take the label matrix with NaN at the missing entries (left out of the
loss, gradient and state) and read ``TriSampler`` batches: for every task, 4 of its
positives and 4 of its negatives, with the task of each row. The molecules are split 80/20
at random; the script prints the test mean AUROC and mean AP over the tasks (each on its
tested molecules), as measured (not asserted)::

    python examples/tox21_multilabel.py
    python examples/tox21_multilabel.py --methods CE,mAP --epochs 5 --molecules 2000

docs/guides/multilabel.md explains the losses; ``training_loop.py`` shows a loop of the same
shape in TensorFlow and JAX (change the loss, the sampler and ``import xrisk.<framework>``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812  (torch's own convention)

import xrisk.torch as xr
from xrisk.datasets import load_tox21, morgan_fingerprints
from xrisk.metrics import auroc, average_precision
from xrisk.samplers import RandomSampler, TriSampler

METHODS = ("CE", "AUCM", "mAP")


def load_data(molecules: int | None, bits: int, tasks: int, seed: int) -> tuple[np.ndarray, ...]:
    """Fingerprints (float32 0/1), labels (float32, NaN = missing); a random 80/20 split."""
    smiles, labels = load_tox21()
    order = np.random.default_rng(seed).permutation(len(smiles))[:molecules]
    try:
        x, parsed = morgan_fingerprints(smiles[order], radius=2, num_bits=bits)
    except ImportError as error:
        raise SystemExit(f"tox21_multilabel.py needs RDKit for the molecule features.\n{error}"
                         ) from None
    x, y = x[parsed].astype(np.float32), labels[order][parsed][:, :tasks].astype(np.float32)
    cut = len(y) // 5  # the order is already random
    return x[cut:], y[cut:], x[:cut], y[:cut]


def mean_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Mean AUROC and AP over the tasks whose tested test molecules hold both classes."""
    rows = []
    for task in range(labels.shape[1]):
        seen = ~np.isnan(labels[:, task])
        y, s = labels[seen, task], scores[seen, task]
        if 0 < y.sum() < y.size:
            rows.append((auroc(y, s), average_precision(y, s)))
    return {"mean AUROC": float(np.mean([r[0] for r in rows])),
            "mean AP": float(np.mean([r[1] for r in rows]))}


def train(method: str, x_train, y_train, x_test, args) -> np.ndarray:
    """Train one method; return the test logits (molecules, tasks)."""
    torch.manual_seed(args.seed)
    num, tasks = y_train.shape
    model = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], args.hidden),
                                torch.nn.ReLU(), torch.nn.Linear(args.hidden, tasks))
    if method == "CE":
        loss_fn, sampler = None, RandomSampler(num, 64, seed=args.seed)
        optimizer = xr.Adam(model.parameters(), learning_rate=1e-3)
    else:
        sampler = TriSampler(y_train, args.per_task, sampling_rate=0.5, seed=args.seed)
    if method == "AUCM":
        loss_fn = xr.MultiLabelAUCMLoss(num_labels=tasks, margin=1.0, version="v2")
        optimizer = xr.PESG(model.parameters(), loss_fn, learning_rate=0.1, epoch_decay=2e-3,
                            weight_decay=1e-5)
    elif method == "mAP":
        loss_fn = xr.meanAveragePrecisionLoss(num_samples=num, num_labels=tasks, margin=1.0,
                                              gamma=0.9)
        optimizer = xr.SOAP(model.parameters(), learning_rate=1e-3)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for epoch in range(args.epochs):
        if method == "AUCM" and epoch in (args.epochs // 2, 3 * args.epochs // 4) and epoch:
            optimizer.update_regularizer(decay_factor=10)
        sampler.set_epoch(epoch)
        for batch in sampler:
            index = torch.from_numpy(batch if loss_fn is None else batch[0])
            logits, labels = model(x[index]), y[index]
            if loss_fn is None:  # masked binary cross-entropy
                seen = ~torch.isnan(labels)
                loss = F.binary_cross_entropy_with_logits(logits[seen], labels[seen])
            elif method == "AUCM":
                loss = loss_fn(torch.sigmoid(logits), labels, task=torch.from_numpy(batch[1]))
            else:
                loss = loss_fn(torch.sigmoid(logits), labels, index, torch.from_numpy(batch[1]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"  {method} epoch {epoch + 1}: loss {loss.item():+.4f}", flush=True)
    with torch.no_grad():
        return model(torch.from_numpy(x_test)).numpy()


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--molecules", type=int, default=None,
                        help="keep a random subset of N molecules (default: all 8,014)")
    parser.add_argument("--tasks", type=int, default=12, help="train on the first N tasks")
    parser.add_argument("--bits", type=int, default=2048, help="fingerprint length")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--per-task", type=int, default=4,
                        help="positives (and negatives) per task in an X-risk batch")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS)) or 'nothing'}; "
                     f"expected names from {list(METHODS)}")
    for name, value, low, high in (("epochs", args.epochs, 1, None), ("tasks", args.tasks, 1, 12),
                                   ("bits", args.bits, 1, None), ("hidden", args.hidden, 1, None),
                                   ("per-task", args.per_task, 2, None),
                                   ("molecules", args.molecules or 8014, 100, 8014)):
        if value < low or (high is not None and value > high):
            parser.error(f"--{name}: got {value}; expected {low} to {high or 'more'}")
    x_train, y_train, x_test, y_test = load_data(args.molecules, args.bits, args.tasks,
                                                 args.seed)
    print(f"Tox21: {len(y_train)} training and {len(y_test)} test molecules, {args.tasks} "
          f"tasks, {np.isnan(y_train).mean():.0%} of the training labels missing")
    results = {m: mean_metrics(y_test, train(m, x_train, y_train, x_test, args)) for m in methods}
    print(f"\n{'method':<8}{'test mean AUROC':>18}{'test mean AP':>15}")
    for method, row in results.items():
        print(f"{method:<8}{row['mean AUROC']:>18.4f}{row['mean AP']:>15.4f}")
    print("\nThe paper's comparison, as measured here (not asserted):")
    for method, metric in (("AUCM", "mean AUROC"), ("mAP", "mean AP")):
        if method in results and "CE" in results:
            print(f"  {method} - CE on test {metric}: "
                  f"{results[method][metric] - results['CE'][metric]:+.4f}")
    return results


if __name__ == "__main__":
    main()
