"""SimCLR views of a torch batch (B, 3, H, W): :mod:`xrisk.datasets.views` run with batched
tensor operations on the batch's device, no loop over images.

The crop boxes and jitter factors are drawn in numpy from ``(seed, epoch, index, view)``, so
they equal the TensorFlow and JAX adapters' for the same key. Use it in the training step
(or a ``DataLoader``'s ``collate_fn``):

>>> import torch
>>> from xrisk.torch.views import simclr_views
>>> images, index = torch.rand(8, 3, 32, 32), torch.arange(8)
>>> first = simclr_views(images, index, seed=0, view=0)
>>> second = simclr_views(images, index, seed=0, view=1)
>>> tuple(first.shape), bool(torch.allclose(first, second))
((8, 3, 32, 32), False)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xrisk.backends import get_backend
from xrisk.datasets.views import (
    SimCLRAugment,
    apply_simclr_views,
    check_rgb_batch,
    simclr_view_params,
)

__all__ = ["simclr_views"]


def simclr_views(images: torch.Tensor, index: Any, *, seed: int, epoch: int = 0,
                 view: int = 0, augment: SimCLRAugment | None = None) -> torch.Tensor:
    """One SimCLR view of each image.

    Parameters
    ----------
    images : torch.Tensor, shape (B, 3, H, W), floating, values in [0, 1]
    index : array_like or torch.Tensor of int, shape (B,)
        The images' dataset indices (the views are keyed by them).
    seed, epoch, view : int
        The two views of a contrastive pair differ in ``view``.
    augment : xrisk.datasets.views.SimCLRAugment, optional

    Returns
    -------
    torch.Tensor, shape (B, 3, height, width), the images' dtype and device
    """
    owner = "xrisk.torch.views.simclr_views"
    if not isinstance(images, torch.Tensor) or not images.is_floating_point():
        raise TypeError(f"{owner}: images of type {type(images).__name__} "
                        f"{getattr(images, 'dtype', '')}; expected a floating torch.Tensor "
                        "(B, 3, H, W) in [0, 1]. Fix: images.float() / 255 for uint8 images.")
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"{owner}: images of shape {tuple(images.shape)}; expected "
                         "(batch, 3, height, width). Fix: permute channels-last batches with "
                         "images.permute(0, 3, 1, 2).")
    nhwc = images.permute(0, 2, 3, 1)
    index_np = index.detach().cpu().numpy() if isinstance(index, torch.Tensor) else index
    check_rgb_batch(owner, nhwc, index_np)
    config = augment or SimCLRAugment()
    params = simclr_view_params(index_np, images.shape[2], images.shape[3], seed=seed,
                                epoch=epoch, view=view, augment=config)
    tensors = {k: torch.from_numpy(np.asarray(v)).to(images.device, images.dtype)
               for k, v in params.items()}
    out = apply_simclr_views(get_backend("torch").namespace, nhwc, tensors,
                             config.size or (images.shape[2], images.shape[3]))
    return out.permute(0, 3, 1, 2).contiguous()
