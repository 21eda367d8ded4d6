"""The live progress line `rmtrace record` shows on a terminal (and nothing elsewhere)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, interval_s: float = 0.25, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval_s = interval_s
        self._next = 0.0
        self._shown = False

    def update(self, records: int, nbytes: int, processes: int, elapsed_s: float, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self.interval_s
        self.stream.write(f"\rrmtrace: {records:,} records, {nbytes / 1e6:.1f} MB, "
                          f"{processes} process{'es' if processes != 1 else ''}, {elapsed_s:.1f}s\x1b[K")
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
