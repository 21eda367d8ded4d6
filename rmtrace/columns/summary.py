"""Records of a block of calls read where they lie in their chunks, vectorised: argument members, raw bytes.

``rmtrace show`` prints most calls from the call table's columns
(``rmtrace.columns.lines``).  Many of those lines also hold a few numbers of
the call's argument struct (a control's flags, a mapping's offset and
length), at offsets the driver profile gives.  Reading them through
``TraceReader.record_at`` decodes every buffer of both records of the call
into a ``Record``; here the records of a whole block of calls are located in
their decompressed chunks (``TraceReader.chunk_records``) by sequence number,
their buffer headers are walked in step with numpy (one pass per buffer
index), and each asked-for member is one gather per block: a column-like
array, no record read.

The chunks were checked when the call table was built from them
(``rmtrace.columns.scan`` checks what ``decode_record`` checks), so nothing
here checks them again.  Every offset comes from the record mirror
(``rmtrace.columns.dtypes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from rmtrace.columns.dtypes import BUFFER_DTYPE, HEADER_DTYPE
from rmtrace.record import ALIGN, Role, When
from rmtrace.trace import TraceReader

SIDES = (When.BEFORE, When.AFTER)
"""The argument struct as it was read before the call and after it, in that order."""

_BUFFER_SIZE = BUFFER_DTYPE.itemsize
_ARG = int(Role.ARG)


def _field(dtype: np.dtype, name: str) -> tuple[int, np.dtype]:
    kind, offset = dtype.fields[name][:2]  # type: ignore[index]  # a structured dtype's fields are known
    return offset, kind


_HEADER_SIZE, _TOTAL, _NBUFS = (_field(HEADER_DTYPE, n) for n in ("header_size", "total_len", "nbufs"))
_ROLE, _WHEN, _FLAGS, _LEN = (_field(BUFFER_DTYPE, n) for n in ("role", "when", "flags", "len"))
VOLATILE = ("seq", "time_ns", "pid", "tid", "call_id")
"""The header fields that say which call a record is, not what it says: the rest of a record (its other
header fields and its buffers) is what a decoder reads."""


def _volatile_span() -> tuple[int, int]:
    spans = sorted((HEADER_DTYPE.fields[n][1], HEADER_DTYPE.fields[n][1] + HEADER_DTYPE.fields[n][0].itemsize)  # type: ignore[index]
                   for n in VOLATILE)
    if any(a[1] != b[0] for a, b in zip(spans, spans[1:])):
        raise AssertionError(f"the record header's {VOLATILE} are not side by side")  # the mirror changed
    return spans[0][0], spans[-1][1]


VOLATILE_SPAN = _volatile_span()
"""Where ``VOLATILE`` lies in a record: bytes [start, end)."""
_VOLATILE_START, _VOLATILE_END = VOLATILE_SPAN


class Chunk:
    """One decompressed chunk as numpy arrays: its record offsets, its bytes and typed views of them."""

    def __init__(self, reader: TraceReader, index: int) -> None:
        offsets, view = reader.chunk_records(index)
        self.view = view
        self.offsets = np.frombuffer(offsets, dtype=np.uint32).astype(np.int64)
        whole = len(view) - len(view) % ALIGN
        u1 = np.frombuffer(view, dtype=np.uint8, count=whole)
        self.u1 = u1
        self._typed = {1: u1, 2: u1.view("<u2"), 4: u1.view("<u4"), 8: u1.view("<u8")}

    def read(self, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The numbers of ``dtype`` (a little-endian integer) at byte positions ``pos``."""
        size = dtype.itemsize
        if size == 1 or not (pos % size).any():
            return self._typed[size][pos // size].view(dtype)
        out = np.zeros(len(pos), dtype=np.uint64)  # unaligned: put the bytes together, little-endian
        for i in range(size):
            out |= self.u1[pos + i].astype(np.uint64) << np.uint64(8 * i)
        return out.astype(f"<u{size}").view(dtype)


@dataclass
class ArgSides:
    """Of each record asked for: its chunk and its byte in it (``BlockReader.places``), and where its
    argument buffers are (per side of ``SIDES``: the data's byte in the chunk, -1 for none; its length; its
    flags)."""

    chunk: np.ndarray
    at: np.ndarray
    start: tuple[np.ndarray, np.ndarray]
    length: tuple[np.ndarray, np.ndarray]
    flags: tuple[np.ndarray, np.ndarray]


class BlockReader:
    """The records of one trace, a block of sequence numbers at a time."""

    def __init__(self, reader: TraceReader, chunks_kept: int = 16) -> None:
        self.reader = reader
        self._first = np.array([c.first_seq for c in reader.chunks], dtype=np.int64)
        self._kept: dict[int, Chunk] = {}
        self._chunks_kept = chunks_kept

    def chunk(self, index: int) -> Chunk:
        found = self._kept.get(index)
        if found is None:
            if len(self._kept) >= self._chunks_kept:
                del self._kept[next(iter(self._kept))]  # the oldest: a block's chunks are consecutive
            found = self._kept[index] = Chunk(self.reader, index)
        return found

    def places(self, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(chunk index, byte in the chunk) of each record of ``seqs``."""
        chunk = np.searchsorted(self._first, seqs, side="right") - 1
        at = np.zeros(len(seqs), dtype=np.int64)
        for index, rows in self._by_chunk(chunk):
            at[rows] = self.chunk(index).offsets[seqs[rows] - self._first[index]]
        return chunk, at

    def arg_sides(self, seqs: np.ndarray) -> ArgSides:
        """Where the first argument buffer read before the call, and the first read after it, are in each
        record of ``seqs`` (as ``Record.buffer(Role.ARG, when)`` finds them)."""
        n = len(seqs)
        chunk, at = self.places(seqs)
        start = (np.full(n, -1, np.int64), np.full(n, -1, np.int64))
        length = (np.zeros(n, np.int64), np.zeros(n, np.int64))
        flags = (np.zeros(n, np.int64), np.zeros(n, np.int64))
        for index, rows in self._by_chunk(chunk):
            c = self.chunk(index)
            base = at[rows]
            nbufs = c.read(base + _NBUFS[0], _NBUFS[1]).astype(np.int64)
            pos = base + c.read(base + _HEADER_SIZE[0], _HEADER_SIZE[1]).astype(np.int64)
            live = np.flatnonzero(nbufs > 0)
            step = 0
            while live.size:
                p = pos[live]
                size = c.read(p + _LEN[0], _LEN[1]).astype(np.int64)
                is_arg = c.read(p + _ROLE[0], _ROLE[1]) == _ARG
                when = c.read(p + _WHEN[0], _WHEN[1])
                for side, side_when in enumerate(SIDES):
                    first = is_arg & (when == side_when) & (start[side][rows[live]] < 0)
                    if first.any():
                        mine = rows[live[first]]
                        start[side][mine] = p[first] + _BUFFER_SIZE
                        length[side][mine] = size[first]
                        flags[side][mine] = c.read(p[first] + _FLAGS[0], _FLAGS[1])
                pos[live] = p + _BUFFER_SIZE + ((size + ALIGN - 1) & ~(ALIGN - 1))
                step += 1
                live = live[nbufs[live] > step]
        return ArgSides(chunk, at, start, length, flags)

    def header_field(self, chunk: np.ndarray, at: np.ndarray, name: str) -> np.ndarray:
        """Header field ``name`` of the records at byte ``at`` of chunk ``chunk`` (``places``)."""
        offset, dtype = _field(HEADER_DTYPE, name)
        return self.gather(chunk, at + offset, dtype)

    def gather(self, chunk: np.ndarray, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The numbers of ``dtype`` at byte ``pos`` of chunk ``chunk``, for each pair."""
        out = np.zeros(len(pos), dtype=dtype)
        for index, rows in self._by_chunk(chunk):
            out[rows] = self.chunk(index).read(pos[rows], dtype)
        return out

    def stable_parts(self, seqs: np.ndarray) -> list[tuple[memoryview, memoryview]]:
        """Each record of ``seqs`` without the header fields that say which call it is (``VOLATILE``): the
        bytes before them and the bytes after, where they lie in the chunk."""
        chunk, at = self.places(seqs)
        ends = (at + self.gather(chunk, at + _TOTAL[0], _TOTAL[1])).tolist()
        views = {index: self.chunk(index).view for index in np.unique(chunk).tolist()}
        return [(views[c][a:a + _VOLATILE_START], views[c][a + _VOLATILE_END:e])
                for c, a, e in zip(chunk.tolist(), at.tolist(), ends)]

    @staticmethod
    def _by_chunk(chunk: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        if len(chunk) and chunk[0] == chunk[-1] and (chunk == chunk[0]).all():
            yield int(chunk[0]), np.arange(len(chunk))
            return
        order = np.argsort(chunk, kind="stable")
        bounds = np.flatnonzero(np.diff(chunk[order])) + 1
        for rows in np.split(order, bounds):
            yield int(chunk[rows[0]]), rows
