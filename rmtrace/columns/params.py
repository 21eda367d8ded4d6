"""The params buffers of a record, read where they lie in its chunk.

The fold needs the params of a few calls (a channel's or TSG's allocation, the
controls the model reads) and nothing else of their records: the call table has
their header fields already.  ``ParamsReader.buffers(seq)`` walks the record's
buffer headers (``rmtrace.record``'s codecs, so every offset is the mirror's) and
makes a ``Buffer`` of the params ones only, where ``TraceReader.record_at``
decodes every buffer into a whole ``Record``, three times the cost.  The chunks
were checked when the call table was built from them (``rmtrace.columns.scan``
checks what ``decode_record`` checks), so the walk does not check them again.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.structs import SCALAR_KINDS, SIGNED_KINDS, Definitions

from rmtrace.columns.arrays import distinct
from rmtrace.columns.stash import RecordStash
from rmtrace.columns.view import StructView, layout_members, layout_scalars, params_layout
from rmtrace.flat import Scalar
from rmtrace.layout import Layout
from rmtrace.record import ALIGN, BUFFER, BUFFER_HEADER_SIZE, BUFFER_LAYOUT, RECORD, Buffer, BufferFlag, Role, When
from rmtrace.trace import TraceReader

PARAMS_ROLES = frozenset({int(Role.ALLOC_PARAMS), int(Role.PARAMS)})
"""The buffers read: an allocation's params, a control's."""
_B = BUFFER_LAYOUT.index
_HEADER_SIZE, _NBUFS = RECORD["header_size"], RECORD["nbufs"]
_ROLE, _LEN, _WHEN = _B.role, _B.len, _B.when
"""Where the walk finds its fields in a buffer header unpacked whole (one C call: three fields read one by one
are three Python calls, and cost more)."""


class ParamsReader:
    """The params buffers of records of one trace, by sequence number."""

    def __init__(self, reader: TraceReader, stash: RecordStash | None = None) -> None:
        """``stash``: records kept as the call table was built, read there rather than from the trace."""
        self.reader = reader
        self.stash = stash
        self._first_seqs: list[int] = []
        self._last: tuple[tuple[int, int], tuple] | None = None
        """The chunk read last, by (offset, count): the fold reads params in the trace's order, between
        other reads of the reader's few cached chunks that would push this one out."""

    def buffers(self, seq: int) -> tuple[Buffer, ...]:
        """The params buffers of record ``seq``, in the record's order."""
        return tuple(self._walk(seq, None, None))

    def buffer(self, seq: int, role: int, when: int) -> Buffer | None:
        """The first buffer of ``role`` (a params role) read ``when`` of record ``seq``; None when it has none."""
        found = self._walk(seq, role, when)
        return found[0] if found else None

    def _walk(self, seq: int, role: int | None, when: int | None) -> list[Buffer]:
        """Record ``seq``'s params buffers (of ``role`` read ``when``; the first only when both are given),
        in the record's order, as its buffer headers are walked."""
        kept = self.stash.find(seq) if self.stash is not None else None
        view, at = kept if kept is not None else self._in_chunk(seq)
        pos = at + _HEADER_SIZE.get(view, at)
        out = []
        unpack = BUFFER.unpack_from
        for _ in range(_NBUFS.get(view, at)):
            b = unpack(view, pos)
            n, kind = b[_LEN], b[_ROLE]
            if kind in PARAMS_ROLES and (role is None or (kind == role and b[_WHEN] == when)):
                out.append(Buffer(kind, b[_WHEN], bytes(view[pos + BUFFER_HEADER_SIZE:pos + BUFFER_HEADER_SIZE + n]),
                                  b[_B.flags], b[_B.addr], b[_B.orig_len], b[_B.slot]))
                if role is not None:
                    break
            pos += BUFFER_HEADER_SIZE + ((n + ALIGN - 1) & ~(ALIGN - 1))
        return out

    def _in_chunk(self, seq: int) -> tuple[memoryview, int]:
        """(records view, offset) of record ``seq`` in its chunk, read from the trace."""
        chunks = self.reader.chunks
        if len(self._first_seqs) != len(chunks):  # a growing trace has new chunks
            self._first_seqs = [c.first_seq for c in chunks]
        index = bisect.bisect_right(self._first_seqs, seq) - 1
        if index < 0 or seq > chunks[index].last_seq:
            raise IndexError(f"sequence {seq} is not in this trace (0..{self.reader.record_count - 1})")
        key = (chunks[index].offset, chunks[index].count)  # a growing trace's last chunk may grow
        if self._last is None or self._last[0] != key:
            self._last = key, self.reader.chunk_records(index)
        offsets, view = self._last[1]
        return view, offsets[seq - chunks[index].first_seq]

    def after_buffers(self, seqs: np.ndarray, roles: np.ndarray) -> Located:
        """``buffer(seqs[i], roles[i], When.AFTER)`` for every i at once, as where each buffer lies: the records'
        buffer headers walked with numpy, every record one step at a time (a record kept in the stash is read
        there, any other in its chunk)."""
        sources: list[Any] = []
        source = np.full(len(seqs), -1, dtype=np.int64)
        record = np.zeros(len(seqs), dtype=np.int64)
        if self.stash is not None:
            segments, segment, record = self.stash.find_all(seqs)
            used = distinct(segment[segment >= 0])
            for k, used_segment in enumerate(used.tolist()):
                sources.append(segments[used_segment])
                source[segment == used_segment] = k
        chunks: dict[int, int] = {}  # a chunk's records, by the identity of their view: its index in ``sources``
        for i in np.flatnonzero(source < 0).tolist():
            view, record[i] = self._in_chunk(int(seqs[i]))
            source[i] = chunks.setdefault(id(view), len(sources))
            if source[i] == len(sources):
                sources.append(view)
        found = Located(sources, np.full(len(seqs), -1, dtype=np.int64), np.zeros(len(seqs), dtype=np.int64),
                        np.zeros(len(seqs), dtype=np.int64), np.zeros(len(seqs), dtype=np.int64))
        for k, data in enumerate(sources):
            mine = np.flatnonzero(source == k)
            _walk_all(np.frombuffer(data, dtype=np.uint8), record[mine], roles[mine], mine, k, found)
        return found


