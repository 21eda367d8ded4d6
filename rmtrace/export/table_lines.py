"""Each record of a trace, in file order, with its call's one-line summary: from the call table, a batch at a time.

pcapng gives every record a packet whose comment is its call's line as
``rmtrace show`` prints it.  Pairing the records into calls with the
decoders and decoding each call to print it costs more than the export's
budget; here the call table (``rmtrace.columns.cache.call_table``: built,
or loaded from the cache) says which records make each call, and show's
``ColumnLines`` makes most lines from its columns, without reading or
decoding the calls' records.  A call it cannot print (a GSP exchange in
parts, a sema message, a mark, a user's decoder) is read and decoded as
show decodes it.

Records come batch by batch (``TraceReader.read_chunks``, headers read in
place by ``rmtrace.columns.batch``): each batch's record bytes are views of
its buffer, valid until the next batch is read.  A call's rows are taken
when the batch holding its first record is, and the line of each of its
records kept by sequence number until that record comes: what is held is
the open calls' later records, as the decoders' pairing holds them.

Unlike the decoders' pairing, the table pairs a call's enter with its exit
however far apart they are (``rmtrace.columns.table``): in a trace where an
exit comes more than the pairing window after its enter, that call is one
complete call here, not an enter in flight and an exit alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from rmtrace.calls import Call
from rmtrace.columns.batch import BATCH_RECORDS, batches, read_headers
from rmtrace.columns.cache import call_table
from rmtrace.columns.lines import ColumnLines
from rmtrace.columns.table import STATES, CallTable
from rmtrace.decoders import Level, render
from rmtrace.decoders.filters import CallFilter
from rmtrace.export.source import ExportInput

ROWS_AT_ONCE = 4096
"""Calls whose lines are made together (numpy's cost per call paid per block)."""


class RecordLines(NamedTuple):
    """A batch of records in file order: each one's bytes as the file holds them, header fields, and line."""

    data: list[memoryview]
    source: list[int]
    time_ns: list[int]
    pid: list[int]
    tid: list[int]
    line: list[str]


class _RowLines:
    """The lines of the table's rows in order, and the line of each of their records until it is taken."""

    def __init__(self, src: ExportInput, table: CallTable) -> None:
        self.src = src
        self.table = table
        self.made = ColumnLines(src.decoders, table, src.reader, CallFilter(), src.start_ns, src.end_ns)
        self.first = np.asarray(table.columns["enter_seq"])
        self.next_row = 0
        self.pending: dict[int, str] = {}
        """seq -> its call's line, for records not yet taken."""

    def through(self, seq: int) -> dict[int, str]:
        """Lines for the records of every call whose first record is at or before ``seq``."""
        stop = self._stop(seq)
        for start in range(self.next_row, stop, ROWS_AT_ONCE):
            self._add(np.arange(start, min(start + ROWS_AT_ONCE, stop)))
        self.next_row = max(self.next_row, stop)
        return self.pending

    def _stop(self, seq: int) -> int:
        """The first row whose first record is after ``seq``, searched for from ``next_row`` on in a window
        that doubles: a search of the whole mapped column touched pages behind the rows already taken, which
        ``_add`` had let go and which stayed (40 MB of ``enter_seq`` at 10M rows); and the key is of the
        column's own type, since a Python int beside a uint64 column has numpy cast the whole column."""
        first, at, span = self.first, self.next_row, ROWS_AT_ONCE
        key = first.dtype.type(seq)
        while True:
            window = first[at:at + span]
            found = int(np.searchsorted(window, key, side="right"))
            if found < len(window) or at + span >= len(first):
                return at + found
            span *= 2

    def _add(self, rows: np.ndarray) -> None:
        texts = self._lines(rows)
        c = self.table.columns
        enter = c["enter_seq"][rows].astype(np.int64)
        exit_ = np.asarray(c["exit_seq"][rows])
        pending = self.pending
        pending.update(zip(enter.tolist(), texts))
        second = np.flatnonzero((exit_ >= 0) & (exit_ != enter))
        pending.update(zip(exit_[second].tolist(), [texts[i] for i in second.tolist()]))
        members = self.table.members
        if members:
            for i, row in enumerate(rows.tolist()):
                for seq, _t in members.get(row, ()):
                    pending[seq] = texts[i]
        self.table.release(int(rows[0]), int(rows[-1]) + 1)  # a pass over the table stays small

    def _lines(self, rows: np.ndarray) -> list[str]:
        """Each row's line: from the columns where ``ColumnLines`` can make it, else decoded from its records."""
        src, table = self.src, self.table
        made = self.made.lines(rows, self.made.kinds(rows))
        state = table.columns["state"]
        out = []
        for row, text in zip(rows.tolist(), made):
            if isinstance(text, bool):  # no filter turns a call down: True, the decoders make its line
                call = Call(tuple(src.reader.record_at(seq) for seq, _t in table.records_of(row)), STATES[state[row]])
                text = render.line(src.decoders.decode(call, Level.CALL), call, src.start_ns, src.end_ns)
            out.append(text)
        return out


def record_lines(src: ExportInput) -> Iterator[RecordLines]:
    """The trace's records in file order, a batch at a time, each with its call's line; a record of no
    call (the table makes a row of every record, so none) is left out.  Records are counted on
    ``src.progress``."""
    reader = src.reader
    rows = _RowLines(src, call_table(reader, src.decoders))
    room: bytearray | None = None
    for indices in batches(reader.chunks, 0, BATCH_RECORDS):
        room, spans = reader.read_chunks(indices, room)
        headers = read_headers(room, spans)
        n = len(headers.off)
        if not n:
            continue
        end = headers.end
        head = headers.head
        seqs = head["seq"].tolist()
        lines = rows.through(max(seqs))
        view = memoryview(room)
        out = RecordLines([], [], [], [], [], [])
        for seq, start, stop, source, time_ns, pid, tid in zip(
                seqs, headers.off.tolist(), end.tolist(), head["source"].tolist(), head["time_ns"].tolist(),
                head["pid"].tolist(), head["tid"].tolist()):
            text = lines.pop(seq, None)
            if text is None:
                continue
            out.data.append(view[start:stop])
            out.source.append(source)
            out.time_ns.append(time_ns)
            out.pid.append(pid)
            out.tid.append(tid)
            out.line.append(text)
        src.progress.add(n)
        yield out
