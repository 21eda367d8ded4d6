"""What differs between the recording and the replay, per replayed client: recorded value <-> real value.

Every map is filled from what the replay itself got back (an allocation's
handle, an open's fd, a mapping's address, a value the driver handed out),
never by guessing from values; a value no map holds is passed as recorded
(a handle the program chose itself is the same in both).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

V = TypeVar("V", bound=Hashable)
"""What a map holds: ints (handles, fds, cookies, GPU ids) or bytes (GPU UUIDs)."""


@dataclass
class Remap(Generic[V]):
    """recorded -> real, and back (answers are written back in the recording's terms)."""

    fwd: dict[V, V] = field(default_factory=dict)
    rev: dict[V, V] = field(default_factory=dict)

    def learn(self, recorded: V, real: V) -> None:
        old = self.fwd.get(recorded)
        if old is not None and self.rev.get(old) == recorded:
            del self.rev[old]
        self.fwd[recorded] = real
        self.rev[real] = recorded

    def forward(self, value: V) -> V:
        return self.fwd.get(value, value)

    def back(self, value: V) -> V:
        return self.rev.get(value, value)

    def changed(self) -> dict[V, V]:
        """The entries where the replay got something else than the recording."""
        return {k: v for k, v in self.fwd.items() if k != v}


class AddressMap:
    """Recorded address ranges and where they are in the replaying process (a constant shift per range)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, int]] = []  # (recorded start, end, real start)
        self._real: list[tuple[int, int, int]] = []    # (real start, end, recorded start), sorted

    def learn(self, recorded: int, length: int, real: int) -> None:
        i = bisect.bisect_left(self._starts, recorded)
        if i < len(self._starts) and self._starts[i] == recorded:
            self._ranges[i] = (recorded, recorded + length, real)
        else:
            self._starts.insert(i, recorded)
            self._ranges.insert(i, (recorded, recorded + length, real))
        self._real = sorted((r, r + (e - s), s) for s, e, r in self._ranges)

    def forward(self, value: int) -> int:
        return self._shift(self._ranges, value)

    def back(self, value: int) -> int:
        return self._shift(self._real, value)

    @staticmethod
    def _shift(ranges: list[tuple[int, int, int]], value: int) -> int:
        i = bisect.bisect_right(ranges, (value, float("inf"), 0)) - 1
        if i >= 0:
            start, end, other = ranges[i]
            if start <= value < end:
                return other + (value - start)
        return value

    def moved(self) -> list[tuple[int, int, int]]:
        """(recorded start, length, real start) of the ranges that are elsewhere in the replay."""
        return [(s, e - s, r) for s, e, r in self._ranges if s != r]
