"""Damaged traces: the reader skips and reports what is damaged and reads every intact record.

Never a crash, a hang or silently wrong data: every record a damaged file
yields must equal the record written at that sequence number.  A damaged
chunk costs at most its own records, with or without a valid footer.
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rmtrace
from rmtrace.chunk import CHUNK_HEADER_SIZE
from rmtrace.errors import RmtraceError
from rmtrace.record import SEQ, Buffer, Phase, Record, Role, Source, When, decode_record
from rmtrace.trace import FOOTER, TraceWriter

N = 120


def _records(n=N, size=8):
    return [Record(Source.RM, Phase.ENTER if i % 2 == 0 else Phase.EXIT, op=0x2A, time_ns=10_000 + i, pid=7,
                   call_id=i // 2, buffers=(Buffer(Role.PARAMS, When.BEFORE, os.urandom(size) * (1 + i % 9)),))
            for i in range(n)]


def _written(path, recs, chunk_bytes):
    with TraceWriter(path, {"backend": "test"}, chunk_bytes=chunk_bytes) as w:
        for r in recs:
            w.write(r)
    with rmtrace.open(path) as r:
        chunks = list(r.chunks)
    return path.read_bytes(), [x.with_seq(i) for i, x in enumerate(recs)], chunks


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return _written(tmp_path_factory.mktemp("orig") / "orig.trace", _records(), 1500)


class Raw(bytes):
    """A record's bytes as read, with its sequence number (comparing bytes is what matters here,
    and it is far cheaper than decoding; the round trip of decoding is tested elsewhere)."""

    @property
    def seq(self) -> int:
        return SEQ.get(self)


def read_all(path, decode=False):
    """(records read, the error or None, the recovery or None)."""
    got = []
    try:
        with rmtrace.open(path) as r:
            for raw in r.raw_records():
                got.append(decode_record(raw) if decode else Raw(raw))
            return got, None, r.recovery
    except RmtraceError as exc:
        return got, exc, None


def check_no_wrong_data(got, want):
    for rec in got:
        expect = want[rec.seq]
        assert rec == (expect.encode() if isinstance(rec, Raw) else expect), f"record {rec.seq} differs"


def _flip(data, pos, mask=0x5A):
    b = bytearray(data)
    b[pos] ^= mask
    return bytes(b)


class Flipper:
    """One file flipped in place, one byte at a time (rewriting a whole file per case is slow here)."""

    def __init__(self, path, data):
        path.write_bytes(data)
        self.path, self.data = path, data
        self.fd = os.open(path, os.O_RDWR)

    def read_flipped(self, pos, mask):
        os.pwrite(self.fd, bytes([self.data[pos] ^ mask]), pos)
        try:
            return read_all(self.path)
        finally:
            os.pwrite(self.fd, self.data[pos:pos + 1], pos)

    def close(self):
        os.close(self.fd)


def _chunk_of(chunks, pos):
    return next((c for c in chunks if c.offset <= pos < c.end), None)


def test_truncate_every_offset_of_last_two_chunks(tmp_path, original):
    data, want, chunks = original
    assert len(chunks) >= 4
    start = chunks[-2].offset
    path = tmp_path / "t.trace"
    path.write_bytes(data)
    for cut in reversed(range(start, len(data))):
        os.truncate(path, cut)
        got, err, recovery = read_all(path)
        assert err is None, f"cut at {cut}: {err}"
        check_no_wrong_data(got, want)
        intact = sum(c.count for c in chunks if c.end <= cut)
        assert intact <= len(got) == recovery.records, f"cut at {cut}: {len(got)} records, {intact} intact"
        assert [r.seq for r in got] == list(range(len(got)))  # a prefix: nothing skipped before the cut
        assert not recovery.complete
        if cut < chunks[-1].end and cut not in (c.end for c in chunks):
            assert recovery.torn_offset is not None and "cut short" in recovery.reason


def test_a_cut_through_a_big_chunk_keeps_the_records_before_it(tmp_path):
    """Records come back in zstd blocks (16 KiB of input), not whole chunks: a cut anywhere in a
    chunk of 1,000 records loses only those after the last whole block before it."""
    data, want, chunks = _written(tmp_path / "big.trace", _records(1000, 64), 1 << 20)
    (chunk,) = chunks
    path = tmp_path / "cut.trace"
    counts = []
    for frac in (0.25, 0.5, 0.75, 0.99):
        cut = chunk.offset + CHUNK_HEADER_SIZE + int(chunk.comp_len * frac)
        path.write_bytes(data[:cut])
        got, err, recovery = read_all(path)
        assert err is None
        check_no_wrong_data(got, want)
        assert recovery.salvaged == len(got) and recovery.torn_offset == chunk.offset
        assert recovery.losses[0].records == 1000 - len(got)
        counts.append(len(got))
    assert counts == sorted(counts) and counts[0] > 0 and counts[-1] > 900, counts


def test_truncate_inside_header_and_metadata(tmp_path, original):
    data, _, chunks = original
    meta_end = 32 + int.from_bytes(data[12:16], "little")
    path = tmp_path / "h.trace"
    path.write_bytes(data[:chunks[0].offset + 1])
    for cut in reversed(range(0, chunks[0].offset + 1)):
        os.truncate(path, cut)
        got, err, recovery = read_all(path)
        assert got == []
        if cut < meta_end:
            assert err is not None and str(path) in str(err)
        else:  # only padding is missing
            assert err is None and recovery.records == 0


@pytest.mark.parametrize("footer", [True, False], ids=["footer", "no-footer"])
def test_every_single_bit_flip_costs_at_most_its_chunk(tmp_path, original, footer):
    """The issue's goal, for every bit of every header and a sample of payload bits."""
    data, want, chunks = original
    if not footer:
        data = data[:chunks[-1].end]
    positions = list(range(0, chunks[0].offset + CHUNK_HEADER_SIZE))
    for c in chunks:
        positions += range(c.offset, c.offset + CHUNK_HEADER_SIZE)
        positions += range(c.offset + CHUNK_HEADER_SIZE, c.end, 97)
    positions += range(chunks[-1].end, len(data))
    flipper = Flipper(tmp_path / "f.trace", data)
    for pos in sorted(set(positions)):
        bit = pos % 8
        got, err, recovery = flipper.read_flipped(pos, 1 << bit)
        assert err is None, f"flip at {pos}.{bit}: {err}"
        check_no_wrong_data(got, want)
        hit = _chunk_of(chunks, pos)
        assert len(got) >= N - (hit.count if hit else 0), f"flip at {pos}.{bit}: {len(got)} records"
        if hit is None:
            assert len(got) == N
    flipper.close()


