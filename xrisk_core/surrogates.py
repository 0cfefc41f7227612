r"""Pairwise surrogate losses :math:`\ell(t)` of a score difference :math:`t = s_i - s_j`.

Every AUC-family loss compares a positive's score with another score through one of these
functions; each is non-increasing in :math:`t`, so a larger gap lowers the loss.

=================  ==========================================================================
name               :math:`\ell(t)` with margin :math:`m` and scale :math:`s`
=================  ==========================================================================
``squared_hinge``  :math:`\max(m - t, 0)^2` (the default everywhere)
``hinge``          :math:`\max(m - t, 0)`
``squared``        :math:`(m - t)^2`
``logistic``       :math:`\log(1 + e^{-s t})`, computed stably as a softplus
``barrier_hinge``  :math:`\max(-s(m + t) + m,\ \max(m - t,\ s(t - m)))`
=================  ==========================================================================

LibAUC passes its ``margin`` as the logistic scale and cannot pass a scale to
``barrier_hinge`` at all; xrisk keeps ``margin`` and ``scale`` apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._typing import Array

__all__ = ["SURROGATES", "surrogate_loss", "check_surrogate", "softplus"]



# Kinks are written with ``where`` rather than ``maximum``: frameworks split the gradient of
# ``maximum`` at ties differently (0.5 each in torch and JAX, all to one side in TensorFlow),
# while ``where`` picks one branch everywhere, so every backend returns the same subgradient.
# The squared hinge needs no ``where``: its derivative 2·max(m - t, 0) is 0 at the kink
# whatever share of the gradient ``clip`` passes there, and ``clip`` costs one vectorised
# kernel where ``gap > 0`` plus ``where`` cost two unvectorised boolean ones (B x B pairs).


def _squared_hinge(t: Array, margin: float, scale: float, xp: Any) -> Array:
    gap = xp.clip(margin - t, 0, None)
    return gap * gap


def _hinge(t: Array, margin: float, scale: float, xp: Any) -> Array:
    gap = margin - t
    return xp.where(gap > 0, gap, xp.zeros_like(t))


def _squared(t: Array, margin: float, scale: float, xp: Any) -> Array:
    gap = margin - t
    return gap * gap


def _logistic(t: Array, margin: float, scale: float, xp: Any) -> Array:
    # -1 * t is -t bit for bit: the default scale costs one negation, not a product.
    return softplus(-t if scale == 1.0 else -scale * t, xp)


def softplus(z: Array, xp: Any) -> Array:
    r""":math:`\log(1 + e^{z})` elementwise, finite for every finite ``z`` (the logistic
    surrogate is ``softplus(-s t)``; the cross-entropy losses call it on signed logits).

    As :math:`\max(z, 0) + \log(1 + e^{-|z|})`, with :math:`-|z|` and :math:`\max(z, 0)`
    selected on one sign test (``z > 0``), never by ``abs`` or ``maximum``, whose gradients
    at 0 the frameworks define differently: the exponent is <= 0, so nothing overflows and
    no branch's inf meets a gradient. The value is that of the two-branch form
    :math:`z + \log(1 + e^{-z})` for z > 0 and :math:`\log(1 + e^{z})` (+ 0) else, bit for
    bit, and so is the gradient (each a sum of the same terms), in 8 array operations forward
    where the two branches took 11.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> softplus(np.array([-1000.0, 0.0, 1000.0]), xp).round(4).tolist()
    [0.0, 0.6931, 1000.0]
    """
    above = z > 0
    zero = xp.zeros_like(z)
    return xp.where(above, z, zero) + xp.log1p(xp.exp(xp.where(above, -z, z)))


def _barrier_hinge(t: Array, margin: float, scale: float, xp: Any) -> Array:
    hinge, rising = margin - t, scale * (t - margin)
    inner = xp.where(hinge >= rising, hinge, rising)
    barrier = -scale * (margin + t) + margin
    return xp.where(barrier >= inner, barrier, inner)


SURROGATES: dict[str, Callable[[Array, float, float, Any], Array]] = {
    "squared_hinge": _squared_hinge,
    "hinge": _hinge,
    "squared": _squared,
    "logistic": _logistic,
    "barrier_hinge": _barrier_hinge,
}


def check_surrogate(name: object) -> str:
    """Return ``name`` if it names a surrogate, else raise a ValueError that lists them."""
    if not isinstance(name, str) or name not in SURROGATES:
        raise ValueError(
            f"Unknown surrogate={name!r}. Expected one of {sorted(SURROGATES)}. "
            "Fix: pass one of these names, e.g. surrogate='squared_hinge'."
        )
    return name


def surrogate_loss(
    name: str, t: Array, *, margin: float = 1.0, scale: float = 1.0, xp: Any
) -> Array:
    """Apply the surrogate ``name`` elementwise to score differences ``t``.

    Parameters
    ----------
    name : str
        One of ``squared_hinge``, ``hinge``, ``squared``, ``logistic``, ``barrier_hinge``.
    t : array, any shape
        Score differences :math:`s_i - s_j`.
    margin : float
        Margin :math:`m` (hinge family, squared, barrier_hinge).
    scale : float
        Scale :math:`s` (logistic, barrier_hinge).
    xp : namespace
        Array namespace of ``t``.

    Returns
    -------
    array, same shape as ``t``

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> surrogate_loss("squared_hinge", np.array([0.0, 0.5, 2.0]), xp=xp)
    array([1.  , 0.25, 0.  ])
    """
    return SURROGATES[check_surrogate(name)](t, margin, scale, xp)
