"""Which calls a view wants, chosen on the call table's columns before anything is decoded.

``rmtrace show`` used to pair and decode every call of a trace to print the
few its filters keep.  Here the header filters (pid, source, operation
number, time range) and the call filters the columns can answer (names by
glob, statuses, failures) become one boolean mask over the rows; only the
rows it keeps have their records read and decoded.  A filter the columns
cannot answer (handles inside buffers, phases of a call's records) is left
to the caller, which checks every call it prints against the whole filter
anyway: the mask only saves work, never decides alone.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterable, Iterator
from fnmatch import fnmatchcase

import numpy as np
from rmtrace.decoders import DecoderSet
from rmtrace.decoders.filters import CallFilter, status_number

from rmtrace.calls import Call
from rmtrace.columns.lines import ColumnLines, Lines
from rmtrace.columns.strings import Strings
from rmtrace.columns.table import STATES, CallTable
from rmtrace.record import Record
from rmtrace.trace import RecordFilter, TraceReader


def row_mask(table: CallTable, records: RecordFilter, wanted: CallFilter) -> np.ndarray:
    """The rows whose calls start in ``records``' time range and pass its header fields and ``wanted``'s
    names, statuses and failure (a call's records share its pid, source and operation number)."""
    c = table.columns
    keep = np.ones(len(table), dtype=bool)
    for column, values in (("source", records.source), ("pid", records.pid), ("op", records.op)):
        if values is not None:
            keep &= np.isin(c[column], list(values))
    if records.t0 is not None:
        keep &= c["t_enter"] >= records.t0
    if records.t1 is not None:
        keep &= c["t_enter"] <= records.t1
    if wanted.names:
        keep &= (np.isin(c["name"], _matching(table.names, wanted.names))
                 | np.isin(c["detail"], _matching(table.details, wanted.names)))
    if wanted.failed:
        keep &= c["ok"] == 0
    if wanted.statuses:
        numbers = [n for n in map(status_number, wanted.statuses) if n is not None]
        by_number = (c["has_status"] != 0) & np.isin(c["status"], numbers)
        keep &= np.isin(c["status_name"], _matching(table.status_names, wanted.statuses)) | by_number
    return keep


def _matching(strings: Strings[str], patterns: Iterable[str]) -> list[int]:
    """The ids of the strings a glob of ``patterns`` matches."""
    patterns = tuple(patterns)
    return [i for i, text in enumerate(strings.values) if any(fnmatchcase(text, p) for p in patterns)]


def selected_calls(reader: TraceReader, decoders: DecoderSet, table: CallTable, records: RecordFilter,
                   wanted: CallFilter, lines: ColumnLines | None = None) -> Iterator[Call | Lines]:
    """The calls of the rows ``row_mask`` keeps, records read from ``reader``, in order of their first
    record, as ``decoders.calls`` makes them from the records ``records`` lets through.  With ``lines``,
    the rows whose lines are made without their records come as those ``Lines`` (``rmtrace.columns.lines``;
    consecutive rows' together), and one whose call ``wanted`` turns down, as far as the columns or a memo
    tell, not at all.

    With a start time, a call that began before it and ended after is, as the records after the start
    pair on their own, the part of it after the start (its exit: a resumed call).
    """
    rows = np.flatnonzero(row_mask(table, records, wanted))
    if records.t0 is None:
        return _row_calls(reader, table, rows, lines, runs=True)
    c = table.columns
    ends_late = (c["exit_seq"] >= 0) & (c["t_exit"] >= records.t0)
    ends_late[list(table.members)] = True  # a GSP exchange in parts: its records say
    before = row_mask(table, _without_start(records), wanted) & (c["t_enter"] < records.t0)
    straddling = np.flatnonzero(before & ends_late)
    parts = sorted((seq, reader.record_at(seq)) for row in straddling.tolist()
                   for seq, t in table.records_of(row) if t >= records.t0)
    if not parts:
        return _row_calls(reader, table, rows, lines, runs=True)
    late = decoders.calls(rec for _, rec in parts)
    # a line at a time: a late call may come between any two
    return heapq.merge(_row_calls(reader, table, rows, lines, runs=False), late, key=_first_seq)


def _first_seq(call: Call | Lines) -> int:
    return call.first_seq if isinstance(call, Lines) else call.first.seq


def _without_start(records: RecordFilter) -> RecordFilter:
    return RecordFilter(records.source, records.phase, records.pid, records.op, None, records.t1, records.predicate)


def _row_calls(reader: TraceReader, table: CallTable, rows: np.ndarray,
               lines: ColumnLines | None, runs: bool) -> Iterator[Call | Lines]:
    """The calls of ``rows``; with ``lines``, a row's line made without its records instead, and with
    ``runs`` the lines of consecutive such rows as one ``Lines`` (a block's at most)."""
    # a row at a time through plain arrays: an element of a column mapped from the cache (np.memmap)
    # costs twice an ndarray's to read
    plain = dataclasses.replace(table, columns={name: np.asarray(table.columns[name]) for name in _RECORD_COLUMNS})
    state = plain.columns["state"].tolist()
    record: Callable[[int], Record] = reader.record_at
    for start, stop in blocks(len(rows)):
        block = rows[start:stop]
        made: list[str | bool] = lines.lines(block, lines.kinds(block)) if lines is not None else [True] * len(block)
        if runs and True not in made:  # all lines (the common case): the block's, in one Lines
            texts = [t for t in made if isinstance(t, str)]
            if texts:
                first_made = next(i for i, t in enumerate(made) if t is not False)
                yield Lines(int(plain.columns["enter_seq"][block[first_made]]), texts)
            continue
        run: list[str] = []
        first = 0
        for row, text, seq in zip(block.tolist(), made, plain.columns["enter_seq"][block].tolist()):
            if text is True:
                if run:
                    yield Lines(first, run)
                    run = []
                yield Call(tuple(record(seq) for seq, _ in plain.records_of(row)), STATES[state[row]])
            elif text is not False:
                if not run:
                    first = seq
                run.append(text)
                if not runs:
                    yield Lines(first, run)
                    run = []
        if run:
            yield Lines(first, run)


FIRST_ROWS, ROWS_AT_ONCE = 2048, 16_384
"""Rows taken together: numpy's cost per call, and a group's of alike lines (``ColumnLines``), paid per
block, a block's lines made at once.  Blocks grow from ``FIRST_ROWS`` to ``ROWS_AT_ONCE``, so that the
first lines come soon (``show | head``, ``--limit``) and the rest in blocks where that cost is small
(4x the rows of a block: a fifth less CPU for show of 1M records; peak RSS 133 -> 165 MB at 1M, a block's chunks at once)."""


def blocks(n: int) -> Iterator[tuple[int, int]]:
    """[start, stop) of each block of ``n`` rows: ``FIRST_ROWS``, then twice the last, up to ``ROWS_AT_ONCE``."""
    start, size = 0, FIRST_ROWS
    while start < n:
        yield start, min(start + size, n)
        start += size
        size = min(2 * size, ROWS_AT_ONCE)


_RECORD_COLUMNS = ("enter_seq", "t_enter", "exit_seq", "t_exit", "state")
"""What ``CallTable.records_of`` and a row's call state read."""
