"""Records the fold reads again, kept as the call table's build scans them.

The fold reads a few calls' records for more than the table's columns: the
records of the calls the semantic layer decodes (GSP exchanges, fork/exec/exit,
..., the operations whose ``Need`` is ``RECORDS`` in ``rmtrace.columns.fold``).  Read from the trace
again, in row order, each chunk that holds one is decompressed a second time,
and at 1M records such records lie in every chunk.  The build has every batch
decompressed already, so it copies out the records the fold will read
(``rereads``: by their operation, a few per cent of them)
into one ``RecordStash``, and the fold reads them there.  For a fold that reads
params (the whole model's, or wedges' channels) it keeps the last record of the
calls whose params say more than their row (``Effects.params``: a channel's or
TSG's allocation, the controls the model reads), which the fold would
otherwise decompress every chunk again for (0.3 s of wedges' 4.5 s at 1M
records, for 7 MB kept).  A record the stash
lacks (a call the operation's rule did not foresee, a table loaded from the
cache, a live trace's next rows) is read from the trace as before: the stash
only saves reads, it never decides what the fold sees.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable

import numpy as np
from rmtrace.decoders.roles import EscapeRole, Roles

from rmtrace.columns.argspec import Plan
from rmtrace.columns.scan import KeyCache, Records
from rmtrace.record import RECORD, Phase, Record, Source, decode_record
from rmtrace.trace import TraceReader

_TOTAL = RECORD["total_len"]


class RecordStash:
    """Whole records by sequence number, back to back in segments of about ``SEGMENT`` bytes (each record's
    length is a multiple of ``ALIGN``, so every record in one starts aligned, as in a chunk).  Records are
    added in the trace's order; a fold that reads them in that order lets go of the segments it has passed
    (``forget_before``): at 1M records the stash of wedges' fold was 10 MB, held to the fold's end, its peak."""

    def __init__(self) -> None:
        self._open = bytearray()
        """The segment being filled."""
        self._segments: list[bytes | None] = []
        """The sealed segments (None: let go of)."""
        self._firsts = array("q")
        """The index in ``_seqs`` of each segment's first record."""
        self._seqs = array("q")
        self._starts = array("q")
        """Each record's offset in its segment."""
        self._sealed = False
        self._forgotten = 0
        """The segments before this one are let go of."""
        self._columns: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        """``_seqs``, ``_starts`` and ``_firsts`` as arrays, for ``find_all`` (made once the stash is sealed)."""

    def add(self, seq: int, view: memoryview | bytes, offset: int) -> None:
        """Keep the record at ``offset`` of ``view`` (a chunk's records, checked by the scan)."""
        assert not self._sealed, "a stash is read only once it is whole"
        if self._seqs and seq <= self._seqs[-1]:
            return  # a record seen again (a batch's carried enters): kept once
        if len(self._open) >= SEGMENT:
            self._seal()
        if not self._open:
            self._firsts.append(len(self._seqs))
        self._seqs.append(seq)
        self._starts.append(len(self._open))
        self._open += view[offset:offset + _TOTAL.get(view, offset)]

    def _seal(self) -> None:
        self._segments.append(bytes(self._open))  # exact, where the bytearray grew by more than it holds
        self._open = bytearray()

    def _seal_all(self) -> None:
        if not self._sealed:  # read only from now on
            if self._open:
                self._seal()
            self._sealed = True

    def find(self, seq: int) -> tuple[bytes, int] | None:
        """(buffer, offset) of record ``seq``; None when it was not kept (or was let go of)."""
        self._seal_all()
        at = bisect.bisect_left(self._seqs, seq)
        if at == len(self._seqs) or self._seqs[at] != seq:
            return None
        segment = self._segments[bisect.bisect_right(self._firsts, at) - 1]
        return None if segment is None else (segment, self._starts[at])

    def find_all(self, seqs: np.ndarray) -> tuple[list[bytes | None], np.ndarray, np.ndarray]:
        """``find`` of each of ``seqs`` at once: the segments, and for each record the index of its segment
        there (-1 where it was not kept, or was let go of) and its offset in it."""
        self._seal_all()
        if self._columns is None:
            self._columns = (np.frombuffer(self._seqs, dtype=np.int64).copy(),
                             np.frombuffer(self._starts, dtype=np.int64).copy(),
                             np.frombuffer(self._firsts, dtype=np.int64).copy())
        kept, starts, firsts = self._columns
        at = np.minimum(np.searchsorted(kept, seqs), max(len(kept) - 1, 0))
        found = (kept[at] == seqs) if len(kept) else np.zeros(len(seqs), dtype=bool)
        segment = np.searchsorted(firsts, at, side="right") - 1
        gone = np.array([k for k, data in enumerate(self._segments) if data is None], dtype=np.int64)
        found &= ~np.isin(segment, gone)
        return self._segments, np.where(found, segment, -1), np.where(found, starts[at] if len(kept) else 0, 0)

    def forget_before(self, seq: int) -> None:
        """Let go of the segments all of whose records come before record ``seq``: a fold at a call whose
        first record is ``seq`` reads none of them again (the calls after it start later).  A record asked
        for once let go of is read from the trace, as any the stash did not keep."""
        upto = bisect.bisect_right(self._firsts, bisect.bisect_left(self._seqs, seq)) - 1  # ``seq``'s segment
        for k in range(self._forgotten, min(upto, len(self._segments))):
            self._segments[k] = None
        self._forgotten = max(self._forgotten, upto)


