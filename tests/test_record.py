"""Record encoding: exact bytes, round trips, and clear errors for malformed bytes."""

import struct

import pytest
from hypothesis import given

from rmtrace.errors import RecordError
from rmtrace.record import (
    HEADER_SIZE,
    Buffer,
    Phase,
    Record,
    RecordHeader,
    Role,
    Source,
    When,
    decode_record,
    encode_record,
    iter_records,
)
from tests.strategies import records


def test_known_bytes():
    rec = Record(Source.RM, Phase.ENTER, op=0x2A, seq=5, time_ns=1000, pid=10, tid=11, call_id=7, fd=3,
                 buffers=(Buffer(Role.ARG, When.BEFORE, b"\x01\x02\x03"),))
    data = encode_record(rec)
    assert len(data) == 72 + 24 + 8
    assert data[:4] == b"RMTR"
    header = RecordHeader.parse(data)
    assert (header.total_len, header.source, header.phase, header.op, header.nbufs) == (104, 1, 1, 0x2A, 1)
    assert struct.unpack_from("<HBBIQII", data, 72) == (Role.ARG, When.BEFORE, 0, 3, 0, 3, 0)
    assert data[96:104] == b"\x01\x02\x03\0\0\0\0\0"
    assert RecordHeader.build(header) == data[:HEADER_SIZE]


@given(records)
def test_round_trip(rec):
    data = encode_record(rec)
    assert len(data) % 8 == 0
    assert decode_record(data) == rec
    assert encode_record(decode_record(data)) == data


@given(records, records)
def test_stream_of_records(a, b):
    assert list(iter_records(encode_record(a) + encode_record(b))) == [a, b]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: b"XXXX" + d[4:], "bad magic"),
    (lambda d: d[:40], "a header needs"),
    (lambda d: d[:4] + b"\x09\x00" + d[6:], "record version 9"),
    (lambda d: d[:8] + struct.pack("<I", 4000) + d[12:], "bad sizes"),
    (lambda d: d[:-8], "bad sizes"),
])
def test_malformed(mutate, message):
    data = encode_record(Record(Source.UVM, Phase.EXIT, buffers=(Buffer(Role.ARG, When.AFTER, b"x" * 20),)))
    with pytest.raises(RecordError, match=message):
        decode_record(mutate(data))


def test_offsets_and_positions_come_from_the_mirror():
    from rmtrace.record import BUFFER_LAYOUT, RECORD, H, RecordHeader
    # docs/trace-format.md's table, read back from the construct mirror
    assert [(n, RECORD.offset(n)) for n in ("seq", "time_ns", "pid", "call_id", "fd", "nbufs")] == [
        ("seq", 16), ("time_ns", 24), ("pid", 32), ("call_id", 40), ("fd", 52), ("nbufs", 68)]
    assert [sub.name for sub in RecordHeader.subcons].index("op") == H.op
    data = encode_record(Record(Source.UVM, Phase.EXIT, op=37, pid=9, fd=-1, ret=-5))
    assert RECORD.unpack(data).op == 37 and RECORD["ret"].get(data) == -5 and RECORD["fd"].get(data) == -1
    assert BUFFER_LAYOUT.size == 24


def test_packers_refuse_a_field_left_out():
    from rmtrace.record import RECORD
    with pytest.raises(TypeError, match="missing field"):
        RECORD.pack(version=1)
    with pytest.raises(TypeError, match="missing"):
        RECORD.packer("version")
    with pytest.raises(TypeError, match="no field"):
        RECORD.pack(bogus=1)
