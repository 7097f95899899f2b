"""Typed, bounded reading of untrusted JSON: every field checked, nothing coerced.

The policy artifact's metadata arrives from a file anyone on the robot's network may push. Python's
``float("2.0")`` or ``str(123)`` would quietly accept a string where a number belongs, and a value
of the wrong type that slips through fails much later, in generated message code or the control
loop. These readers take the decoded JSON value and either return it with the promised type and
range or raise :class:`FieldError` naming the field and what was expected. Pure, no numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any


class FieldError(ValueError):
    """A JSON value of the wrong type, range or shape; ``field`` is its dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise FieldError(key, "duplicate key (JSON would silently keep the last value)")
        out[key] = value
    return out


def loads(text: str, field: str) -> Any:
    """``json.loads`` that refuses duplicate keys (NaN/Infinity load; :func:`number` refuses them)."""
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates)
    except (json.JSONDecodeError, RecursionError) as e:
        raise FieldError(field, f"not valid JSON ({e})") from None


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def text(value: Any, field: str, *, max_len: int = 256, allow_empty: bool = True) -> str:
    """A string of at most ``max_len`` characters, printable, encodable as UTF-8."""
    if not isinstance(value, str):
        raise FieldError(field, f"expected a string, got {_type_name(value)} {value!r:.40}")
    shortest = 0 if allow_empty else 1
    if not shortest <= len(value) <= max_len:
        raise FieldError(field, f"expected {shortest}..{max_len} characters, got {len(value)}")
    if not value.isprintable():
        raise FieldError(field, f"control characters in {value!r:.60}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FieldError(field, f"not encodable as UTF-8: {value!r:.60}") from None
    return value


def number(value: Any, field: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """A finite JSON number (int or float, not bool) in [lo, hi] (or (lo, hi] with ``lo_open``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(field, f"expected a number, got {_type_name(value)} {value!r:.40}")
    x = float(value)
    low_ok = x > lo if lo_open else x >= lo
    if not (math.isfinite(x) and low_ok and x <= hi):
        raise FieldError(field, f"expected a finite number in {'(' if lo_open else '['}{lo}, {hi}], got {x}")
    return x


def integer(value: Any, field: str, lo: int, hi: int) -> int:
    """A JSON integer (not bool, not 2.0) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field, f"expected an integer, got {_type_name(value)} {value!r:.40}")
    if not lo <= value <= hi:
        raise FieldError(field, f"expected an integer in [{lo}, {hi}], got {value}")
    return value


def array(value: Any, field: str, *, max_len: int) -> Sequence[Any]:
    """A JSON array of at most ``max_len`` entries."""
    if not isinstance(value, list):
        raise FieldError(field, f"expected an array, got {_type_name(value)}")
    if len(value) > max_len:
        raise FieldError(field, f"expected at most {max_len} entries, got {len(value)}")
    return value


def obj(value: Any, field: str, required: AbstractSet[str],
        optional: AbstractSet[str] = frozenset()) -> Mapping[str, Any]:
    """A JSON object with every ``required`` key and no key outside ``required | optional``."""
    if not isinstance(value, dict):
        raise FieldError(field, f"expected an object, got {_type_name(value)}")
    unknown, missing = set(value) - required - optional, required - set(value)
    if unknown:
        raise FieldError(field, f"unknown keys {sorted(unknown)}; allowed {sorted(required | optional)}")
    if missing:
        raise FieldError(field, f"missing keys {sorted(missing)}")
    return value
