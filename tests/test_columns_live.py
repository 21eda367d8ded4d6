"""A growing trace folded as it grows: each update continues the last, and the end is the whole fold."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmtrace.columns.live import LiveSession
from rmtrace.session import load_session
from rmtrace.trace import TraceReader, TraceWriter
from tests.golden_outputs import session_digest
from tests.scenarios import sequential

SHIPPED = Path(__file__).resolve().parent.parent / "captures" / "cuda-streams-3x-sequential.trace"


@pytest.mark.parametrize("source", ["shipped", "wedged"])
def test_updates_end_where_one_fold_does(tmp_path, source):
    src = SHIPPED if source == "shipped" else sequential(tmp_path / "boot.trace", wedge=True)
    with TraceReader(src) as reader:
        raws, meta = [bytes(r) for r in reader.raw_records()], reader.meta
    path = tmp_path / "live.trace"
    writer = TraceWriter(path, meta, chunk_bytes=1500, threaded=False)
    writer.flush()
    live = LiveSession(path)
    live.update()  # opened before the recorder wrote anything (a first update shows open calls in flight)
    folded_upto, step = [], max(len(raws) // 9, 1)
    for k, raw in enumerate(raws, 1):
        writer.write_encoded(raw)
        if k % step == 0:
            writer.flush()
            model = live.update()
            folded_upto.append(live.fold.next_row)
            assert len(model.calls) <= len(model.table) and model.clients == tuple(model.clients)
    writer.close()
    model = live.update()
    assert live.final and folded_upto == sorted(folded_upto) and folded_upto[-1] > 0
    assert session_digest(model) == session_digest(load_session(path, cache=False))


def test_a_trace_that_stops_growing_shows_its_open_calls(tmp_path):
    """A recording cut off while a call is in flight (no index written): the open call folds in flight."""
    src = sequential(tmp_path / "boot.trace", wedge=True)
    with TraceReader(src) as reader:
        raws, meta = [bytes(r) for r in reader.raw_records()], reader.meta
    path = tmp_path / "cut.trace"
    writer = TraceWriter(path, meta, threaded=False)
    for raw in raws:
        writer.write_encoded(raw)
    writer.flush()
    model = LiveSession(path).update()
    assert session_digest(model) == session_digest(load_session(path, cache=False))
