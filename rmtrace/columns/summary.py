"""Records of a block of calls read where they lie in their chunks, vectorised: argument members, raw bytes.

``rmtrace show`` prints most calls from the call table's columns
(``rmtrace.columns.lines``).  Many of those lines also hold a few numbers of
the call's argument struct (a control's flags, a mapping's offset and
length), at offsets the driver profile gives.  Reading them through
``TraceReader.record_at`` decodes every buffer of both records of the call
into a ``Record``; here the records of a whole block of calls are located in
their decompressed chunks (``TraceReader.read_chunks``) by sequence number,
their buffer headers are walked in step with numpy (one pass per buffer
index), and each asked-for member is one gather per block: a column-like
array, no record read.

The chunks were checked when the call table was built from them
(``rmtrace.columns.scan`` checks what ``decode_record`` checks), so nothing
here checks them again.  Every offset comes from the record mirror
(``rmtrace.columns.dtypes``).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import numpy as np
from xxhash import xxh3_128_intdigest

from rmtrace.columns.batch import ByteViews
from rmtrace.columns.dtypes import BUFFER_DTYPE, HEADER_DTYPE
from rmtrace.columns.memokey import VOLATILE_SPAN
from rmtrace.record import ALIGN, Role, When
from rmtrace.trace import TraceReader

SIDES = (When.BEFORE, When.AFTER)
"""The argument struct as it was read before the call and after it, in that order."""

_BUFFER_SIZE = BUFFER_DTYPE.itemsize
_ARG = int(Role.ARG)


def _field(dtype: np.dtype, name: str) -> tuple[int, np.dtype]:
    kind, offset = dtype.fields[name][:2]  # type: ignore[index]  # a structured dtype's fields are known
    return offset, kind


_ROLE, _WHEN, _FLAGS, _LEN = (_field(BUFFER_DTYPE, n) for n in ("role", "when", "flags", "len"))
_VOLATILE_START, _VOLATILE_END = VOLATILE_SPAN
_VOLATILE_WORDS = (_VOLATILE_END - _VOLATILE_START) // ALIGN
_SEED = int.from_bytes(os.urandom(8), "little")
"""This process's seed of ``Block.content_ids``' xxh3: ids are compared within one process only."""


@dataclass
class ArgSides:
    """Of each record of a block, where its argument buffers are, per side of ``SIDES``: the data's byte in
    the block (-1: none), its length, its flags."""

    start: tuple[np.ndarray, np.ndarray]
    length: tuple[np.ndarray, np.ndarray]
    flags: tuple[np.ndarray, np.ndarray]


class Block(ByteViews):
    """Records by sequence number, in the bytes of the chunks that hold them put one after the other (each
    a whole number of words, so every record stays aligned): one gather reads a field of all of them."""

    def __init__(self, u1: np.ndarray, at: np.ndarray) -> None:
        super().__init__(u1)
        self.at = at
        """Each record's first byte in the block."""

    def take(self, index: np.ndarray) -> Block:
        """Records ``index`` of this block, in that order, in the same bytes (only their positions copied)."""
        out = copy.copy(self)
        out.at = self.at[index]
        return out

    def header(self, name: str) -> np.ndarray:
        """Header field ``name`` of each record."""
        offset, dtype = _field(HEADER_DTYPE, name)
        return self.read(self.at + offset, dtype)

    def arg_sides(self) -> ArgSides:
        """Where the first argument buffer read before the call, and the first read after it, are in each
        record (as ``Record.buffer(Role.ARG, when)`` finds them): the buffer headers of all the records
        walked in step, one pass per buffer index."""
        n = len(self.at)
        start = (np.full(n, -1, np.int64), np.full(n, -1, np.int64))
        length = (np.zeros(n, np.int64), np.zeros(n, np.int64))
        flags = (np.zeros(n, np.int64), np.zeros(n, np.int64))
        nbufs = self.header("nbufs").astype(np.int64)
        pos = self.at + self.header("header_size").astype(np.int64)
        live = np.flatnonzero(nbufs > 0)
        step = 0
        while live.size:
            p = pos[live]
            size = self.read(p + _LEN[0], _LEN[1]).astype(np.int64)
            is_arg = self.read(p + _ROLE[0], _ROLE[1]) == _ARG
            when = self.read(p + _WHEN[0], _WHEN[1])
            for side, side_when in enumerate(SIDES):
                first = is_arg & (when == side_when) & (start[side][live] < 0)
                if first.any():
                    mine = live[first]
                    start[side][mine] = p[first] + _BUFFER_SIZE
                    length[side][mine] = size[first]
                    flags[side][mine] = self.read(p[first] + _FLAGS[0], _FLAGS[1])
            pos[live] = p + _BUFFER_SIZE + ((size + ALIGN - 1) & ~(ALIGN - 1))
            step += 1
            live = live[nbufs[live] > step]
        return ArgSides(start, length, flags)

    def content_ids(self, first: np.ndarray, second: np.ndarray, marks: np.ndarray) -> list[int | tuple[int, int]]:
        """Per call, whose records are ``first`` and ``second`` of this block (-1: none): an id of what its
        records say, the 128-bit xxh3 of each record's bytes (the pair of them for two records) with the
        header fields that say which call a record is (``VOLATILE``) cleared, and the first of those of its
        first record holding the call's ``mark`` (a number < 2**64: its state).  Two calls have equal ids
        when their marks are equal and so is everything else their records say; unequal calls have equal
        ids with the odds of a 128-bit hash's collision: xxh3 is not a cryptographic hash, so its seed is
        drawn at random per process (``_SEED``), and a trace made to collide for one seed does not for the next
        (a crafted trace shown wrongly would need a collision of xxh3 for any seed, which is an attack on xxh3
        itself; blake2b or blake3 would rule that out too, at 5-10 times xxh3's cost a call).
        The records are hashed where they lie (a record
        can run to kilobytes: copying the bytes out as keys, and hashing those again in a dict, cost a
        tenth of show), their fields cleared in the block's own bytes meanwhile, then put back."""
        has_second = second >= 0
        records = np.concatenate([first, second[has_second]])
        words = self.typed[ALIGN]
        volatile = ((self.at[records] + _VOLATILE_START) // ALIGN)[:, None] + np.arange(_VOLATILE_WORDS)
        kept = words[volatile]
        try:  # the block's bytes put back whatever happens
            words[volatile] = 0
            words[volatile[:len(first), 0]] = marks
            view = self.u1.data
            start = self.at.tolist()
            end = (self.at + self.header("total_len")).tolist()
            digest = xxh3_128_intdigest
            seed = _SEED
            return [digest(view[start[a]:end[a]], seed) if b < 0
                    else (digest(view[start[a]:end[a]], seed), digest(view[start[b]:end[b]], seed))
                    for a, b in zip(first.tolist(), second.tolist())]
        finally:
            words[volatile] = kept


class BlockReader:
    """The records of one trace, a block of sequence numbers at a time."""

    def __init__(self, reader: TraceReader) -> None:
        self.reader = reader
        self._first = np.array([c.first_seq for c in reader.chunks], dtype=np.int64)

    def block(self, seqs: np.ndarray) -> Block:
        """The records of ``seqs`` (a block's: a few consecutive chunks hold them), their chunks read back to
        back into one buffer (``TraceReader.read_chunks``)."""
        chunk = np.searchsorted(self._first, seqs, side="right") - 1
        indexes, which = np.unique(chunk, return_inverse=True)
        buffer, spans = self.reader.read_chunks(indexes.tolist())
        # each chunk's record offsets in the buffer, one after the other
        offsets = np.concatenate([np.frombuffer(s.offsets, dtype=np.uint32).astype(np.int64) + s.start for s in spans])
        firsts = np.concatenate(([0], np.cumsum([len(s.offsets) for s in spans])[:-1])).astype(np.int64)
        u1 = np.frombuffer(buffer, dtype=np.uint8, count=len(buffer) - len(buffer) % ALIGN)
        return Block(u1, offsets[firsts[which.reshape(-1)] + seqs - self._first[chunk]])
