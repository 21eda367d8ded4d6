"""Trace file: round trips through writer and reader, seeking, live reading."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rmtrace
from rmtrace.errors import NotATraceError, TraceError, TraceVersionError
from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import FILE_HEADER, TraceWriter
from tests.strategies import records


def _write(path, recs, meta=None, **kw):
    with TraceWriter(path, meta or {"backend": "test"}, **kw) as w:
        for r in recs:
            w.write(r)


def _timed(n, step=1000, size=40):
    return [Record(Source.RM if i % 3 else Source.UVM, Phase.ENTER if i % 2 else Phase.EXIT, op=i % 7,
                   time_ns=1_000_000 + i * step, pid=100 + i % 4, tid=i % 5, call_id=i // 2,
                   buffers=(Buffer(Role.ARG, When.BEFORE, bytes([i % 251]) * (size + i % 50)),))
            for i in range(n)]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(records, max_size=60), st.sampled_from([64, 1024, 1 << 20]), st.booleans())
def test_round_trip(tmp_path, recs, chunk_bytes, threaded):
    path = tmp_path / "rt.trace"
    _write(path, recs, {"driver_version": "580.159.04", "gpus": [{"name": "NVIDIA H200"}]},
           chunk_bytes=chunk_bytes, threaded=threaded)
    with rmtrace.open(path) as r:
        assert r.recovery.complete
        assert r.meta["driver_version"] == "580.159.04"
        assert r.record_count == len(recs)
        got = list(r)
        assert got == [rec.with_seq(i) for i, rec in enumerate(recs)]
        for i in range(0, len(recs), 7):
            assert r.record_at(i) == got[i]


def test_seek_by_sequence_and_time(tmp_path):
    recs = _timed(5000)
    path = tmp_path / "seek.trace"
    _write(path, recs, chunk_bytes=4096)
    with rmtrace.open(path) as r:
        assert len(r.chunks) > 20
        for seq in (0, 1, 2499, 4998, 4999):
            assert r.seek_seq(seq).peek() == recs[seq].with_seq(seq)
        cur = r.seek_seq(4997)
        assert [x.seq for x in cur] == [4997, 4998, 4999]
        # time: first record at or after t
        t = recs[1234].time_ns - 1
        assert r.seek_time(t).peek().seq == 1234
        assert r.seek_time(recs[1234].time_ns).peek().seq == 1234
        assert r.seek_time(0).seq == 0
        assert r.seek_time(recs[-1].time_ns + 1).peek() is None
        with pytest.raises(IndexError):
            r.seek_seq(5000)


def test_filters(tmp_path):
    recs = _timed(300)
    path = tmp_path / "f.trace"
    _write(path, recs, chunk_bytes=2048)
    with rmtrace.open(path) as r:
        got = list(r.records(source=Source.UVM, pid=[101, 102]))
        want = [x.with_seq(i) for i, x in enumerate(recs) if x.source == Source.UVM and x.pid in (101, 102)]
        assert got == want
        t0, t1 = recs[100].time_ns, recs[150].time_ns
        assert [x.seq for x in r.records(t0=t0, t1=t1)] == list(range(100, 151))
        assert [x.seq for x in r.records(start_seq=290, phase=Phase.ENTER)] == [291, 293, 295, 297, 299]
        assert [x.seq for x in r.records(predicate=lambda x: x.op == 3, t1=recs[40].time_ns)] == [3, 10, 17, 24, 31, 38]


def test_live_reader_sees_flushed_chunks(tmp_path):
    path = tmp_path / "live.trace"
    w = TraceWriter(path, {"backend": "test"})
    recs = _timed(100)
    for x in recs[:40]:
        w.write(x)
    w.sync()
    r = rmtrace.open(path)
    assert not r.recovery.complete and r.record_count == 40
    for x in recs[40:]:
        w.write(x)
    w.sync()
    assert r.refresh() == 1 and r.record_count == 100
    assert [x.seq for x in r][-1] == 99
    w.close()
    r.close()
    with rmtrace.open(path) as done:
        assert done.recovery.complete and done.record_count == 100


def test_bounded_memory_streaming(tmp_path):
    """The writer keeps at most a chunk plus a small queue in memory: many chunks go out as it writes."""
    path = tmp_path / "stream.trace"
    w = TraceWriter(path, {}, chunk_bytes=8192)
    for x in _timed(2000):
        w.write(x)
    w.sync()
    assert os.path.getsize(path) > 20000  # chunks already on disk before close
    w.close()


def test_foreign_empty_and_wrong_version(tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(NotATraceError, match="empty"):
        rmtrace.open(empty)
    foreign = tmp_path / "foreign.pcap"
    foreign.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\0" * 100)
    with pytest.raises(NotATraceError, match="not an rmtrace trace"):
        rmtrace.open(foreign)
    path = tmp_path / "v.trace"
    _write(path, _timed(3))
    data = bytearray(path.read_bytes())
    newer = bytearray(data)
    newer[8:12] = (2).to_bytes(2, "little") + (40).to_bytes(2, "little")  # a newer format: another header size
    path.write_bytes(bytes(newer))
    with pytest.raises(TraceVersionError, match="version 2; this rmtrace reads version 1"):
        rmtrace.open(path)
    data[8:10] = (7).to_bytes(2, "little")  # one field wrong, everything else version 1's: damage
    path.write_bytes(bytes(data))
    with rmtrace.open(path) as r:
        assert r.record_count == 3 and "format version field reads 7: damaged" in r.recovery.describe()
    with pytest.raises(TraceError, match="no such file"):
        rmtrace.open(tmp_path / "missing.trace")
    with pytest.raises(TraceError, match="not a regular file"):
        rmtrace.open(tmp_path)
    assert FILE_HEADER.size == 32


def test_crashed_writer_is_recovered(tmp_path):
    """A recorder killed mid-write leaves no index or footer: every finished chunk still reads."""
    path = tmp_path / "crash.trace"
    w = TraceWriter(path, {"backend": "test"}, chunk_bytes=2048)
    recs = _timed(500)
    for x in recs:
        w.write(x)
    w.sync()
    flushed = w.next_seq
    w.abandon()
    with rmtrace.open(path) as r:
        assert not r.recovery.complete and r.recovery.torn_offset is None
        got = list(r)
        assert got == [x.with_seq(i) for i, x in enumerate(recs)][:len(got)]
        assert len(got) == flushed
        assert "recovered by scanning" in r.recovery.describe()


def _chunks_alike(reader, indices, room=None):
    """``read_chunks`` gives each chunk's offsets and record bytes as ``chunk_records`` does, its records
    8-aligned in the one buffer; returns the buffer."""
    buffer, spans = reader.read_chunks(indices, room)
    assert [s.index for s in spans] == list(indices)
    for span in spans:
        offsets, view = reader.chunk_records(span.index)
        assert list(span.offsets) == list(offsets)
        assert bytes(buffer[span.start:span.end]) == bytes(view)
        assert span.start % 8 == 0
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    return buffer


def test_read_chunks_into_one_buffer(tmp_path):
    """Chunks of any record count (odd counts put the records off the 8-byte grid) read back to back
    into one buffer, which a large enough ``room`` is reused as."""
    path = tmp_path / "batch.trace"
    _write(path, _timed(700), chunk_bytes=1500)
    with rmtrace.open(path) as r:
        assert len(r.chunks) > 10 and {c.count % 2 for c in r.chunks} == {0, 1}
        room = _chunks_alike(r, range(len(r.chunks)))
        assert _chunks_alike(r, range(3, 7), room) is room
        assert _chunks_alike(r, range(0, 2), bytearray(10)) is not None  # too small: a new one


def test_read_chunks_of_a_torn_trace(tmp_path):
    """A chunk salvaged from a cut (held in memory since opening) reads like the others."""
    path = tmp_path / "torn.trace"
    _write(path, _timed(400, size=3000), chunk_bytes=1 << 20)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 2 // 3])
    with rmtrace.open(path) as r:
        assert r.recovery.salvaged and r.record_count
        _chunks_alike(r, range(len(r.chunks)))


def test_read_chunks_refuses_a_damaged_chunk(tmp_path):
    """A chunk that changed after opening fails its payload checksum: a clear error, as a single read."""
    path = tmp_path / "damaged.trace"
    _write(path, _timed(300), chunk_bytes=2048)
    with rmtrace.open(path) as r:
        chunk = r.chunks[2]
        with open(path, "r+b") as f:
            f.seek(chunk.end - 5)
            byte = f.read(1)
            f.seek(chunk.end - 5)
            f.write(bytes([byte[0] ^ 0x40]))
        with pytest.raises(rmtrace.errors.CorruptTraceError, match="payload checksum"):
            r.read_chunks(range(len(r.chunks)))


def test_decode_into_checks_the_size():
    """``decode_into`` fills exactly the bytes the header says, and refuses a frame of another size,
    or one that does not decompress, as ``decode`` does."""
    import dataclasses
    import zlib

    from rmtrace.chunk import ChunkDecoder, ChunkEncoder, decode_chunk_header
    from rmtrace.errors import CorruptTraceError
    from rmtrace.record import encode_record

    recs = [encode_record(x.with_seq(i)) for i, x in enumerate(_timed(20))]
    header, payload = ChunkEncoder().encode(recs, 0, 19, 0, 1)
    info = decode_chunk_header(header, 0)
    decoder = ChunkDecoder()
    out = bytearray(info.raw_len + 16)
    offsets = decoder.decode_into(info, payload, memoryview(out)[8:8 + info.raw_len])
    want_offsets, want_records = decoder.decode(info, payload)
    assert offsets == want_offsets and bytes(out[8 + 4 * info.count:8 + info.raw_len]) == bytes(want_records)
    for raw_len in (info.raw_len - 8, info.raw_len + 8):
        wrong = dataclasses.replace(info, raw_len=raw_len)
        with pytest.raises(CorruptTraceError, match="decompresses to"):
            decoder.decode_into(wrong, payload, memoryview(bytearray(raw_len)))
    junk = payload[:12] + bytes(len(payload) - 12)
    bad = dataclasses.replace(info, payload_crc=zlib.crc32(junk))
    with pytest.raises(CorruptTraceError, match="does not decompress"):
        decoder.decode_into(bad, junk, memoryview(bytearray(info.raw_len)))
