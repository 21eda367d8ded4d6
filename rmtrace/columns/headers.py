"""What every record header of a trace adds up to, counted vectorised: the record counts of ``rmtrace info``.

The chunks are read a batch at a time into one buffer
(``TraceReader.read_chunks``) and their headers gathered in place
(``rmtrace.columns.batch.read_headers``); nothing is kept per record, so a
trace of any size costs one batch of memory.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rmtrace.columns.batch import BATCH_RECORDS, batches, read_headers
from rmtrace.record import MarkOp, Source
from rmtrace.trace import TraceReader


@dataclass
class HeaderCounts:
    """Records per (source, phase), the processes that wrote any, and the calls marked in flight."""

    by_source: dict[tuple[int, int], int]
    pids: list[int]
    """Sorted."""
    in_flight: int
    """MARK records saying a call was still in flight when the recording stopped."""


def header_counts(reader: TraceReader, batch_records: int = BATCH_RECORDS) -> HeaderCounts:
    """Count every record of ``reader``'s chunks by its header alone."""
    kinds: Counter[int] = Counter()  # by source << 8 | phase (a phase is a byte)
    pids = np.zeros(0, dtype=np.uint32)
    in_flight = 0
    room = None
    for indices in batches(reader.chunks, 0, batch_records):
        room, spans = reader.read_chunks(indices, room)
        head = read_headers(room, spans).head
        source = head["source"]
        keys, counts = np.unique((source.astype(np.int64) << 8) | head["phase"], return_counts=True)
        kinds.update(dict(zip(keys.tolist(), counts.tolist())))
        pids = np.union1d(pids, head["pid"])  # a batch has a few processes: the union stays small
        in_flight += int(np.count_nonzero((source == Source.MARK) & (head["op"] == MarkOp.IN_FLIGHT)))
    return HeaderCounts({(k >> 8, k & 0xFF): n for k, n in kinds.items()}, pids.tolist(), in_flight)