SEGMENT = 1 << 20
"""Bytes of records a stash segment holds (a segment is let go of whole)."""


class Rereader:
    """The records the fold reads again: from the stash where it kept them, else from the trace."""

    def __init__(self, reader: TraceReader, stash: RecordStash | None) -> None:
        self.reader = reader
        self.stash = stash

    def locate(self, seq: int) -> tuple[bytes, int] | None:
        """(segment, offset) of record ``seq`` in the stash (``decode_record`` of it is the record), None
        where ``record_at`` reads the trace: a caller that holds it decodes it later, even should the stash
        let go of its segment meanwhile, and looks it up once."""
        return self.stash.find(seq) if self.stash is not None else None

    def record_at(self, seq: int) -> Record:
        found = self.stash.find(seq) if self.stash is not None else None
        if found is None:
            return self.reader.record_at(seq)
        return decode_record(*found)


def rereads(plan: Plan, roles: Roles, params: bool = False) -> Callable[[Records], np.ndarray]:
    """Which records of a batch's columns (``rmtrace.columns.scan``) the fold will read again: every
    record of an operation whose calls it decodes (``Need.RECORDS``); with ``params``, the exits of the
    calls whose params it reads (``params_exits``)."""
    from rmtrace.columns.fold import Need, op_need  # the fold's own rule (it imports the table, which imports this)

    by_op = KeyCache(lambda key: int(op_need(plan, roles, key >> 32, key & 0xFFFFFFFF) == Need.RECORDS))
    exits = params_exits(roles) if params else None

    def mask(recs: Records) -> np.ndarray:
        keys = (recs["source"].astype(np.uint64) << np.uint64(32)) | recs["op"].astype(np.uint64)
        found = by_op(keys) == 1
        return found if exits is None else found | exits(recs)
    return mask


def params_exits(roles: Roles) -> Callable[[Records], np.ndarray]:
    """Which records of a batch's columns are the exits of RM allocations of a channel or TSG, or of the
    controls the model reads: the records ``_EffectRows.params_value`` reads params from (a call's last
    record holds its params' AFTER copy).  By the key the record's own argument names: the class, the command."""
    from rmtrace.semantics.effects import PARAMS_CATEGORIES  # the semantic layer imports the table's modules

    allocs = [op for op, role in roles.escapes.items() if role is EscapeRole.ALLOC]
    controls = [op for op, role in roles.escapes.items() if role is EscapeRole.CONTROL]

    def wanted(key: int) -> int:
        op, value = key >> 32, key & 0xFFFFFFFF
        if op in allocs:
            return int(roles.category(value) in PARAMS_CATEGORIES)
        return int(op in controls and value in roles.controls)
    by_key = KeyCache(wanted)
    escapes = np.array(sorted(allocs + controls), dtype=np.uint32)

    def mask(recs: Records) -> np.ndarray:
        out = np.zeros(len(recs["op"]), dtype=bool)
        rows = np.flatnonzero((recs["source"] == Source.RM) & (recs["phase"] == Phase.EXIT)
                              & np.isin(recs["op"], escapes))
        if rows.size:
            key = np.where(recs["a_arg"][rows] >= 0, recs["a_key"][rows], recs["b_key"][rows]) & 0xFFFFFFFF
            out[rows] = by_key((recs["op"][rows].astype(np.uint64) << np.uint64(32)) | key.astype(np.uint64)) == 1
        return out
    return mask
