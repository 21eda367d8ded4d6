"""Show's lines, a block of calls at a time, made from the call table with as little per call as can be.

``rmtrace show`` prints a call as ``render.line`` does: who and when, the
name, the summary arguments, the detail, the status and the time taken.
For an ioctl the table reads at fixed offsets (``argspec.Kind.IOCTL``) every
piece of that line but the summary arguments is a column: pid, tid, the
times, the call's state, the name and detail, the status name; and so are
the summary's handles.  So:

* a call whose summary is its handles (RM_ALLOC, RM_FREE) is printed from the
  columns alone (``FROM_COLUMNS``), its records never read;
* a call whose summary also holds numbers at fixed offsets (RM_CONTROL's
  flags, RM_MAP_MEMORY's offset and length, UVM_FREE's range) has them read
  from its argument's bytes where they lie in their chunk, for a whole block
  of calls at once (``FROM_ARGUMENT``, ``rmtrace.columns.summary``): no
  record is read, nothing is parsed;
* a call the decoders must decode (system calls, UVM commands with arrays and
  uuids) whose decoder reads nothing but its records' bytes (``memokey.MEMO_OPS``)
  has its summary, status and notes kept in a bounded memo keyed by a hash
  of those bytes (``SummaryMemo``): a program makes the same calls again and
  again, and a call made again is printed without decoding its records.

Each line is put together by ``render.line_text`` from the same pieces
``render.line`` uses.  Everything else (GSP and sema messages, marks, users'
decoders) is decoded by the caller as before.  ``tests/test_show_columns.py``
checks that both make the same line for every call of every shipped capture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, repeat
from string import Formatter
from typing import Any, NamedTuple

import numpy as np
from rmtrace.decoders import Decoded, DecoderSet, Label, Level
from rmtrace.decoders.filters import CallFilter
from rmtrace.decoders.ioctl import IoctlOp, in_summary
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES
from rmtrace.decoders.render import format_arg, line, line_text, summary, summary_text
from rmtrace.decoders.rm import NamedByArg
from rmtrace.decoders.structs import SIGNED_KINDS

from rmtrace.calls import Call, CallState
from rmtrace.columns.argspec import ArgLayout, Kind, Plan, members
from rmtrace.columns.arrays import group_rows
from rmtrace.columns.memokey import memoizable
from rmtrace.columns.scan import KeyCache
from rmtrace.columns.summary import SIDES, Block, BlockReader
from rmtrace.columns.table import STATES, CallTable
from rmtrace.columns.timetexts import DurationTexts, offset_texts
from rmtrace.columns.view import is_scalar
from rmtrace.layout import Field
from rmtrace.lru import BoundedLRU
from rmtrace.record import BufferFlag, Phase, Record
from rmtrace.timefmt import format_duration, format_offset
from rmtrace.trace import TraceReader

PRINTED_STATES = (CallState.COMPLETE, CallState.IN_FLIGHT, CallState.RESUMED)
"""The states of calls printed from the columns: an enter and its exit, an enter alone, an exit alone
(whose first record is then the exit).  A record that stands alone (``SINGLE``) is no ioctl call."""
_PRINTED = np.array([STATES.index(s) for s in PRINTED_STATES], dtype=np.uint8)
_COMPLETE, _RESUMED = STATES.index(CallState.COMPLETE), STATES.index(CallState.RESUMED)
_UNREADABLE = int(BufferFlag.UNREADABLE)

FROM_COLUMNS, FROM_ARGUMENT, MEMO = 1, 2, 3
"""How a row's line is made: from the columns alone (its summary is its handles), with the other members of
its summary read from its argument's bytes (a control's flags, a mapping's offset and length), or from the
memo of decoded summaries (0: the caller decodes it)."""

MEMO_KEPT = 1 << 16
"""Summaries the memo keeps (the most recently used; a call-level decode is small, and so is its key, an
id of its records' bytes).  The shipped capture of three CUDA clients has ~2,600 distinct decoded calls."""

Member = tuple[str, Field | None, int]
"""A summary member: (name, None, 0) for a handle, (name, member, offset) for a number at a fixed offset."""


class Lines(NamedTuple):
    """The lines of consecutive calls, made without their records (or from summaries decoded before), in
    place of those calls."""

    first_seq: int
    """The first record of the first call."""
    texts: list[str]


class Kept(NamedTuple):
    """What the memo keeps of a call decoded once: all its line is made of but who, when and how long."""

    decoded: Decoded
    """Its call-level decode."""
    body: str
    """Its summary (``render.summary``)."""
    head: Callable[..., str] | None
    """Its line of (pid, tid, offset text, summary, duration text) (``_LineTemplate``), None when it has none
    (``line_text`` makes it)."""
    wanted: bool
    """Whether the call filter wants it."""


MemoKey = int | tuple[int, int]
"""What the memo keys a call by: the id of its state and its records' bytes (``Block.content_ids``)."""


class SummaryMemo(BoundedLRU[MemoKey, Kept]):
    """Call-level decodes of calls (and their summaries and lines) by the id of their state and their
    records' bytes (``Block.content_ids``), bounded in entries (``rmtrace.lru``; a key is a number or two,
    so the bytes the memo holds go with its entries)."""

    def __init__(self, kept: int = MEMO_KEPT) -> None:
        super().__init__(kept, None)

    def keep(self, key: MemoKey, kept: Kept) -> None:
        """Keep ``kept`` for ``key``."""
        self.put(key, kept, 0)


class ColumnLines:
    """Which rows of ``table`` print without their records, and their lines."""

    def __init__(self, decoders: DecoderSet, table: CallTable, reader: TraceReader, wanted: CallFilter,
                 start_ns: int, end_ns: int | None) -> None:
        self.decoders = decoders
        self.table = table
        self.reader = reader
        self.wanted = wanted
        self.start_ns, self.end_ns = start_ns, end_ns
        self.plan = Plan(decoders)
        self.blocks = BlockReader(reader)
        self.memo = SummaryMemo()
        self._kinds = KeyCache(self._op_kind)
        self._memo_ops = KeyCache(self._op_memo)
        self._named: dict[int, bool] = {}
        self._summaries: list[tuple[Member, ...]] = []
        self._summary_ids: dict[tuple[Member, ...], int] = {}
        self._sides = KeyCache(self._side_summary)
        self._templates: dict[tuple[int, int, int, int, int], _Template | None] = {}
        self._filtered = bool(wanted.names or wanted.statuses or wanted.failed or wanted.handles)
        # the lines (_LineTemplate, _compiled) of memo rows by (name, status, notes, state, phase)
        self._memo_heads: dict[tuple[str, str | None, tuple[str, ...], int, int], Callable[..., str] | None] = {}
        self._durations = DurationTexts()
        c = table.columns
        self._cols = {name: np.asarray(c[name]) for name in _LINE_COLUMNS}

    def kinds(self, rows: np.ndarray) -> np.ndarray:
        """How each of ``rows`` prints: ``FROM_COLUMNS``, ``FROM_ARGUMENT``, ``MEMO`` or 0 (the caller
        decodes it).  A row prints from the columns when its operation's summary is members at fixed
        offsets and its argument was decoded (the row has handles, as the decode reads them); from the
        memo when its decoder is one of ``memokey.MEMO_OPS`` and its records are its first and its exit."""
        c = self._cols
        key = (c["source"][rows].astype(np.uint64) << np.uint64(32)) | c["op"][rows].astype(np.uint64)
        decoded = (c["handles"][rows] >= 0) & np.isin(c["state"][rows], _PRINTED)
        out = np.where(decoded, self._kinds(key), 0)
        out = np.where(out == 0, self._memo_ops(key), out)
        if self.table.members:
            out[np.isin(rows, list(self.table.members))] = 0  # a GSP exchange in parts: decoded as before
        return out

    def lines(self, rows: np.ndarray, kinds: np.ndarray) -> list[str | bool]:
        """Per row of ``rows`` (a block, with their ``kinds``): its line; False when the call filter does
        not want it; True when the caller must decode it."""
        out: list[str | bool] = [True] * len(rows)
        made = np.flatnonzero((kinds == FROM_COLUMNS) | (kinds == FROM_ARGUMENT))
        memo = np.flatnonzero(kinds == MEMO)
        # the records of the rows read from their argument and of the memo rows: one block for both
        argument = made[kinds[made] == FROM_ARGUMENT]
        read = np.concatenate([argument, memo])
        calls = self._calls_records(rows[read]) if read.size else None
        if made.size:
            self._column_lines(rows, kinds, made, out, _part(calls, 0, len(argument)))
        if memo.size:
            self._memo_lines(rows[memo], memo, out, _part(calls, len(argument), len(read)))
        return out

    # -- from the columns and the argument

    def _column_lines(self, rows: np.ndarray, kinds: np.ndarray, made: np.ndarray, out: list[str | bool],
                      calls: tuple[Block, np.ndarray] | None) -> None:
        """The lines of the ``FROM_COLUMNS`` and ``FROM_ARGUMENT`` rows ``made`` of ``rows``: the rows grouped
        (numpy) by what their line's template depends on (operation, name, detail, handle set, summary,
        status, state), so that a template is looked up once per group and its lines filled from columns;
        ``calls``: the records of the ``FROM_ARGUMENT`` ones (``_calls_records``)."""
        block = rows[made]
        cols = self._cols
        c = {name: cols[name][block] for name in _LINE_COLUMNS if name != "exit_seq"}
        extra = self.table.extra_handles
        sids, argument = self._argument_values(block, kinds[made] == FROM_ARGUMENT, calls)
        op_key = (c["source"].astype(np.int64) << 32) | c["op"].astype(np.int64)
        group_of = (op_key, c["name"], c["detail"], c["handles"], sids, c["status_name"], c["state"])
        order, bounds = group_rows(group_of, stable=True)
        # the rows in group order, so that a group's values are a slice of each list
        pids, tids = c["pid"][order].tolist(), c["tid"][order].tolist()
        offsets, durations = self._times(block[order])
        places = made[order].tolist()
        handle_cols = [c[name] for name in _HANDLE_COLUMNS]
        is_extra = np.isin(block, list(extra)) if extra else np.zeros(len(block), dtype=bool)
        templates, filtered = self._templates, self._filtered
        firsts = order[bounds[:-1]]
        for g, (op, name_id, detail_id, hset, sid, status_id, state) in enumerate(
                zip(*(np.asarray(k)[firsts].tolist() for k in group_of))):
            if sid == -2:
                continue  # no copy of its argument decodes: the decoders say what it is
            key = (op, name_id, detail_id, hset, sid)
            template = templates.get(key)
            if template is None:
                template = templates[key] = self._template(key)
            if template is None:
                continue  # the decoders decide
            lo, hi = int(bounds[g]), int(bounds[g + 1])
            at = order[lo:hi]
            slots = [handle_cols[p][at] if p >= 0 else argument[sid][k][at] for k, p in enumerate(template.handle_at)]
            mine = slice(lo, hi)
            aside = np.flatnonzero(is_extra[at]) if not filtered else np.arange(len(at))
            group: list[list[Any]] = [places[mine], pids[mine], tids[mine], offsets[mine], durations[mine]]
            if aside.size:  # more handles than the handle columns hold (summary_text), or a filter to ask
                keep = np.ones(len(at), dtype=bool)
                for j in aside.tolist():
                    i = int(at[j])
                    row = int(block[i])
                    if row in extra:
                        out[int(made[i])] = self._line_of(_row(c, i), extra[row], sid, [int(s[j]) for s in slots])
                        keep[j] = False
                    elif not self._wants(_row(c, i), template.handles_of([int(h[i]) for h in handle_cols])):
                        out[int(made[i])] = False
                        keep[j] = False
                at, slots = at[keep], [s[keep] for s in slots]
                if not at.size:
                    continue
                kept = keep.tolist()
                group = [list(compress(values, kept)) for values in group]
            line_key = status_id << 8 | state
            if line_key not in template.lines:
                template.lines[line_key] = self._line_template(template, status_id, state)
            fill = template.lines[line_key]
            if fill is None:
                self._texts_of(template, c, at, slots, status_id, state, group[0], out)
                continue
            texts = [template.slot_texts(k, s) for k, s in enumerate(slots)]
            where, pid, tid, offset, duration = group
            for place, text in zip(where, map(fill, pid, tid, offset, repeat(""), duration, *texts)):
                out[place] = text

    def _texts_of(self, template: _Template, c: dict[str, np.ndarray], at: np.ndarray, slots: list[np.ndarray],
                  status_id: int, state: int, places: list[int], out: list[str | bool]) -> None:
        """The lines of rows ``at`` of a group without a line template (``line_text`` makes them)."""
        status = self.table.status_names.values[status_id] if status_id >= 0 else None
        phase = Phase.EXIT if state == _RESUMED else Phase.ENTER
        columns = zip(c["pid"][at].tolist(), c["tid"][at].tolist(), c["t_enter"][at].tolist(), c["t_exit"][at].tolist())
        rows_values = zip(*[s.tolist() for s in slots]) if slots else repeat(())
        for place, (pid, tid, first_ns, last_ns), values in zip(places, columns, rows_values):
            duration = last_ns - first_ns if state == _COMPLETE else None
            out[place] = line_text(template.name, template.body(values), status, (), pid, tid, first_ns, phase,
                                   STATES[state], duration, self.start_ns, self.end_ns)

    def _line_template(self, template: _Template, status_id: int, state: int) -> Callable[..., str] | None:
        """The ``format`` of the lines of ``template``'s calls with status ``status_id`` in ``state``: the
        line template (``_LineTemplate``) with the summary template in place of its summary (arguments:
        pid, tid, offset text, "", duration text, then the text of each member's value); None when there
        is none (``line_text`` makes those lines)."""
        status = self.table.status_names.values[status_id] if status_id >= 0 else None
        head = _LineTemplate.of(template.name, status, (), STATES[state], Phase.EXIT if state == _RESUMED else Phase.ENTER)
        return None if head is None else template.line(head)

    def _times(self, rows: np.ndarray) -> tuple[list[str], list[str]]:
        """Per row of ``rows``: its offset from the trace's start and (a row of a complete call) its duration,
        as ``render.line_text`` prints them (``format_offset``, ``format_duration``: ``rmtrace.columns.timetexts``
        makes the same texts a block at a time)."""
        c = self._cols
        first = c["t_enter"][rows]
        complete = c["state"][rows] == _COMPLETE
        return offset_texts(first - self.start_ns), self._durations(c["t_exit"][rows] - first, complete)

    def _template(self, key: tuple[int, int, int, int, int]) -> _Template | None:
        """The summary template of rows of ``key`` (see ``_column_lines``); None when a member the summary
        shows as a handle is not among the row's handles (the decoders decide)."""
        op_key, name_id, detail_id, hset, sid = key
        handle_names = self.table.handle_sets.values[hset]
        members_ = tuple((n, None, 0) for n in handle_names) if sid < 0 else self._summaries[sid]
        if any(f is None and n not in handle_names for n, f, _ in members_):
            return None
        detail = self.table.details.values[detail_id] if detail_id >= 0 else None
        payload = detail is not None and self._named[op_key]
        template = _Template(self.table.names.values[name_id], detail, payload, handle_names, members_)
        return template if template.text is not None else None

    def _line_of(self, r: dict[str, int], handles: dict[str, int], sid: int, values: Sequence[int]) -> str | bool:
        """The line of column row ``r`` (``_row``) whose handles are ``handles`` (more than the handle columns
        hold), its summary put together by ``summary_text`` (``sid`` >= 0: its ``FROM_ARGUMENT`` members'
        summary, whose numbers are in ``values``)."""
        args: dict[str, object] = dict(handles)
        if sid >= 0:
            members_ = self._summaries[sid]
            args = {name: handles[name] if f is None else v for (name, f, _), v in zip(members_, values)}
        name = self.table.names.values[r["name"]]
        detail = self.table.details.values[r["detail"]] if r["detail"] >= 0 else None
        status_name = self.table.status_names.values[r["status_name"]] if r["status_name"] >= 0 else None
        if self._filtered and not self._wants(r, handles):
            return False
        state = r["state"]
        body = summary_text(name, args, handles, detail, detail is not None and self._named[r["source"] << 32 | r["op"]])
        duration = r["t_exit"] - r["t_enter"] if state == _COMPLETE else None
        return line_text(name, body, status_name, (), r["pid"], r["tid"], r["t_enter"],
                         Phase.EXIT if state == _RESUMED else Phase.ENTER, STATES[state], duration,
                         self.start_ns, self.end_ns)

    def _wants(self, r: dict[str, int], handles: dict[str, int]) -> bool:
        """Whether the call filter wants the call of column row ``r`` (``_row``; the call level's decode of it
        is what the columns say: the row mask chose on the same columns, but does not decide alone)."""
        name = self.table.names.values[r["name"]]
        detail = self.table.details.values[r["detail"]] if r["detail"] >= 0 else None
        if not self.wanted.wants_label(Label(name, detail)):
            return False
        ok, status_id = r["ok"], r["status_name"]
        decoded = Decoded(r["source"], r["op"], name, detail, status=r["status"] if r["has_status"] else None,
                          status_name=self.table.status_names.values[status_id] if status_id >= 0 else None,
                          ok=None if ok < 0 else bool(ok), handles=handles, level=Level.CALL)
        return self.wanted.wants(decoded)

    def _calls_records(self, rows: np.ndarray) -> tuple[Block, np.ndarray]:
        """The records of the calls of ``rows``: a block of their enter records, then the exits of those that
        have one of their own; and of each row, its exit's index in the block (-1: none)."""
        col = self._cols
        enter = col["enter_seq"][rows].astype(np.int64)
        exit_ = col["exit_seq"][rows]
        has_exit = (exit_ >= 0) & (exit_ != enter)
        records = self.blocks.block(np.concatenate([enter, exit_[has_exit]]))
        second = np.full(len(rows), -1, dtype=np.int64)
        second[has_exit] = np.arange(len(rows), len(records.at))
        return records, second

    def _argument_values(self, block: np.ndarray, arg_rows: np.ndarray, calls: tuple[Block, np.ndarray] | None
                         ) -> tuple[np.ndarray, dict[int, list[np.ndarray]]]:
        """Per row of ``block``: the id of its summary's members (``_summaries``) when it is a
        ``FROM_ARGUMENT`` row (``arg_rows``; ``calls``: their records, ``_calls_records``), read from the
        copy of the argument the decode takes (``IoctlOp.decode``): the one read after the call when the
        call returned and it decodes, else the first that decodes; -2 when neither does (the decoders
        decide); -1 for the other rows.  And by summary id, a column per member (the length of
        ``block``): a number's value in the rows of that summary (a handle's column is unused: the handle
        columns hold it).
        """
        ids_of = np.full(len(block), -1, dtype=np.int64)
        values_of: dict[int, list[np.ndarray]] = {}
        at = np.flatnonzero(arg_rows)
        if not at.size:
            return ids_of, values_of
        assert calls is not None  # the caller reads the records of every FROM_ARGUMENT row
        rows = block[at]
        n = len(rows)
        records, second = calls
        found = records.arg_sides()
        # the call's exit (split_call: its first record of phase EXIT), and whether the call returned
        phase, ret, err = records.header("phase"), records.header("ret"), records.header("err")
        mine = np.arange(n)
        closing = np.where(phase[mine] == Phase.EXIT, mine, np.where((second >= 0), second, -1))
        closing[(closing >= 0) & (phase[np.maximum(closing, 0)] != Phase.EXIT)] = -1
        shut = np.maximum(closing, 0)
        returned = (closing >= 0) & (ret[shut] >= 0) & (err[shut] == 0)
        source, op = self._cols["source"][rows].astype(np.uint64), self._cols["op"][rows].astype(np.uint64)
        sides: list[tuple[np.ndarray, np.ndarray]] = []  # per side: summary id, data start
        for side in range(len(SIDES)):
            start, length, flags = found.start[side], found.length[side], found.flags[side]
            # the side's first buffer in the call's records, as arg_buffer finds it: the first record's, else
            # the exit's
            pick = mine.copy()
            later = (start[pick] < 0) & (second >= 0)
            pick[later] = second[later]
            unreadable = (flags[pick] & _UNREADABLE) != 0
            key = ((source << np.uint64(60)) | (unreadable.astype(np.uint64) << np.uint64(59))
                   | (op << np.uint64(27)) | np.minimum(length[pick], (1 << 27) - 1).astype(np.uint64))
            ids = np.where(start[pick] >= 0, self._sides(key), -1)
            sides.append((ids, start[pick]))
        (b_ids, b_start), (a_ids, a_start) = sides
        after = (a_ids >= 0) & (returned | (b_ids < 0))
        ids = np.where(after, a_ids, b_ids)
        start = np.where(after, a_start, b_start)
        for sid in np.unique(ids[ids >= 0]).tolist():
            chosen = np.flatnonzero(ids == sid)
            columns = values_of[sid] = []
            for _, f, offset in self._summaries[sid]:
                column = np.zeros(len(block), dtype=np.int64 if f is None else _dtype(f))
                if f is not None:
                    column[at[chosen]] = records.read(start[chosen] + offset, _dtype(f))
                columns.append(column)
        ids_of[at] = np.where(ids >= 0, ids, -2)
        return ids_of, values_of

    def _side_summary(self, key: int) -> int:
        """The id of the summary members of an argument buffer by its packed (source, unreadable, op, length);
        -1 when it would not decode."""
        source, unreadable, op, length = key >> 60, (key >> 59) & 1, (key >> 27) & 0xFFFFFFFF, key & ((1 << 27) - 1)
        plan = self.plan.op(source, op)
        arg = plan.arg(length) if not unreadable and isinstance(plan.op, IoctlOp) else None
        members_ = summary_members(plan.op, arg) if arg is not None else None
        if members_ is None:
            return -1
        found = self._summary_ids.get(members_)
        if found is None:
            found = self._summary_ids[members_] = len(self._summaries)
            self._summaries.append(members_)
        return found

    def _op_kind(self, key: int) -> int:
        plan = self.plan.op(key >> 32, key & 0xFFFFFFFF)
        decoder = plan.op
        self._named[key] = isinstance(decoder, NamedByArg)  # describe() marks its detail a payload
        if plan.kind != Kind.IOCTL or not isinstance(decoder, IoctlOp):
            return 0
        summaries = [summary_members(decoder, a) for a in (*plan.arg_layouts.values(), plan.default) if a is not None]
        if any(s is None for s in summaries):
            return 0
        return FROM_COLUMNS if all(f is None for s in summaries for _, f, _ in s or ()) else FROM_ARGUMENT

    def _op_memo(self, key: int) -> int:
        return MEMO if memoizable(self.plan.op(key >> 32, key & 0xFFFFFFFF).op) else 0

    # -- from the memo

    def _memo_lines(self, rows: np.ndarray, at: np.ndarray, out: list[str | bool],
                    calls: tuple[Block, np.ndarray] | None) -> None:
        col = self._cols
        assert calls is not None  # the caller reads the records of every memo row
        block, second = calls
        states = col["state"][rows]
        keys = block.content_ids(np.arange(len(rows)), second, states)
        phases = block.header("phase")[:len(rows)].tolist()
        pids, tids = col["pid"][rows].tolist(), col["tid"][rows].tolist()
        offsets, durations = self._times(rows)
        get = self.memo.get
        for i, (k, key) in enumerate(zip(at.tolist(), keys)):
            kept = get(key)
            if kept is None:
                out[k] = self._first_line(key, int(rows[i]), int(second[i]) >= 0, phases[i])
            elif not kept.wanted:
                out[k] = False
            elif kept.head is not None:
                out[k] = kept.head(pids[i], tids[i], offsets[i], kept.body, durations[i])
            else:
                row, d, state = int(rows[i]), kept.decoded, int(states[i])
                first_ns = int(col["t_enter"][row])
                duration = int(col["t_exit"][row]) - first_ns if state == _COMPLETE else None
                out[k] = line_text(d.name, kept.body, d.status_name, d.notes, pids[i], tids[i], first_ns, phases[i],
                                   STATES[state], duration, self.start_ns, self.end_ns)

    def _first_line(self, key: MemoKey, row: int, has_exit: bool, phase: int) -> str | bool:
        """The line of memo row ``row`` whose call (of ``key``) the memo does not hold: decoded, then kept."""
        col = self._cols
        state = STATES[int(col["state"][row])]
        call = self._call(int(col["enter_seq"][row]), int(col["exit_seq"][row]) if has_exit else -1, state)
        d = self.decoders.decode(call, Level.CALL)
        wanted = self.wanted.wants_label(Label(d.name, d.detail)) and self.wanted.wants(d)
        head_key = (d.name, d.status_name, tuple(d.notes), int(col["state"][row]), phase)
        if head_key not in self._memo_heads:
            head = _LineTemplate.of(d.name, d.status_name, d.notes, state, phase)
            self._memo_heads[head_key] = None if head is None else _compiled(head, 5)
        self.memo.keep(key, Kept(d, summary(d), self._memo_heads[head_key], wanted))
        return line(d, call, self.start_ns, self.end_ns) if wanted else False

    def _call(self, first: int, exit_seq: int, state: CallState) -> Call:
        record = self.reader.record_at
        records: tuple[Record, ...] = (record(first),) if exit_seq < 0 else (record(first), record(exit_seq))
        return Call(records, state)


class _LineTemplate:
    """``render.line_text``'s line of calls alike but for who made them, when, their summary and their
    duration: made once by ``line_text`` itself around probe values, a ``str.format`` string that
    ``_compiled`` turns into one function (one call per line in place of line_text's and its pieces').
    A state whose line holds a time other than the offset and the duration (a call in flight) has none."""

    PROBES = ((900000001, 900000002, 777_777_777_777, "\0", 555_555_555_555),
              (800000003, 800000004, 666_666_666_666, "\1", 444_444_444_444))
    """(pid, tid, offset, summary, duration): two sets, so that a template is checked against a second line."""

    @classmethod
    def of(cls, name: str, status_name: str | None, notes: Sequence[str], state: CallState,
           phase: int) -> str | None:
        """The template, a ``str.format`` string of (pid, tid, offset text, summary, duration text), or None."""
        if state is CallState.IN_FLIGHT:
            return None  # its outcome says since when and for how long at the end
        lines = [(probe, line_text(name, probe[3], status_name, notes, probe[0], probe[1], probe[2], phase, state,
                                   probe[4] if state is CallState.COMPLETE else None, 0))
                 for probe in cls.PROBES]
        probe, text = lines[0]
        pieces = (str(probe[0]), str(probe[1]), format_offset(probe[2]), probe[3], format_duration(probe[4]))
        text = text.replace("{", "{{").replace("}", "}}")
        for i, piece in enumerate(pieces):
            if text.count(piece) > 1:
                return None  # a constant part holds a probe's text
            text = text.replace(piece, f"{{{i}}}")
        for probe, made in lines:
            if text.format(str(probe[0]), str(probe[1]), format_offset(probe[2]), probe[3],
                           format_duration(probe[4])) != made:
                return None
        return text


class _Slot:
    """Where an argument's value goes in a summary template: ``format_arg`` prints it as ``str`` does."""

    def __str__(self) -> str:
        return _SLOT_TEXT


_SLOT_TEXT = "\0"
TEXTS_KEPT = 4096
"""Texts of values a template's slot keeps (the most recent are not tracked: a full slot starts again)."""


class _Template:
    """A summary's constant parts (``NAME(hClient=``, ``, flags=``, ``, DETAIL{…})``), put together once by
    ``render.summary_text`` around slots, and the text of each value each slot has held: ``format_arg``
    of a number depends on nothing but the member's name, whether it is a handle, and the value."""

    def __init__(self, name: str, detail: str | None, payload: bool, handle_names: tuple[str, ...],
                 members_: tuple[Member, ...]) -> None:
        self.name = name
        self.handle_names = handle_names
        self.handle_at = tuple(handle_names.index(n) if f is None else -1 for n, f, _ in members_)
        """Per member: the index of its handle among the row's (-1: a number of the argument)."""
        self._names = [n for n, _, _ in members_]
        self._handles = dict.fromkeys(handle_names, 0)  # format_arg asks only whether a name is a handle
        pieces = summary_text(name, dict.fromkeys(self._names, _Slot()), self._handles, detail, payload).split(_SLOT_TEXT)
        # None when a constant part holds the slot's text itself
        self.pieces = pieces
        self.text = self._fields(0) if len(pieces) == len(self._names) + 1 else None
        """A ``str.format`` string of the summary: the text of each member's value in order."""
        self.texts: list[dict[int, str]] = [{} for _ in self._names]
        """Per slot: the text of each value it has held."""
        self.lines: dict[int, Callable[..., str] | None] = {}
        """``line`` of the line template of each (status id << 8 | state) of this summary's calls."""

    def handles_of(self, values: Sequence[int]) -> dict[str, int]:
        return dict(zip(self.handle_names, values))

    def learn(self, values: Sequence[int]) -> None:
        """Keep the text of each of ``values`` (in the summary's order) its slot has not held."""
        for slot, v in enumerate(values):
            if slot < len(self.texts) and v not in self.texts[slot]:
                self._learn_one(slot, v)

    def slot_texts(self, slot: int, values: np.ndarray) -> list[str]:
        """The text of each of ``values`` (numbers slot ``slot`` shows), from those kept (``learn``); a
        value not kept yet is formatted and kept."""
        t = self.texts[slot]
        numbers = values.tolist()
        try:
            return list(map(t.__getitem__, numbers))
        except KeyError:
            return [t[v] if v in t else self._learn_one(slot, v) for v in numbers]

    def _learn_one(self, slot: int, v: int) -> str:
        t = self.texts[slot]
        if len(t) >= TEXTS_KEPT:
            t.clear()
        text = t[v] = format_arg(self._names[slot], v, self._handles)
        return text

    def body(self, values: Sequence[int]) -> str:
        """The summary of a call whose members (in the summary's order) have ``values``."""
        self.learn(values)
        assert self.text is not None  # a template without text is never kept
        return self.text.format(*[t[v] for t, v in zip(self.texts, values)])

    def _fields(self, first: int) -> str:
        """The summary as a ``str.format`` string, its constant parts escaped and slot k field ``first + k``."""
        return "".join(p.replace("{", "{{").replace("}", "}}") + (f"{{{first + k}}}" if k < len(self._names) else "")
                       for k, p in enumerate(self.pieces))

    def line(self, head: str) -> Callable[..., str] | None:
        """The ``format`` of line template ``head`` (``_LineTemplate.of``) with this summary's pieces in place
        of its summary ({3}), each slot a field from {5} on; None when the two do not fit together."""
        assert self.text is not None  # a template without text is never kept
        fields = self._fields(5)
        if head.count("{3}") > 1:
            return None
        text = head.replace("{3}", fields)
        probes = [f"\2{k}" for k in range(len(self._names))]
        pieces = (str(_LineTemplate.PROBES[0][0]), str(_LineTemplate.PROBES[0][1]), "\3", "\4")
        made = head.format(pieces[0], pieces[1], pieces[2], self.text.format(*probes), pieces[3])
        if text.format(pieces[0], pieces[1], pieces[2], "", pieces[3], *probes) != made:
            return None
        return _compiled(text, 5 + len(self._names))


_LINE_COLUMNS = ("enter_seq", "exit_seq", "t_enter", "t_exit", "state", "pid", "tid", "source", "op", "name",
                 "detail", "status_name", "status", "has_status", "ok", "handles",
                 "h0", "h1", "h2", "h3", "h4", "h5")
"""What a line made from the columns reads."""
_HANDLE_COLUMNS = ("h0", "h1", "h2", "h3", "h4", "h5")


def _part(calls: tuple[Block, np.ndarray] | None, start: int, end: int) -> tuple[Block, np.ndarray] | None:
    """Of the records of some calls (``ColumnLines._calls_records``), those of calls ``start`` to ``end``,
    as ``_calls_records`` of those calls alone makes them (in the same bytes)."""
    if calls is None or start == end:
        return None
    records, second = calls
    mine = second[start:end]
    has_exit = mine >= 0
    n = end - start
    exits = np.full(n, -1, dtype=np.int64)
    exits[has_exit] = np.arange(n, n + int(has_exit.sum()))
    return records.take(np.concatenate([np.arange(start, end), mine[has_exit]])), exits


def _compiled(template: str, arity: int) -> Callable[..., str]:
    """``template.format`` of ``arity`` arguments (its fields are positional, without conversions or specs) as
    a function whose body is one f-string of the template's constant parts and its arguments: str.format
    parses its template on every call, which costs as much as the rest of a line (namedtuple and dataclasses
    make their methods the same way)."""
    source = []
    for literal, field, spec, conversion in Formatter().parse(template):
        if literal:  # a str literal's repr is valid source; braces doubled, it is an f-string's constant part
            source.append("f" + repr(literal).replace("{", "{{").replace("}", "}}"))
        if field is not None:
            if spec or conversion or not field.isdigit() or int(field) >= arity:
                raise ValueError(f"not a template of {arity} positional fields: {template!r}")
            source.append(f"f'{{a{field}}}'")
    arguments = ", ".join(f"a{k}" for k in range(arity))
    namespace: dict[str, Callable[..., str]] = {}
    exec(f"def line({arguments}):\n    return {' '.join(source) or repr('')}\n", namespace)
    return namespace["line"]


def _row(c: dict[str, np.ndarray], i: int) -> dict[str, int]:
    """Row ``i`` of columns ``c``, as Python numbers."""
    return {name: int(column[i]) for name, column in c.items()}


def _dtype(f: Field) -> np.dtype:
    """The numpy type of member ``f`` (``view.is_scalar``), as ``view.scalar_codec`` reads it."""
    return np.dtype(f"<{'i' if f.kind in SIGNED_KINDS else 'u'}{f.size}")


def summary_members(decoder: IoctlOp, arg: ArgLayout) -> tuple[Member, ...] | None:
    """The members ``ioctl.summary_args`` shows (``ioctl.in_summary``) of layout ``arg``, in order: (name, None, 0) for a handle (the
    call table's handle columns hold it, under the same name) and (name, member, offset) for a number at a
    fixed offset; None when the summary holds anything else (text, an array, a bitfield) or names a
    member twice."""
    layouts = decoder.ctx.defs.layouts
    handles = {name for name, _ in arg.handles}
    out: list[Member] = []
    for f, at in members(layouts[arg.layout], layouts):
        if not in_summary(f, decoder.hide):
            continue
        name = HANDLE_ALIASES.get(f.name, f.name)
        if any(name == seen for seen, _, _ in out):
            return None  # a later member of the name would win, as in a dict
        if f.type in HANDLE_TYPES and f.bit_size is None and name in handles:
            out.append((name, None, 0))
        elif f.type not in HANDLE_TYPES and is_scalar(f):
            out.append((name, f, at))
        else:
            return None
    if [name for name, f, _ in out if f is None] != [name for name, _ in arg.handles]:
        return None
    return tuple(out)