@dataclass
class Located:
    """Where buffers lie: for each i, ``length[i]`` bytes from ``start[i]`` of ``sources[source[i]]`` (a stash
    segment, a chunk's records), with the buffer's ``flags``; ``source[i]`` is -1 where there is no such buffer."""

    sources: list[Any]
    source: np.ndarray
    start: np.ndarray
    length: np.ndarray
    flags: np.ndarray

    def data(self, i: int) -> bytes:
        at = int(self.start[i])
        return bytes(self.sources[self.source[i]][at:at + int(self.length[i])])


def _walk_all(data: np.ndarray, records: np.ndarray, roles: np.ndarray, out: np.ndarray, source: int,
              found: Located) -> None:
    """``ParamsReader._walk`` of the records at ``records`` of ``data`` for their first buffer of ``roles`` read
    AFTER, all at once; what it finds goes to ``found`` at ``out``."""
    pos = records + _read(data, records, _HEADER_SIZE)
    left = _read(data, records, _NBUFS)
    waiting = np.arange(len(records))
    while waiting.size:
        waiting = waiting[left[waiting] > 0]
        at = pos[waiting]
        n = _read(data, at, _B_LEN)
        hit = (_read(data, at, _B_ROLE) == roles[waiting]) & (_read(data, at, _B_WHEN) == When.AFTER)
        picked = out[waiting[hit]]
        found.source[picked] = source
        found.start[picked] = at[hit] + BUFFER_HEADER_SIZE
        found.length[picked] = n[hit]
        found.flags[picked] = _read(data, at[hit], _B_FLAGS)
        pos[waiting] += BUFFER_HEADER_SIZE + ((n + ALIGN - 1) & ~(ALIGN - 1))
        left[waiting] -= 1
        waiting = waiting[~hit]


def _read(data: np.ndarray, at: np.ndarray, field: Scalar) -> np.ndarray:
    """``field`` of the structs at ``at`` of ``data``, as int64."""
    return _numbers(_gather(data, at + field.offset, field.codec.size), field.codec.format).ravel().astype(np.int64)


