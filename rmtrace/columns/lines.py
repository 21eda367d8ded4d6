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
  uuids) whose decoder reads nothing but its records' bytes (``MEMO_OPS``)
  has its summary, status and notes kept in a bounded memo keyed by those
  bytes (``SummaryMemo``): a program makes the same calls again and again,
  and a call made again is printed without reading or decoding its records.

Each line is put together by ``render.line_text`` from the same pieces
``render.line`` uses.  Everything else (GSP and sema messages, marks, users'
decoders) is decoded by the caller as before.  ``tests/test_show_columns.py``
checks that both make the same line for every call of every shipped capture.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from rmtrace.decoders import Decoded, DecoderSet, Label, Level
from rmtrace.decoders.filters import CallFilter
from rmtrace.decoders.ioctl import IoctlOp, in_summary
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES
from rmtrace.decoders.render import line, line_text, summary, summary_text
from rmtrace.decoders.rm import NamedByArg
from rmtrace.decoders.system import SysCall

from rmtrace.calls import Call, CallState
from rmtrace.columns.argspec import ArgLayout, Kind, Plan, members
from rmtrace.columns.scan import KeyCache
from rmtrace.columns.summary import SIDES, BlockReader
from rmtrace.columns.table import STATES, CallTable
from rmtrace.columns.view import is_scalar
from rmtrace.layout import Field
from rmtrace.record import BufferFlag, Phase, Record
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

MEMO_OPS = (IoctlOp, SysCall)
"""Decoders whose call-level decode is a function of the call's records' bytes alone (not of which call it
is: seq, time, pid, tid, call id; nor of the calls before it), so that a summary can be kept by them."""
MEMO_KEPT = 1 << 16
"""Summaries the memo keeps (the most recently used): a key of 16 bytes and a small decode each, a few
tens of MB at most.  The shipped capture of three CUDA clients has ~2,600 distinct decoded calls."""

Member = tuple[str, Field | None, int]
"""A summary member: (name, None, 0) for a handle, (name, member, offset) for a number at a fixed offset."""


class Line(NamedTuple):
    """A call's line, made without its records (or from a summary decoded before), in place of its call."""

    first_seq: int
    text: str


