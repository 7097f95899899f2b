"""The few array operations the batched terms need, for numpy arrays and for torch tensors alike.

asap_core depends on numpy only. Training passes torch tensors (on any device) through the same term
functions (observation terms, drive commands), so train and deploy share one implementation; torch is
never imported here: a tensor is recognized by its type and handled with its own methods and module.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

import numpy as np

Array: TypeAlias = Any
"""A numpy array or a torch tensor (the batched terms take either). torch is never imported here, so the
type checker cannot name the union; ``np.ndarray`` alone would be wrong for training's tensors."""
ArrayT = TypeVar("ArrayT")
"""An :data:`Array` for functions that return the kind they are given (numpy in, numpy out)."""


def is_tensor(x: Any) -> bool:
    """True for a torch tensor."""
    return type(x).__module__.startswith("torch")


def namespace(x: Any) -> Any:
    """The module of ``x``'s kind: ``numpy``, or ``torch`` for a tensor. Most array functions share their
    names and numpy-style keywords (``axis``, ``keepdims``) in both."""
    return sys.modules["torch"] if is_tensor(x) else np


def as_float(x: Any) -> Any:
    """A float64 numpy array of ``x``, or the tensor unchanged (its dtype and device kept)."""
    return x if is_tensor(x) else np.asarray(x, dtype=np.float64)


def concat(parts: Sequence[Any], axis: int = -1) -> Any:
    """``np.concatenate`` or ``torch.cat``, by the first part's type."""
    if is_tensor(parts[0]):
        return sys.modules["torch"].cat(tuple(parts), dim=axis)
    return np.concatenate(parts, axis=axis)


def stack(parts: Sequence[Any], axis: int = -1) -> Any:
    """``np.stack`` or ``torch.stack``, by the first part's type."""
    if is_tensor(parts[0]):
        return sys.modules["torch"].stack(tuple(parts), dim=axis)
    return np.stack(parts, axis=axis)


def as_index(x: Any) -> Any:
    """Integer indices of ``x`` (truncated): ``intp`` numpy array or ``int64`` tensor."""
    return x.long() if is_tensor(x) else np.asarray(x).astype(np.intp)


def copy(x: Any) -> Any:
    """A copy that owns its memory (``.copy()`` / ``.clone()``)."""
    return x.clone() if is_tensor(x) else x.copy()


def where(condition: Any, x: Any, y: float) -> Any:
    """``np.where`` / ``torch.where`` with a scalar ``y``."""
    if is_tensor(x):
        return sys.modules["torch"].where(condition, x, y)
    return np.where(condition, x, y)


def broadcast(*xs: Any) -> list[Any]:
    """``np.broadcast_arrays`` / ``torch.broadcast_tensors`` (views, no copies)."""
    if any(is_tensor(x) for x in xs):
        return list(sys.modules["torch"].broadcast_tensors(*xs))
    return list(np.broadcast_arrays(*xs))
