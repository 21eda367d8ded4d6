"""String tables: each distinct value once, and columns that hold its index."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T", bound=Hashable)

NONE = -1
"""The index a column holds for None."""


class Strings(Generic[T]):
    """Distinct values in order of first use; ``id`` gives a value's index (``NONE`` for None)."""

    def __init__(self, values: Iterable[T] = ()) -> None:
        self.values: list[T] = []
        self._ids: dict[T, int] = {}
        for value in values:
            self.id(value)

    def id(self, value: T | None) -> int:
        if value is None:
            return NONE
        found = self._ids.get(value)
        if found is None:
            found = self._ids[value] = len(self.values)
            self.values.append(value)
        return found

    def ids(self, values: Iterable[T | None]) -> np.ndarray:
        return np.fromiter((self.id(v) for v in values), dtype=np.int32)

    def find(self, value: T) -> int:
        """The index of ``value``, or ``NONE`` when the table does not hold it (nothing is added)."""
        return self._ids.get(value, NONE)

    def get(self, index: int) -> T | None:
        return None if index < 0 else self.values[index]

    def lookup(self, ids: np.ndarray) -> Sequence[T | None]:
        """The values of a column of ids, as a list."""
        values = self.values
        return [None if i < 0 else values[i] for i in ids.tolist()]

    def __len__(self) -> int:
        return len(self.values)
