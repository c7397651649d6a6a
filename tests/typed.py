"""``of_type``: a value that must be of a type, typed as one (for helpers that compute
expectations, where a value of another type is a bug of the test, not a finding)."""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


def of_type(kind: type[_T], value: object) -> _T:
    """``value``, which must be a ``kind``: TypeError otherwise."""
    if not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return value
