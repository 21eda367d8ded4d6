"""The call table's enter/exit pairing (``table._pair``) on keys wider than its packed sort takes.

``_pair`` sorts a batch's records by (pid, call_id) as one 64-bit number when
both fit in it together, else by numpy's lexsort of the two: either way an
exit must close the newest open enter of its (pid, call_id), as
``rmtrace.calls.pair_calls`` pairs them (the per-call fold is the reference).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rmtrace.record import Phase, Record, Source, SysOp
from rmtrace.trace import TraceWriter
from tests.test_columns import assert_same_as_fold


def _trace(path: Path, pids: tuple[int, ...], call_ids: tuple[int, ...]) -> Path:
    """Interleaved system calls of every (pid, call_id): each key opened twice before its exits come (the second
    open is what the first exit closes), and one enter left open."""
    records: list[Record] = []
    for pid in pids:
        for call in call_ids:
            enter = Record(Source.SYS, Phase.ENTER, op=SysOp.CLOSE, pid=pid, tid=pid, call_id=call, fd=3)
            records += [enter, enter, replace(enter, phase=Phase.EXIT), replace(enter, phase=Phase.EXIT)]
    records.append(Record(Source.SYS, Phase.ENTER, op=SysOp.CLOSE, pid=pids[0], tid=pids[0], call_id=call_ids[-1], fd=4))
    order = sorted(range(len(records)), key=lambda i: (i % 4, i))  # the keys' records interleaved
    with TraceWriter(path, {}) as writer:
        for t, i in enumerate(order):
            writer.write(replace(records[i], seq=t + 1, time_ns=1000 * (t + 1)))
    return path


@pytest.mark.parametrize(("pids", "call_ids"), [
    ((7, 8), (1, 2, 3)),  # packed
    ((1 << 31, 5), (1 << 40, 3)),  # 32 + 41 bits: lexsort
    ((9,), ((1 << 64) - 1, 1 << 63, 0)),  # call ids of 64 bits
], ids=["packed", "wide", "64-bit-call-ids"])
def test_pairs_as_the_per_call_fold(tmp_path: Path, pids: tuple[int, ...], call_ids: tuple[int, ...]) -> None:
    assert_same_as_fold(_trace(tmp_path / "pairs.trace", pids, call_ids))
    assert_same_as_fold(_trace(tmp_path / "pairs.trace", pids, call_ids), batch_records=5)