def _gather(data: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` bytes at each of ``at`` of ``data``, one row each."""
    return data[at[:, None] + np.arange(size)]


_B_ROLE, _B_WHEN, _B_LEN, _B_FLAGS = (BUFFER_LAYOUT[name] for name in ("role", "when", "len", "flags"))


def params_values(defs: Definitions, profile: DriverProfile, found: Located, roles: np.ndarray, keys: np.ndarray
                  ) -> list[Mapping[str, Any] | None]:
    """For each i, what ``params_view`` makes of the buffer ``found`` holds at i (of role ``roles[i]``, by the
    class or command ``keys[i]``): its members, read from columns of every buffer of the same layout at once;
    None where ``params_view`` makes None (no buffer, no layout, a buffer not read whole)."""
    out: list[Mapping[str, Any] | None] = [None] * len(keys)
    pairs = (roles.astype(np.int64) << 32) | (keys.astype(np.int64) & 0xFFFFFFFF)
    for pair in distinct(pairs[found.source >= 0]).tolist():
        name = params_layout(profile, pair >> 32, pair & 0xFFFFFFFF)
        layout = defs.layout(name) if name else None
        if layout is None:
            continue
        mine = np.flatnonzero((pairs == pair) & (found.source >= 0) & (found.length >= layout.size)
                              & ((found.flags & BufferFlag.UNREADABLE) == 0))
        group = _Group(defs, layout, found, mine)
        for k, i in enumerate(mine.tolist()):
            out[i] = _Members(group, k)
    return out


class _Group:
    """Params buffers of one layout: their first ``layout.size`` bytes as the rows of one array, and the
    members read from them a column at a time, on first need."""

    def __init__(self, defs: Definitions, layout: Layout, found: Located, rows: np.ndarray) -> None:
        self.defs, self.layout, self.found, self.rows = defs, layout, found, rows
        self.members = layout_members(layout)
        size, sources = layout.size, found.sources
        # sliced row by row: a gather of every byte by its index held 8 bytes of index per byte (13 MB a block)
        self.bytes = np.frombuffer(b"".join(sources[source][start:start + size] for source, start in zip(
            found.source[rows].tolist(), found.start[rows].tolist())), dtype=np.uint8).reshape(len(rows), size)
        self._columns: dict[str, list[Any] | None] = {}

    def column(self, name: str) -> list[Any] | None:
        """Member ``name`` of every buffer, as ``StructView`` reads it; None when a view would not read it
        itself (unions, bitfields, nested structs, arrays of structs: ``_Members`` asks a view)."""
        if name not in self._columns:
            self._columns[name] = self._read(name)
        return self._columns[name]

    def _read(self, name: str) -> list[Any] | None:
        scalar = layout_scalars(self.layout).get(name)
        if scalar is not None:
            offset, codec = scalar
            return _numbers(self.bytes[:, offset:offset + codec.size], codec.format).ravel().tolist()
        f = self.members.get(name)
        if f is None or not (f.kind == "array" and len(f.dims) <= 1 and f.count and f.elem_kind in SCALAR_KINDS):
            return None  # as ``StructView._read``: a one-dimensional array of numbers is bytes or a list of them
        size = f.size // f.count
        part = self.bytes[:, f.offset:f.offset + f.size]
        if size == 1:
            return [bytes(row) for row in part]
        if size not in _NUMBER_CODES:
            return None
        code = _NUMBER_CODES[size].lower() if f.elem_kind in SIGNED_KINDS else _NUMBER_CODES[size]
        return _numbers(part, "<" + code).tolist()

    def view(self, k: int) -> StructView:
        """Buffer ``k`` as ``params_view`` makes it: for what the columns do not read."""
        return StructView(self.defs, self.layout, self.found.data(int(self.rows[k])))


_NUMBER_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
"""struct's codes of the unsigned numbers ``StructView`` reads (lower case: signed)."""


def _numbers(part: np.ndarray, code: str) -> np.ndarray:
    """The rows of bytes ``part`` as little-endian numbers of struct's ``code`` (one column per number; by
    struct's standard sizes, which numpy's codes of C types need not have: its "L" is 8 bytes)."""
    letter = code.lstrip("<")
    kind = "i" if letter.islower() else "u"
    return np.ascontiguousarray(part).view(np.dtype(f"<{kind}{struct.calcsize('<' + letter)}"))


class _Members(Mapping[str, Any]):
    """Buffer ``k`` of a ``_Group``: its members from the group's columns, anything else from its view."""

    __slots__ = ("_group", "_k", "_view")

    def __init__(self, group: _Group, k: int) -> None:
        self._group, self._k = group, k
        self._view: StructView | None = None

    def _viewed(self) -> StructView:
        if self._view is None:
            self._view = self._group.view(self._k)
        return self._view

    def __getitem__(self, name: str) -> Any:
        column = self._group.column(name)
        return column[self._k] if column is not None else self._viewed()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._group.members or name in self._viewed()

    def __iter__(self) -> Iterator[str]:
        return iter(self._viewed())

    def __len__(self) -> int:
        return len(self._viewed())
