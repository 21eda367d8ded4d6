"""rmtrace.columns.stash.RecordStash: records kept in segments, found by sequence number, let go of behind a fold."""

from __future__ import annotations

import rmtrace.columns.stash as stash
from rmtrace.record import Buffer, Phase, Record, Role, Source, When, decode_record, encode_record


def test_records_are_found_until_their_segment_is_let_go_of(monkeypatch) -> None:
    """Records across several segments are found as they were added; ``forget_before`` lets go of the
    segments wholly before a record, never of that record's own, and a record let go of is not found
    (the fold then reads it from the trace)."""
    monkeypatch.setattr(stash, "SEGMENT", 300)  # a few records a segment
    kept = stash.RecordStash()
    records = {seq: Record(Source.RM, Phase.EXIT, seq=seq, buffers=(Buffer(Role.PARAMS, When.AFTER, bytes(seq % 50)),))
               for seq in range(10, 60, 2)}
    for seq, rec in records.items():
        data = b"\0" * 8 + encode_record(rec)  # the record lies at an offset of a chunk's view
        kept.add(seq, memoryview(data), 8)
    kept.add(20, memoryview(b"\0" * 8 + encode_record(records[20])), 8)  # seen again: kept once
    assert all(decode_record(*kept.find(seq)) == rec for seq, rec in records.items())
    assert kept.find(11) is None and kept.find(61) is None
    kept.forget_before(40)
    assert decode_record(*kept.find(40)) == records[40]  # its own segment stays
    assert all(kept.find(seq) is not None for seq in records if seq >= 40)
    gone = [seq for seq in records if kept.find(seq) is None]
    assert gone and max(gone) < 40 and gone == sorted(gone) and gone[0] == 10
