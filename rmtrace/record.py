"""The rmtrace record, mirrored once from ``kmod_shim/rmtrace_record.h``.

The C header is the definition; ``RecordHeader`` and ``BufferHeader`` below are
its construct mirror, checked field by field against the header's DWARF layout
(tests/test_record_abi.py).  The hot path (trace reading and writing) uses
``struct.Struct`` codecs *derived from* those construct definitions, so there
is still one Python definition of the layout.  The mirrors are made on first use
(``FlatStruct.lazy``): a process that only reads and writes records never imports
construct.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rmtrace.errors import RecordError
from rmtrace.flat import FlatStruct, field_offset, lazy_mirrors  # noqa: F401  (field_offset: the replayer takes it from here)

RECORD_MAGIC = 0x52544D52
RECORD_VERSION = 1
ALIGN = 8


class Source(enum.IntEnum):
    """enum rmt_source"""

    RM = 1
    UVM = 2
    GSP = 3
    SEMA = 4
    SYS = 5
    MARK = 6


class Phase(enum.IntEnum):
    """enum rmt_phase"""

    ENTER = 1
    EXIT = 2
    SEND = 3
    RECV = 4
    EVENT = 5


class RecordFlag(enum.IntFlag):
    """enum rmt_record_flag"""

    TRUNCATED = 1 << 0
    UNREADABLE = 1 << 1
    SYNTHETIC = 1 << 2
    REPLAY = 1 << 3


class SysOp(enum.IntEnum):
    """enum rmt_sys_op"""

    OPEN = 1
    CLOSE = 2
    DUP = 3
    MMAP = 4
    MUNMAP = 5
    FORK = 6
    EXEC = 7
    EXIT = 8


class MarkOp(enum.IntEnum):
    """enum rmt_mark_op"""

    IN_FLIGHT = 1
    LOST = 2
    NOTE = 3
    VERDICT = 4
    STOP = 5


class Role(enum.IntEnum):
    """enum rmt_buf_role"""

    ARG = 1
    PARAMS = 2
    ALLOC_PARAMS = 3
    NESTED = 4
    XFER = 5
    PATH = 6
    TEXT = 7
    PAYLOAD = 8
    RIGHTS = 9


class When(enum.IntEnum):
    """enum rmt_buf_when"""

    BEFORE = 1
    AFTER = 2
    ONCE = 3


class BufferFlag(enum.IntFlag):
    """enum rmt_buf_flag"""

    TRUNCATED = 1 << 0
    UNREADABLE = 1 << 1


if TYPE_CHECKING:
    from construct import Struct


def _record_header() -> Struct:
    """struct rmt_record, 72 bytes (``RecordHeader``)."""
    from construct import Const, Int8ul, Int16ul, Int32sl, Int32ul, Int64sl, Int64ul, Struct
    return Struct(
        "magic" / Const(RECORD_MAGIC, Int32ul),
        "version" / Int16ul,
        "header_size" / Int16ul,
        "total_len" / Int32ul,
        "source" / Int16ul,
        "phase" / Int8ul,
        "flags" / Int8ul,
        "seq" / Int64ul,
        "time_ns" / Int64ul,
        "pid" / Int32ul,
        "tid" / Int32ul,
        "call_id" / Int64ul,
        "op" / Int32ul,
        "fd" / Int32sl,
        "ret" / Int64sl,
        "err" / Int32sl,
        "nbufs" / Int16ul,
        "reserved" / Int16ul,
    )


def _buffer_header() -> Struct:
    """struct rmt_buffer, 24 bytes (``BufferHeader``)."""
    from construct import Int8ul, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "role" / Int16ul,
        "when" / Int8ul,
        "flags" / Int8ul,
        "len" / Int32ul,
        "addr" / Int64ul,
        "orig_len" / Int32ul,
        "slot" / Int32ul,
    )


def _sys_mmap() -> Struct:
    """struct rmt_sys_mmap, payload of SYS MMAP/MUNMAP records (``SysMmap``)."""
    from construct import Int32sl, Int64ul, Struct
    return Struct(
        "addr" / Int64ul,
        "length" / Int64ul,
        "offset" / Int64ul,
        "prot" / Int32sl,
        "flags" / Int32sl,
    )


RECORD = FlatStruct.lazy(_record_header, "rmt_record")
BUFFER_LAYOUT = FlatStruct.lazy(_buffer_header, "rmt_buffer")
SYS_MMAP = FlatStruct.lazy(_sys_mmap, "rmt_sys_mmap")
_MIRRORS = {"RecordHeader": RECORD, "BufferHeader": BUFFER_LAYOUT, "SysMmap": SYS_MMAP}
"""The construct mirrors, made on first use: reading and writing records needs only the FlatStructs."""
__getattr__ = lazy_mirrors(__name__, _MIRRORS)
HEADER = RECORD.codec
"""struct.Struct of struct rmt_record; its tuples are in ``RECORD.index`` order."""
BUFFER = BUFFER_LAYOUT.codec
HEADER_SIZE = HEADER.size
BUFFER_HEADER_SIZE = BUFFER.size
H = RECORD.index
"""Positions of the header fields in ``HEADER``'s tuples: ``h[H.source]``."""
SEQ = RECORD["seq"]
TIME = RECORD["time_ns"]
SEQ_OFFSET = SEQ.offset
TIME_OFFSET = TIME.offset
_START = RECORD.prefix("total_len")  # magic, version, header_size, total_len: enough to frame a record
BUFFER_LEN = BUFFER_LAYOUT["len"]


