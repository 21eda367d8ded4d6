"""The recorder's side of the rings: it trusts nothing the traced process wrote.

The producer here is Python writing the ring layout by hand (a unit-test double of
kmod_shim/shim_record.c, whose real output tests/test_capture.py drains)."""

from __future__ import annotations

import pytest

from rmtrace.capture.merge import CallTracker, TimeMerger, Watermark
from rmtrace.capture.ring import GIVE_UP_TAIL, Ring, RingNotReady, well_formed
from rmtrace.capture.session import Session
from rmtrace.capture.shm import RING, RING_CTL_SIZE, RING_MAGIC, RING_VERSION, RingControl, RingState
from rmtrace.record import BUFFER_LEN, HEADER, Buffer, Phase, Record, Role, Source, When

DATA = 4096


def make_ring(path, head=0, tail=0, magic=RING_MAGIC, data_size=DATA, state=RingState.LIVE, writing=0):
    ctl = RingControl.build(dict(magic=magic, version=RING_VERSION, ctl_size=RING_CTL_SIZE, data_size=data_size,
                                 pid=11, tid=12, image_id=3, flags=0, state=state, reserved0=bytes(24), head=head,
                                 writing=writing, read_copy=7, lost_full=1, lost_nested=2, lost_stopped=3,
                                 trunc_big=4, read_unreadable=9, tail=tail, reserved2=bytes(56), read_syscall=8,
                                 waits=5, wait_ns=6, reserved3=[0] * 5))
    path.write_bytes(ctl + bytes(RING_CTL_SIZE - len(ctl) + data_size))
    return path


def put(path, pos, data):
    """Write data at never-wrapped position pos, wrapping like the producer."""
    blob = bytearray(path.read_bytes())
    for i, byte in enumerate(data):
        blob[RING_CTL_SIZE + (pos + i) % DATA] = byte
    path.write_bytes(bytes(blob))


def set_u64(path, name, value):
    blob = bytearray(path.read_bytes())
    RING[name].put(blob, value)
    path.write_bytes(bytes(blob))


def rec(n: int, size: int = 100) -> bytes:
    return Record(Source.RM, Phase.ENTER, 0x2A, time_ns=n, pid=11, tid=12, call_id=n,
                  buffers=(Buffer(Role.ARG, When.BEFORE, bytes([n % 256]) * size),)).encode()


def test_drain_reads_records_across_the_end_and_moves_tail(tmp_path):
    start = DATA - 200  # the second record runs past the end of the data area
    path = make_ring(tmp_path / "ring-11-12-3.rb", head=start, tail=start)
    records = [rec(1), rec(2), rec(3)]
    pos = start
    for r in records:
        put(path, pos, r)
        pos += len(r)
    ring = Ring(str(path))
    assert ring.drain() == []  # head not yet moved: nothing published
    set_u64(path, "head", pos)
    assert ring.drain() == records
    assert RING["tail"].get(path.read_bytes()) == pos
    assert ring.counters() == dict(lost_full=1, lost_nested=2, lost_stopped=3, trunc_big=4, waits=5, wait_ns=6,
                                   read_copy=7, read_syscall=8, read_unreadable=9)
    assert (ring.pid, ring.tid, ring.image_id, ring.closed, ring.broken) == (11, 12, 3, False, None)
    ring.close()


def test_a_ring_not_yet_published_is_not_read(tmp_path):
    with pytest.raises(RingNotReady):
        Ring(str(make_ring(tmp_path / "r.rb", magic=0)))


GOOD = rec(1, size=200)


