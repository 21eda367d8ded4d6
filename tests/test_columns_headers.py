"""Header counts (``rmtrace info``'s record counts) taken vectorised, against a walk of every record."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rmtrace.columns.headers import HeaderCounts, header_counts
from rmtrace.record import HEADER, Buffer, MarkOp, Phase, Record, Role, Source, When
from rmtrace.trace import TraceReader, TraceWriter

REPO = Path(__file__).resolve().parent.parent
TRACES = sorted((REPO / "captures").glob("*.trace")) + sorted((REPO / "captures" / "replays").glob("*.trace"))


def walked(reader: TraceReader) -> HeaderCounts:
    """The counts one record at a time, as ``info`` took them before the columns."""
    by_source: Counter = Counter()
    pids: set[int] = set()
    in_flight = 0
    for raw in reader.raw_records():
        h = HEADER.unpack_from(raw)
        by_source[(h[4], h[5])] += 1
        pids.add(h[9])
        in_flight += h[4] == Source.MARK and h[12] == MarkOp.IN_FLIGHT
    return HeaderCounts(dict(by_source), sorted(pids), in_flight)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_counts_match_a_walk(path: Path) -> None:
    with TraceReader(path) as reader:
        assert header_counts(reader, batch_records=500) == walked(reader)


def test_counts_of_marks_and_a_torn_trace(tmp_path: Path) -> None:
    """The recorder's in-flight marks are counted (and no other mark); a torn trace counts what was
    salvaged of it."""
    marked = tmp_path / "marked.trace"
    with TraceWriter(marked, {"backend": "test"}, chunk_bytes=300) as writer:
        for i, op in enumerate([MarkOp.IN_FLIGHT, MarkOp.NOTE, MarkOp.IN_FLIGHT, MarkOp.STOP] * 5):
            writer.write(Record(Source.MARK, Phase.EVENT, op, time_ns=i, pid=7 + i % 3,
                                buffers=(Buffer(Role.TEXT, When.ONCE, b"{}"),)))
    with TraceReader(marked) as reader:
        counts = header_counts(reader, batch_records=3)
        assert counts.in_flight == 10 and counts.pids == [7, 8, 9] and counts == walked(reader)
    torn = tmp_path / "torn.trace"
    with TraceReader(REPO / "captures" / "cuda-streams-3x-sequential.trace") as reader, \
            TraceWriter(torn, reader.meta, chunk_bytes=1 << 20) as writer:
        for raw in reader.raw_records():
            writer.write_encoded(bytes(raw))
    data = torn.read_bytes()
    torn.write_bytes(data[:len(data) * 3 // 4])
    with TraceReader(torn) as reader:
        assert reader.recovery.salvaged
        assert header_counts(reader) == walked(reader)