def _pad(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


@dataclass(frozen=True, slots=True)
class Buffer:
    """One tagged buffer of a record (struct rmt_buffer plus its data)."""

    role: int
    when: int
    data: bytes = b""
    flags: int = 0
    addr: int = 0
    orig_len: int | None = None
    """Bytes the program pointed at; None means len(data) (nothing was cut)."""
    slot: int = 0

    def __post_init__(self) -> None:
        if self.orig_len is None:
            object.__setattr__(self, "orig_len", len(self.data))


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record header with its buffers."""

    source: int
    phase: int
    op: int = 0
    seq: int = 0
    time_ns: int = 0
    pid: int = 0
    tid: int = 0
    call_id: int = 0
    fd: int = -1
    ret: int = 0
    err: int = 0
    flags: int = 0
    buffers: tuple[Buffer, ...] = field(default_factory=tuple)

    def buffer(self, role: int, when: int | None = None, slot: int | None = None) -> Buffer | None:
        """The first buffer with this role (and ``when``/``slot`` if given), or None."""
        for buf in self.buffers:
            if buf.role == role and (when is None or buf.when == when) and (slot is None or buf.slot == slot):
                return buf
        return None

    def with_seq(self, seq: int) -> Record:
        return replace(self, seq=seq)

    def encode(self) -> bytes:
        return encode_record(self)


# Which header fields a Record carries (by name), and the order Record and Buffer take them in.
_pack_header = RECORD.packer("version", "header_size", "total_len", "nbufs",
                             attrs=tuple(n for n in RECORD.names if n in Record.__dataclass_fields__))
_record_args = RECORD.getter(*(n for n in Record.__dataclass_fields__ if n != "buffers"))
_pack_buffer = BUFFER_LAYOUT.packer("len", attrs=tuple(n for n in BUFFER_LAYOUT.names if n != "len"))
_buffer_args = BUFFER_LAYOUT.getter(*(n for n in Buffer.__dataclass_fields__ if n != "data"))
_BUF_DATA_AT = list(Buffer.__dataclass_fields__).index("data")
_MAGIC, _VERSION, _HEADER_SIZE, _TOTAL, _NBUFS = (RECORD.names.index(n) for n in
                                                  ("magic", "version", "header_size", "total_len", "nbufs"))
_LEN = BUFFER_LAYOUT.names.index("len")


def encode_record(rec: Record) -> bytes:
    """The record's bytes in the one record format."""
    parts = [b""]
    total = HEADER_SIZE
    for buf in rec.buffers:
        n = len(buf.data)
        parts.append(_pack_buffer(buf, n))
        parts.append(buf.data)
        pad = _pad(n) - n
        if pad:
            parts.append(b"\0" * pad)
        total += BUFFER_HEADER_SIZE + n + pad
    parts[0] = _pack_header(rec, RECORD_VERSION, HEADER_SIZE, total, len(rec.buffers))
    return b"".join(parts)


def record_length(data: bytes | memoryview, offset: int = 0) -> int:
    """total_len of the record at ``offset``, validated only for magic and bounds."""
    if len(data) - offset < HEADER_SIZE:
        raise RecordError(f"record at {offset}: {len(data) - offset} bytes, a header needs {HEADER_SIZE}")
    start = _START.unpack_from(data, offset)
    magic, total = start[_MAGIC], start[_TOTAL]
    if magic != RECORD_MAGIC:
        raise RecordError(f"record at {offset}: bad magic {magic:#010x}")
    if total < HEADER_SIZE or total % ALIGN or offset + total > len(data):
        raise RecordError(f"record at {offset}: bad length {total}")
    return total


def decode_record(data: bytes | memoryview, offset: int = 0) -> Record:
    """Decode the record at ``offset``; raises RecordError on malformed bytes."""
    end = len(data)
    if end - offset < HEADER_SIZE:
        raise RecordError(f"record at {offset}: {end - offset} bytes, a header needs {HEADER_SIZE}")
    h = HEADER.unpack_from(data, offset)
    if h[_MAGIC] != RECORD_MAGIC:
        raise RecordError(f"record at {offset}: bad magic {h[_MAGIC]:#010x}")
    if h[_VERSION] != RECORD_VERSION:
        raise RecordError(f"record at {offset}: record version {h[_VERSION]}, this rmtrace reads {RECORD_VERSION}")
    header_size, total = h[_HEADER_SIZE], h[_TOTAL]
    if header_size < HEADER_SIZE or total < header_size or total % ALIGN or offset + total > end:
        raise RecordError(f"record at {offset}: bad sizes (header {header_size}, total {total})")
    limit = offset + total
    pos = offset + header_size
    bufs = []
    for _ in range(h[_NBUFS]):
        if pos + BUFFER_HEADER_SIZE > limit:
            raise RecordError(f"record at {offset}: buffer header past the record's end")
        b = BUFFER.unpack_from(data, pos)
        n = b[_LEN]
        pos += BUFFER_HEADER_SIZE
        if pos + n > limit:
            raise RecordError(f"record at {offset}: buffer of {n} bytes past the record's end")
        args = list(_buffer_args(b))
        args.insert(_BUF_DATA_AT, bytes(data[pos:pos + n]))
        bufs.append(Buffer(*args))
        pos += _pad(n)
    return Record(*_record_args(h), tuple(bufs))  # type: ignore[call-arg]  # the getter yields Record's fields


def restamp(encoded: bytes, seq: int) -> bytes:
    """The same record bytes with a new sequence number (the recorder's merge)."""
    return SEQ.replaced(encoded, seq)


def iter_records(data: bytes | memoryview) -> Iterable[Record]:
    """Decode a byte stream of back-to-back records."""
    pos = 0
    while pos < len(data):
        total = record_length(data, pos)
        yield decode_record(data, pos)
        pos += total


@functools.cache  # called for every record and buffer a JSON object holds; the enum lookup costs 20 times more
def enum_name(enum_type: type[enum.IntEnum], value: int) -> str:
    """The member name, or the number for values this rmtrace does not know."""
    name = _member_names(enum_type).get(value)
    return name if name is not None else str(value)


@functools.cache
def _member_names(enum_type: type[enum.IntEnum]) -> dict[int, str]:
    """value -> name of each member (an alias's value names its first member, as ``enum_type(value)`` does):
    a dict lookup, where calling the enum costs a microsecond, and a JSON call object names some 20."""
    return {int(member): member.name for member in enum_type}


def record_to_dict(rec: Record) -> dict:
    """Every header field and buffer (data as hex): the raw JSON form of a record."""
    return {
        "seq": rec.seq, "time_ns": rec.time_ns, "pid": rec.pid, "tid": rec.tid,
        "source": enum_name(Source, rec.source), "phase": enum_name(Phase, rec.phase),
        "op": rec.op, "call_id": rec.call_id, "fd": rec.fd, "ret": rec.ret, "err": rec.err, "flags": rec.flags,
        "buffers": [
            {"role": enum_name(Role, b.role), "when": enum_name(When, b.when), "flags": b.flags,
             "addr": b.addr, "len": len(b.data), "orig_len": b.orig_len,
             "slot": b.slot, "hex": b.data.hex()}
            for b in rec.buffers
        ],
    }