class SummaryMemo:
    """Call-level decodes of calls by their records' bytes (``BlockReader.stable_bytes``), bounded."""

    def __init__(self, kept: int = MEMO_KEPT) -> None:
        self.kept = kept
        self.hits = 0
        self.misses = 0
        self._done: OrderedDict[bytes, tuple[Decoded, str]] = OrderedDict()

    @staticmethod
    def key(state: int, records: Sequence[bytes]) -> bytes:
        """The memo's key of a call in ``state`` made of records of these bytes (a digest: the bytes of a
        UVM call run to kilobytes)."""
        h = hashlib.blake2b(bytes((state, len(records))), digest_size=16)
        for data in records:
            h.update(len(data).to_bytes(4, "little"))
            h.update(data)
        return h.digest()

    def get(self, key: bytes) -> tuple[Decoded, str] | None:
        found = self._done.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._done.move_to_end(key)
        return found

    def put(self, key: bytes, decoded: Decoded, body: str) -> None:
        self._done[key] = (decoded, body)
        if len(self._done) > self.kept:
            self._done.popitem(last=False)


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
        self._filtered = bool(wanted.names or wanted.statuses or wanted.failed or wanted.handles)
        c = table.columns
        self._cols = {name: np.asarray(c[name]) for name in _LINE_COLUMNS}

    def kinds(self, rows: np.ndarray) -> np.ndarray:
        """How each of ``rows`` prints: ``FROM_COLUMNS``, ``FROM_ARGUMENT``, ``MEMO`` or 0 (the caller
        decodes it).  A row prints from the columns when its operation's summary is members at fixed
        offsets and its argument was decoded (the row has handles, as the decode reads them); from the
        memo when its decoder is one of ``MEMO_OPS`` and its records are its first and its exit."""
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
        if made.size:
            self._column_lines(rows, kinds, made, out)
        memo = np.flatnonzero(kinds == MEMO)
        if memo.size:
            self._memo_lines(rows[memo], memo, out)
        return out

    # -- from the columns and the argument

    def _column_lines(self, rows: np.ndarray, kinds: np.ndarray, made: np.ndarray, out: list[str | bool]) -> None:
        block = rows[made]
        c = {name: self._cols[name][block].tolist() for name in _LINE_COLUMNS if name != "exit_seq"}
        names, details = self.table.names.values, self.table.details.values
        statuses, handle_sets = self.table.status_names.values, self.table.handle_sets.values
        extra = self.table.extra_handles
        argument = self._argument_values(block, kinds[made] == FROM_ARGUMENT)
        start, end, named = self.start_ns, self.end_ns, self._named
        handle_columns = [c[f"h{k}"] for k in range(len(_HANDLE_COLUMNS))]
        for i, (at, row) in enumerate(zip(made.tolist(), block.tolist())):
            handles = dict(extra[row]) if row in extra else {
                name: handle_columns[k][i] for k, name in enumerate(handle_sets[c["handles"][i]])}
            args: dict[str, object] = handles
            if argument is not None and i in argument:
                found = argument[i]
                if found is None:
                    continue  # the two copies of the argument disagree: the decoders decide
                args = {name: handles[name] if f is None else value for (name, f, _), value in found}
            name, detail_id = names[c["name"][i]], c["detail"][i]
            detail = details[detail_id] if detail_id >= 0 else None
            status_id = c["status_name"][i]
            status_name = statuses[status_id] if status_id >= 0 else None
            if self._filtered and not self._wants(c, i, name, detail, status_name, handles):
                out[at] = False
                continue
            state = c["state"][i]
            payload = detail is not None and named[c["source"][i] << 32 | c["op"][i]]
            body = summary_text(name, args, handles, detail, payload)
            first_ns = c["t_enter"][i]
            duration = c["t_exit"][i] - first_ns if state == _COMPLETE else None
            phase = Phase.EXIT if state == _RESUMED else Phase.ENTER
            out[at] = line_text(name, body, status_name, (), c["pid"][i], c["tid"][i], first_ns, phase,
                                STATES[state], duration, start, end)

    def _wants(self, c: dict[str, list], i: int, name: str, detail: str | None, status_name: str | None,
               handles: dict[str, int]) -> bool:
        """Whether the call filter wants the call of column row ``i`` (the call level's decode of it is
        what the columns say: the row mask chose on the same columns, but does not decide alone)."""
        if not self.wanted.wants_label(Label(name, detail)):
            return False
        ok = c["ok"][i]
        decoded = Decoded(c["source"][i], c["op"][i], name, detail, status=c["status"][i] if c["has_status"][i] else None,
                          status_name=status_name, ok=None if ok < 0 else bool(ok), handles=handles, level=Level.CALL)
        return self.wanted.wants(decoded)

    def _argument_values(self, block: np.ndarray, arg_rows: np.ndarray) -> dict[int, list[tuple[Member, int]] | None] | None:
        """Of the ``FROM_ARGUMENT`` rows of ``block``, by index in it: each summary member with its value
        (for a handle: None, the handle columns hold it), read from the argument as the decode takes it,
        from the copy it uses, which is the only copy that decodes, or either when both do and agree; else
        None (the decoders decide)."""
        at = np.flatnonzero(arg_rows)
        if not at.size:
            return None
        rows = block[at]
        col = self._cols
        enter = col["enter_seq"][rows].astype(np.int64)
        exit_ = col["exit_seq"][rows]
        has_exit = (exit_ >= 0) & (exit_ != enter)
        seqs = np.concatenate([enter, exit_[has_exit]])
        found = self.blocks.arg_sides(seqs)
        second = np.full(len(rows), -1, dtype=np.int64)
        second[has_exit] = np.arange(len(rows), len(seqs))[: int(has_exit.sum())]
        source, op = col["source"][rows].astype(np.uint64), col["op"][rows].astype(np.uint64)
        chosen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per side: summary id, chunk, start
        for side in range(len(SIDES)):
            start, length, flags = found.start[side], found.length[side], found.flags[side]
            # the first buffer of the side in the call's records, as arg_buffer finds it: the first record's,
            # else the exit's
            pick = np.arange(len(rows))
            later = (start[pick] < 0) & (second >= 0)
            pick[later] = second[later]
            present = start[pick] >= 0
            unreadable = (flags[pick] & _UNREADABLE) != 0
            key = ((source << np.uint64(60)) | (unreadable.astype(np.uint64) << np.uint64(59))
                   | (op << np.uint64(27)) | np.minimum(length[pick], (1 << 27) - 1).astype(np.uint64))
            ids = np.where(present, self._sides(key), -1)
            chosen.append((ids, found.chunk[pick], start[pick]))
        (b_ids, b_chunk, b_start), (a_ids, a_chunk, a_start) = chosen
        ids = np.where(b_ids >= 0, b_ids, a_ids)
        both = (b_ids >= 0) & (a_ids >= 0)
        agree = ~both | (b_ids == a_ids)
        out: dict[int, list[tuple[Member, int]] | None] = {}
        for sid in np.unique(ids[ids >= 0]).tolist():
            mine = np.flatnonzero((ids == sid) & agree)
            members_ = self._summaries[sid]
            values = []
            for _, f, offset in members_:
                if f is None:
                    values.append(np.zeros(len(mine), dtype=np.int64))
                    continue
                dtype = np.dtype(f"<{'i' if _signed(f) else 'u'}{f.size}")
                value = np.zeros(len(mine), dtype=dtype)
                use_b = b_ids[mine] >= 0
                if use_b.any():
                    value[use_b] = self.blocks.gather(b_chunk[mine][use_b], b_start[mine][use_b] + offset, dtype)
                if (~use_b).any():
                    value[~use_b] = self.blocks.gather(a_chunk[mine][~use_b], a_start[mine][~use_b] + offset, dtype)
                two = both[mine]
                if two.any():
                    after = self.blocks.gather(a_chunk[mine][two], a_start[mine][two] + offset, dtype)
                    differ = np.flatnonzero(two)[after != value[two]]
                    agree[mine[differ]] = False
                values.append(value)
            # a column each (numbers of several types: stacked, numpy would make them floats)
            table = list(zip(*(v.tolist() for v in values))) if values else [() for _ in mine]
            for i, row_values in zip(mine.tolist(), table):
                if agree[i]:
                    out[int(at[i])] = list(zip(members_, row_values))
        for i in np.flatnonzero((ids < 0) | ~agree).tolist():
            out[int(at[i])] = None
        return out

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
        decoder = self.plan.op(key >> 32, key & 0xFFFFFFFF).op
        return MEMO if isinstance(decoder, MEMO_OPS) and type(decoder).__module__ in _BUILT_IN else 0

    # -- from the memo

    def _memo_lines(self, rows: np.ndarray, at: np.ndarray, out: list[str | bool]) -> None:
        col = self._cols
        enter = col["enter_seq"][rows].astype(np.int64)
        exit_ = col["exit_seq"][rows]
        has_exit = (exit_ >= 0) & (exit_ != enter)
        chunk, pos = self.blocks.places(np.concatenate([enter, exit_[has_exit]]))
        second = np.full(len(rows), -1, dtype=np.int64)
        second[has_exit] = np.arange(len(rows), len(chunk))[: int(has_exit.sum())]
        c = {name: col[name][rows].tolist() for name in ("pid", "tid", "t_enter", "t_exit", "state", "enter_seq", "exit_seq")}
        phases = self.blocks.header_field(chunk[:len(rows)], pos[:len(rows)], "phase").tolist()
        chunk_l, pos_l, second_l = chunk.tolist(), pos.tolist(), second.tolist()
        stable = self.blocks.stable_bytes
        start, end, memo, wanted = self.start_ns, self.end_ns, self.memo, self.wanted
        for i, k in enumerate(at.tolist()):
            state = c["state"][i]
            j = second_l[i]
            data = [stable(chunk_l[i], pos_l[i])] if j < 0 else [stable(chunk_l[i], pos_l[i]), stable(chunk_l[j], pos_l[j])]
            key = memo.key(state, data)
            kept = memo.get(key)
            if kept is None:
                call = self._call(c["enter_seq"][i], c["exit_seq"][i] if j >= 0 else -1, STATES[state])
                d = self.decoders.decode(call, Level.CALL)
                memo.put(key, d, summary(d))
                if wanted.wants_label(Label(d.name, d.detail)) and wanted.wants(d):
                    out[k] = line(d, call, start, end)
                else:
                    out[k] = False
                continue
            d, body = kept
            if self._filtered and not (wanted.wants_label(Label(d.name, d.detail)) and wanted.wants(d)):
                out[k] = False
                continue
            first_ns = c["t_enter"][i]
            duration = c["t_exit"][i] - first_ns if state == _COMPLETE else None
            out[k] = line_text(d.name, body, d.status_name, d.notes, c["pid"][i], c["tid"][i], first_ns, phases[i],
                               STATES[state], duration, start, end)

    def _call(self, first: int, exit_seq: int, state: CallState) -> Call:
        record = self.reader.record_at
        records: tuple[Record, ...] = (record(first),) if exit_seq < 0 else (record(first), record(exit_seq))
        return Call(records, state)


_LINE_COLUMNS = ("enter_seq", "exit_seq", "t_enter", "t_exit", "state", "pid", "tid", "source", "op", "name",
                 "detail", "status_name", "status", "has_status", "ok", "handles",
                 "h0", "h1", "h2", "h3", "h4", "h5")
"""What a line made from the columns reads."""
_HANDLE_COLUMNS = ("h0", "h1", "h2", "h3", "h4", "h5")
_BUILT_IN = frozenset({"rmtrace.decoders.ioctl", "rmtrace.decoders.rm", "rmtrace.decoders.uvm", "rmtrace.decoders.system"})
"""The decoders' own modules: a user's decoder may keep state, so its calls are never memoized."""


def _signed(f: Field) -> bool:
    from rmtrace.decoders.structs import SIGNED_KINDS
    return f.kind in SIGNED_KINDS


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