@pytest.mark.parametrize("head, tail, data, kept, reason", [
    (DATA + 8, 0, GOOD, 0, "impossible"),             # more than a ring's worth unread
    (8, 16, GOOD, 0, "impossible"),                   # head behind tail
    (200, 0, b"\0" * 200, 0, "bad record"),           # no record magic
    (100, 0, GOOD, 0, "bad record"),                  # a record claiming more than was published
    (len(GOOD) + 8, 0, GOOD + bytes(8), 1, "stray bytes"),  # a tail too short for a record
], ids=["too-far", "backwards", "no-magic", "overlong", "stray"])
def test_a_ring_breaking_its_contract_is_retired_not_trusted(tmp_path, head, tail, data, kept, reason):
    path = make_ring(tmp_path / "r.rb", head=head, tail=tail)
    put(path, 0, data)
    ring = Ring(str(path))
    assert len(ring.drain()) == kept and reason in ring.broken
    assert ring.drain() == []
    assert RING["tail"].get(path.read_bytes()) == GIVE_UP_TAIL  # the producer is told: it drops, never waits


def test_well_formed_checks_the_buffers():
    good = rec(1)
    assert well_formed(good) == HEADER.unpack_from(good)
    bad = bytearray(good)
    BUFFER_LEN.put(bad, 10_000, HEADER.size)  # a buffer longer than its record
    assert well_formed(bytes(bad)) is None
    assert well_formed(good[:-8]) is None


def test_session_finds_new_rings_once(tmp_path, monkeypatch):
    monkeypatch.setattr("rmtrace.capture.session.SHM_DIR", str(tmp_path))
    session = Session(b"table")
    try:
        assert list(session.new_rings()) == []
        make_ring(tmp_path / session.dir / "ring-1-1-1.rb")
        make_ring(tmp_path / session.dir / "ring-1-2-1.rb", magic=0)  # still being set up
        (tmp_path / session.dir / "not-a-ring").write_text("x")
        found = list(session.new_rings())
        assert [(r.pid, r.tid) for r in found] == [(11, 12)]
        assert list(session.new_rings()) == []
        session.stop()
        assert session.lost_noring == 0
    finally:
        for ring in found:
            ring.close()
        session.cleanup()


def test_merger_holds_records_for_the_lag_and_counts_late_ones():
    merger = TimeMerger(lag_ns=100)
    for t in (50, 10, 30):
        merger.push(t, t)
    assert merger.release(now_ns=135) == [10, 30]
    merger.push(20, 20)  # older than what was already released
    assert merger.release() == [20, 50] and merger.late == 1


def test_watermark_waits_for_a_writing_ring_until_its_stall_limit(tmp_path):
    ring = Ring(str(make_ring(tmp_path / "ring-11-12-3.rb", writing=4500)))
    mark = Watermark(stall_ns=1000, slack_ns=10)
    assert mark.floor("a", 0, now_ns=5000) == 4990  # idle: nothing older than the recorder's now, less the slack
    assert mark.floor("a", ring.writing, now_ns=5000) == 4500  # inside a record taken at 4500
    assert mark.floor("a", 4500, now_ns=5500) == 4500
    assert mark.floor("a", 4500, now_ns=5501) is None and mark.stalls == 1  # past the limit: no longer waited for
    assert mark.floor("a", 4500, now_ns=9000) is None and mark.stalls == 1  # the same stall, counted once
    assert mark.floor("a", 0, now_ns=9000) == 8990
    ring.close()


def test_call_tracker_pairs_by_pid_and_call_id():
    def h(source, phase, pid, call_id):
        return HEADER.unpack_from(Record(source, phase, 1, pid=pid, tid=pid, call_id=call_id, time_ns=5).encode())
    tracker = CallTracker()
    tracker.saw(0, h(Source.RM, Phase.ENTER, 1, 7))
    tracker.saw(1, h(Source.RM, Phase.ENTER, 2, 7))
    tracker.saw(2, h(Source.RM, Phase.EXIT, 1, 7))
    tracker.saw(3, h(Source.UVM, Phase.EXIT, 3, 9))
    tracker.saw(4, h(Source.MARK, Phase.ENTER, 4, 1))
    assert [(c.seq, c.pid) for c in tracker.in_flight()] == [(1, 2)] and tracker.unmatched_exits == 1
