"""What every exporter reads: one trace, its decoders, its calls in order, and its clock.

``ExportInput`` opens a trace once and gives the exporters what they share:
the decoders of its driver profile, its time span, the calls (records paired
by the decoders, counted by a progress line), the mapping from the trace's
CLOCK_MONOTONIC to wall-clock time, and a stable id for the trace.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from rmtrace.calls import Call
from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.export.progress import Progress
from rmtrace.record import Record, decode_record
from rmtrace.trace import TraceReader

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def wall_offset_ns(meta: Any) -> int | None:
    """Nanoseconds to add to a record's ``time_ns`` for UTC wall-clock time; None when the trace does not say.

    The recorder writes ``start_time`` (ISO 8601, UTC) and ``start_monotonic_ns``
    taken at the same instant (docs/trace-format.md).
    """
    start, mono = meta.get("start_time"), meta.get("start_monotonic_ns")
    if not isinstance(start, str) or not isinstance(mono, int):
        return None
    try:
        when = datetime.fromisoformat(start)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    delta = when - EPOCH
    epoch_ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return epoch_ns - mono


def trace_id(path: str | os.PathLike) -> str:
    """A stable id of a trace file: the first 16 hex digits of the BLAKE2b of its bytes."""
    digest = hashlib.blake2b(digest_size=8)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class ExportInput:
    """An open trace and what the exporters share about it."""

    def __init__(self, path: str | os.PathLike, driver: str | None = None, progress: bool | None = None,
                 what: str = "rmtrace export") -> None:
        self.path = os.fspath(path)
        self.reader = TraceReader(self.path)
        self.meta = self.reader.meta
        self.decoders: DecoderSet = decoders_for(self.reader, override=driver)
        span = self.reader.time_span
        self.start_ns, self.end_ns = span if span else (0, 0)
        self.wall_offset_ns = wall_offset_ns(self.meta)
        self.progress = Progress(what, self.reader.record_count, enabled=progress)

    @property
    def warning(self) -> str | None:
        """Why the decoders' profile is not the trace's exact driver, if it is not."""
        return self.decoders.warning

    def calls(self) -> Iterator[Call]:
        """The trace's calls in order of their first record (``DecoderSet.calls``), records counted."""
        return self.decoders.calls(self.records())

    def records(self, seen: Callable[[memoryview, Record], object] | None = None) -> Iterator[Record]:
        """The trace's records in file order, counted (``seen``: given each one's bytes beside it before it
        is yielded, for a caller that keeps something of the bytes themselves: jsonl's memo keys)."""
        for view in self.progress.count(self.reader.raw_records()):
            rec = decode_record(view)
            if seen is not None:
                seen(view, rec)
            yield rec

    def wall_ns(self, t_ns: int) -> int:
        """A record time as UTC nanoseconds since the epoch (the monotonic time itself when the trace has no clock)."""
        return t_ns + (self.wall_offset_ns or 0)

    def close(self) -> None:
        self.progress.finish()
        self.reader.close()

    def __enter__(self) -> ExportInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