def test_a_damaged_payload_is_skipped_and_reported_with_the_footer_intact(tmp_path, original):
    data, want, chunks = original
    path = tmp_path / "p.trace"
    for c in chunks:
        path.write_bytes(_flip(data, c.offset + CHUNK_HEADER_SIZE + c.comp_len // 2))
        got, err, recovery = read_all(path)
        assert err is None
        check_no_wrong_data(got, want)
        assert len(got) == N - c.count
        (loss,) = recovery.losses
        assert (loss.offset, loss.records, loss.first_seq) == (c.offset, c.count, c.first_seq)
        assert recovery.from_index and not recovery.complete
        text = recovery.describe()
        assert "footer and index intact" in text and f"{c.count} records lost at byte {c.offset}" in text
        assert "payload fails its checksum" in text


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
    assert recovery.lost_records == chunks[1].count


def test_a_damaged_chunk_header_costs_nothing_when_its_payload_proves_itself(tmp_path, original):
    data, want, chunks = original
    path = tmp_path / "hdr.trace"
    for footer in (True, False):
        base = data if footer else data[:chunks[-1].end]
        path.write_bytes(_flip(base, chunks[2].offset + 20))  # the chunk's count field
        got, err, recovery = read_all(path)
        assert err is None and got == [w.encode() for w in want]
        assert recovery.salvaged == chunks[2].count and "proved intact by its zstd checksum" in recovery.describe()


def test_swapped_chunks_and_appended_junk_lose_nothing(tmp_path, original):
    data, want, chunks = original
    a, b = chunks[1], chunks[2]
    swapped = data[:a.offset] + data[b.offset:b.end] + data[a.offset:a.end] + data[b.end:]
    path = tmp_path / "w.trace"
    path.write_bytes(swapped)
    got, err, recovery = read_all(path)
    assert err is None and got == [w.encode() for w in want]
    assert "out of sequence order" in recovery.describe() and "does not match the chunks" in recovery.describe()
    for junk in (b"\0" * 100, os.urandom(5000), data[chunks[0].offset:chunks[0].end]):
        path.write_bytes(data + junk)
        got, err, recovery = read_all(path)
        assert err is None and got == [w.encode() for w in want], recovery


def test_damaged_metadata_is_shown_and_costs_no_records(tmp_path, original):
    data, want, chunks = original
    path = tmp_path / "m.trace"
    path.write_bytes(_flip(data, 32 + 3))  # inside the JSON text
    got, err, recovery = read_all(path)
    assert err is None and got == [w.encode() for w in want] and "metadata" in recovery.describe()
    path.write_bytes(_flip(data, 12, 0x40))  # the metadata length field
    got, err, recovery = read_all(path)
    assert err is None and got == [w.encode() for w in want] and "metadata length field is damaged" in recovery.describe()
    with rmtrace.open(path) as r:
        assert r.meta == {"backend": "test"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]), st.integers(0, 10**6),
                          st.binary(min_size=1, max_size=16)), min_size=1, max_size=4))
def test_fuzz_reader(tmp_path, original, edits):
    """Random damage: never a crash, hang or wrong record (bounded: 150 examples per CI run)."""
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
    got, err, _ = read_all(path, decode=True)
    check_no_wrong_data(got, want)
    if err is not None:
        assert str(path) in str(err)  # its own message, naming the file


def test_footer_size():
    assert FOOTER.size == 32
