"""Name-based maps between joint orders, resolved once at configure time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from asap_core.arrays import Array, ArrayT, as_index, is_tensor, namespace


class JointMapError(ValueError):
    """Two joint orders cannot be mapped (unknown, duplicate or missing names)."""


def _check_unique(names: Sequence[str], what: str) -> None:
    dups = sorted(n for n, count in Counter(names).items() if count > 1)
    if dups:
        raise JointMapError(f"{what} has duplicate joint names: {dups}")


@dataclass(frozen=True)
class JointMap:
    """Maps vectors from a ``source`` joint order to a ``target`` order by name.

    ``target`` may contain joints the source lacks (filled by :meth:`apply`'s ``fill``); every
    source joint must exist in the target, so no value is silently dropped.
    """

    source: tuple[str, ...]
    target: tuple[str, ...]
    index: np.ndarray
    """For each source joint, its position in ``target``."""

    @classmethod
    def from_names(cls, source: Sequence[str], target: Sequence[str]) -> JointMap:
        """Resolve the map; raises :class:`JointMapError` naming unknown joints."""
        _check_unique(source, "source order")
        _check_unique(target, "target order")
        position = {n: i for i, n in enumerate(target)}
        unknown = [n for n in source if n not in position]
        if unknown:
            raise JointMapError(f"joints not in the target order: {unknown}")
        index = np.array([position[n] for n in source], dtype=np.intp)
        return cls(tuple(source), tuple(target), index)

    @property
    def is_bijection(self) -> bool:
        """True when both orders hold the same set of joints."""
        return len(self.source) == len(self.target)

    def apply(self, values: ArrayT, fill: float | Array = 0.0) -> ArrayT:
        """Reorder ``values`` (last axis in source order) into target order.

        Target joints missing from the source take ``fill`` (a scalar or a target-order array).
        numpy arrays or torch tensors (the output is of the same kind, dtype and device).
        """
        v: Array = values if is_tensor(values) else np.asarray(values)
        if v.shape[-1] != len(self.source):
            raise JointMapError(
                f"expected {len(self.source)} values in source order, got {v.shape[-1]}"
            )
        shape = (*v.shape[:-1], len(self.target))
        if is_tensor(v):
            out = v.new_zeros(shape)
            out[...] = fill if is_tensor(fill) or not hasattr(fill, "shape") else v.new_tensor(fill)
        else:
            out = np.broadcast_to(np.asarray(fill, dtype=v.dtype), shape).copy()
        out[..., self._index_for(v)] = v
        return cast(ArrayT, out)

    def gather(self, target_values: ArrayT) -> ArrayT:
        """The inverse direction: pick source-order values out of a target-order vector."""
        v: Array = target_values if is_tensor(target_values) else np.asarray(target_values)
        if v.shape[-1] != len(self.target):
            raise JointMapError(
                f"expected {len(self.target)} values in target order, got {v.shape[-1]}"
            )
        return cast(ArrayT, v[..., self._index_for(v)])

    def _index_for(self, v: Array) -> Array:
        """:attr:`index` in ``v``'s kind: the numpy array, or an int64 tensor on ``v``'s device, kept for the
        next call (indexing a tensor with a numpy array converts it and copies it to the device every time,
        and torch.compile cannot guard on such a conversion)."""
        if not is_tensor(v):
            return self.index
        kept = getattr(self, "_tensor_index", None)
        if kept is None or kept.device != v.device:
            kept = as_index(namespace(v).as_tensor(self.index, device=v.device))
            object.__setattr__(self, "_tensor_index", kept)  # a cache, not a field of the frozen map
        return kept
