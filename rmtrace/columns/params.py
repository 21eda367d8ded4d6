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

from rmtrace.columns.stash import RecordStash
from rmtrace.record import ALIGN, BUFFER, BUFFER_HEADER_SIZE, BUFFER_LAYOUT, RECORD, Buffer, Role
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
