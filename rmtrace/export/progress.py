"""The progress line an export shows on a terminal (and nothing elsewhere)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")


class Progress:
    """``\\r``-rewritten line: records read of the trace's total, the rate, at most four times a second."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None, enabled: bool | None = None,
                 interval_s: float = 0.25) -> None:
        self.what = what
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval_s = interval_s
        self.done = 0
        self._start = time.monotonic()
        self._next = self._start + interval_s
        self._shown = False

    def count(self, items: Iterable[T]) -> Iterator[T]:
        """``items`` unchanged, each one counted (and the line redrawn when it is time)."""
        if not self.enabled:
            for item in items:
                self.done += 1
                yield item
            return
        for item in items:
            self.done += 1
            if not self.done & 1023 and time.monotonic() >= self._next:
                self.show()
            yield item

    def add(self, n: int) -> None:
        """``n`` more items done at once (a reader that takes a batch at a time)."""
        self.done += n
        if self.enabled and time.monotonic() >= self._next:
            self.show()

    def show(self) -> None:
        now = time.monotonic()
        self._next = now + self.interval_s
        rate = self.done / max(now - self._start, 1e-9)
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        self.stream.write(f"\r{self.what}: {self.done:,} of {self.total:,} records{share}, {rate:,.0f} records/s\x1b[K")
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self.enabled and self._shown:
            self.show()
            self.stream.write("\n")
            self.stream.flush()
