"""The rmtrace record, mirrored once from ``kmod_shim/rmtrace_record.h``.

The C header is the definition; ``RecordHeader`` and ``BufferHeader`` below are
its construct mirror, checked field by field against the header's DWARF layout
(tests/test_record_abi.py).  The hot path (trace reading and writing) uses
``struct.Struct`` codecs *derived from* those construct definitions, so there
is still one Python definition of the layout.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from construct import Const, FormatField, Int8ul, Int16ul, Int32sl, Int32ul, Int64sl, Int64ul, Struct

from rmtrace.errors import RecordError

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


RecordHeader = Struct(
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
"""struct rmt_record, 72 bytes."""

BufferHeader = Struct(
    "role" / Int16ul,
    "when" / Int8ul,
    "flags" / Int8ul,
    "len" / Int32ul,
    "addr" / Int64ul,
    "orig_len" / Int32ul,
    "slot" / Int32ul,
)
"""struct rmt_buffer, 24 bytes."""

SysMmap = Struct(
    "addr" / Int64ul,
    "length" / Int64ul,
    "offset" / Int64ul,
    "prot" / Int32sl,
    "flags" / Int32sl,
)
"""struct rmt_sys_mmap, payload of SYS MMAP/MUNMAP records."""


def struct_codec(definition: Struct) -> struct.Struct:
    """A ``struct.Struct`` with exactly the layout of a flat construct ``Struct``.

    Only fixed-size little-endian scalar fields (``FormatField``, possibly
    wrapped in ``Const``) are allowed; anything else is a programming error.
    """
    codes = []
    for sub in definition.subcons:
        leaf = sub.subcon
        while not isinstance(leaf, FormatField):
            leaf = getattr(leaf, "subcon", None)
            if leaf is None:
                raise TypeError(f"field {sub.name} is not a plain scalar")
        if leaf.fmtstr[0] != "<":
            raise TypeError(f"field {sub.name} is not little-endian")
        codes.append(leaf.fmtstr[1:])
    codec = struct.Struct("<" + "".join(codes))
    assert codec.size == definition.sizeof()
    return codec


HEADER = struct_codec(RecordHeader)
BUFFER = struct_codec(BufferHeader)
HEADER_SIZE = HEADER.size
BUFFER_HEADER_SIZE = BUFFER.size


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


def encode_record(rec: Record) -> bytes:
    """The record's bytes in the one record format."""
    parts = [b""]
    total = HEADER_SIZE
    for buf in rec.buffers:
        n = len(buf.data)
        parts.append(BUFFER.pack(buf.role, buf.when, buf.flags, n, buf.addr, buf.orig_len, buf.slot))
        parts.append(buf.data)
        pad = _pad(n) - n
        if pad:
            parts.append(b"\0" * pad)
        total += BUFFER_HEADER_SIZE + n + pad
    parts[0] = HEADER.pack(
        RECORD_MAGIC, RECORD_VERSION, HEADER_SIZE, total, rec.source, rec.phase, rec.flags,
        rec.seq, rec.time_ns, rec.pid, rec.tid, rec.call_id, rec.op, rec.fd, rec.ret, rec.err,
        len(rec.buffers), 0,
    )
    return b"".join(parts)


def record_length(data: bytes | memoryview, offset: int = 0) -> int:
    """total_len of the record at ``offset``, validated only for magic and bounds."""
    if len(data) - offset < HEADER_SIZE:
        raise RecordError(f"record at {offset}: {len(data) - offset} bytes, a header needs {HEADER_SIZE}")
    magic, _v, _hs, total = struct.unpack_from("<IHHI", data, offset)
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
    (magic, version, header_size, total, source, phase, flags, seq, time_ns, pid, tid, call_id,
     op, fd, ret, err, nbufs, _res) = HEADER.unpack_from(data, offset)
    if magic != RECORD_MAGIC:
        raise RecordError(f"record at {offset}: bad magic {magic:#010x}")
    if version != RECORD_VERSION:
        raise RecordError(f"record at {offset}: record version {version}, this rmtrace reads {RECORD_VERSION}")
    if header_size < HEADER_SIZE or total < header_size or total % ALIGN or offset + total > end:
        raise RecordError(f"record at {offset}: bad sizes (header {header_size}, total {total})")
    limit = offset + total
    pos = offset + header_size
    bufs = []
    for _ in range(nbufs):
        if pos + BUFFER_HEADER_SIZE > limit:
            raise RecordError(f"record at {offset}: buffer header past the record's end")
        role, when, bflags, n, addr, orig, slot = BUFFER.unpack_from(data, pos)
        pos += BUFFER_HEADER_SIZE
        if pos + n > limit:
            raise RecordError(f"record at {offset}: buffer of {n} bytes past the record's end")
        bufs.append(Buffer(role, when, bytes(data[pos:pos + n]), bflags, addr, orig, slot))
        pos += _pad(n)
    return Record(source, phase, op, seq, time_ns, pid, tid, call_id, fd, ret, err, flags, tuple(bufs))



def field_offset(definition: Struct, name: str) -> int:
    """Byte offset of a field in a flat, fixed-size construct Struct."""
    offset = 0
    for sub in definition.subcons:
        if sub.name == name:
            return offset
        offset += sub.sizeof()
    raise KeyError(name)


SEQ_OFFSET = field_offset(RecordHeader, "seq")
TIME_OFFSET = field_offset(RecordHeader, "time_ns")


def restamp(encoded: bytes, seq: int) -> bytes:
    """The same record bytes with a new sequence number (the recorder's merge)."""
    return encoded[:SEQ_OFFSET] + struct.pack("<Q", seq) + encoded[SEQ_OFFSET + 8:]


def iter_records(data: bytes | memoryview) -> Iterable[Record]:
    """Decode a byte stream of back-to-back records."""
    pos = 0
    while pos < len(data):
        total = record_length(data, pos)
        yield decode_record(data, pos)
        pos += total


def enum_name(enum_type: type[enum.IntEnum], value: int) -> str:
    """The member name, or the number for values this rmtrace does not know."""
    try:
        return enum_type(value).name
    except ValueError:
        return str(value)


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
