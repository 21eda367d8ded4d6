"""Damaged traces: the reader recovers every intact record or fails with its own clear error.

Never a crash, a hang or silently wrong data: every record a damaged file
yields must equal the record written at that sequence number.
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rmtrace
from rmtrace.chunk import CHUNK_HEADER_SIZE
from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import FOOTER, TraceWriter

N = 120


def _records():
    return [Record(Source.RM, Phase.ENTER if i % 2 == 0 else Phase.EXIT, op=0x2A, time_ns=10_000 + i, pid=7,
                   call_id=i // 2, buffers=(Buffer(Role.PARAMS, When.BEFORE, os.urandom(8) * (1 + i % 9)),))
            for i in range(N)]


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    path = tmp_path_factory.mktemp("orig") / "orig.trace"
    recs = _records()
    with TraceWriter(path, {"backend": "test"}, chunk_bytes=1500) as w:
        for r in recs:
            w.write(r)
    with rmtrace.open(path) as r:
        chunks = list(r.chunks)
    return path.read_bytes(), [x.with_seq(i) for i, x in enumerate(recs)], chunks


def read_all(path):
    """(records read before the end or an error, the error or None)."""
    got = []
    try:
        with rmtrace.open(path) as r:
            for rec in r:
                got.append(rec)
            return got, None, r.recovery
    except RmtraceError as exc:
        return got, exc, None


def check_no_wrong_data(got, want):
    for rec in got:
        assert rec == want[rec.seq], f"record {rec.seq} differs from what was written"


def test_truncate_every_offset_of_last_two_chunks(tmp_path, original):
    data, want, chunks = original
    assert len(chunks) >= 4
    start = chunks[-2].offset
    path = tmp_path / "t.trace"
    for cut in range(start, len(data)):
        path.write_bytes(data[:cut])
        got, err, recovery = read_all(path)
        assert err is None, f"cut at {cut}: {err}"
        check_no_wrong_data(got, want)
        # every chunk wholly before the cut is recovered
        intact = sum(c.count for c in chunks if c.end <= cut)
        assert len(got) == intact, f"cut at {cut}: {len(got)} records, {intact} intact"
        assert not recovery.complete
        if cut < chunks[-1].end and cut not in (c.end for c in chunks):
            assert recovery.torn_offset is not None and "cut short" in recovery.reason


def test_truncate_inside_header_and_metadata(tmp_path, original):
    data, _, chunks = original
    meta_end = 32 + int.from_bytes(data[12:16], "little")
    path = tmp_path / "h.trace"
    for cut in range(0, chunks[0].offset + 1):
        path.write_bytes(data[:cut])
        got, err, recovery = read_all(path)
        assert got == []
        if cut < meta_end:
            assert err is not None
        else:  # only padding is missing
            assert err is None and recovery.records == 0


def _flip(data, pos):
    b = bytearray(data)
    b[pos] ^= 0x5A
    return bytes(b)


def test_flip_every_header_byte(tmp_path, original):
    """Every byte of the file header, each chunk header, the index and the footer."""
    data, want, chunks = original
    index_offset = chunks[-1].end
    positions = list(range(0, chunks[0].offset))
    for c in chunks:
        positions += range(c.offset, c.offset + CHUNK_HEADER_SIZE)
    positions += range(index_offset, len(data))
    path = tmp_path / "f.trace"
    for pos in positions:
        path.write_bytes(_flip(data, pos))
        got, err, recovery = read_all(path)
        check_no_wrong_data(got, want)
        if pos >= chunks[0].offset and err is None:
            # a damaged chunk header costs at most that chunk when scanning
            assert len(got) >= N - max(c.count for c in chunks)
            if pos >= index_offset:
                assert len(got) == N  # damaged index or footer: the scan recovers everything
        if pos < chunks[0].offset and err is None:
            assert len(got) == N  # a harmless byte (reserved, padding)


def test_flip_payload_bytes(tmp_path, original):
    data, want, chunks = original
    path = tmp_path / "p.trace"
    for c in chunks:
        for pos in range(c.offset + CHUNK_HEADER_SIZE, c.end, 37):
            path.write_bytes(_flip(data, pos))
            got, err, _ = read_all(path)
            check_no_wrong_data(got, want)
            assert err is not None and "checksum" in str(err)  # footer intact: the damage is reported


def test_damage_without_footer_skips_only_the_damaged_chunk(tmp_path, original):
    data, want, chunks = original
    no_footer = data[:chunks[-1].end]
    bad = _flip(no_footer, chunks[1].offset + CHUNK_HEADER_SIZE + 3)
    path = tmp_path / "s.trace"
    path.write_bytes(bad)
    got, err, recovery = read_all(path)
    assert err is None
    check_no_wrong_data(got, want)
    assert len(got) == N - chunks[1].count
    assert recovery.skipped and recovery.skipped[0][0] == chunks[1].offset


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]), st.integers(0, 10**6),
                          st.binary(min_size=1, max_size=16)), min_size=1, max_size=4))
def test_fuzz_reader(tmp_path, original, edits):
    """Random damage: never a crash, hang or wrong record (bounded: 250 examples per CI run)."""
    data, want, _ = original
    b = bytearray(data)
    for kind, pos, blob in edits:
        if not b:
            break
        pos %= len(b)
        if kind == "flip":
            b[pos] ^= blob[0] or 1
        elif kind == "cut":
            del b[pos:]
        elif kind == "insert":
            b[pos:pos] = blob
        else:
            del b[pos:pos + len(blob)]
    path = tmp_path / "z.trace"
    path.write_bytes(bytes(b))
    got, err, _ = read_all(path)
    check_no_wrong_data(got, want)
    if err is not None:
        assert str(err)  # its own message, no bare exception


def test_footer_size():
    assert FOOTER.size == 32
