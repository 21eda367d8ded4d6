"""Show's lines of the calls whose line needs no decoder: made from the call table and, at most, a few
numbers of their argument.

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
  from its argument's bytes (``FROM_ARGUMENT``: its records are read, nothing
  is parsed through construct);

both by ``render.call_line`` on the ``Decoded`` the table gives
(``CallTable.infos_and_decoded``).  Every other call (system calls, UVM
commands with arrays and uuids, GSP and sema messages, anything decoded in
Python) is decoded as before.  ``tests/test_show_columns.py`` checks that both
make the same line for every call of every shipped capture.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from rmtrace.decoders import Decoded, DecoderSet, Label
from rmtrace.decoders.ioctl import IoctlOp, arg_buffer, in_summary
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES
from rmtrace.decoders.render import call_line
from rmtrace.decoders.rm import NamedByArg

from rmtrace.calls import CallState
from rmtrace.columns.argspec import ArgLayout, Kind, Plan, members
from rmtrace.columns.scan import KeyCache
from rmtrace.columns.table import STATES, CallTable
from rmtrace.columns.view import is_scalar, scalar_at
from rmtrace.layout import Field
from rmtrace.record import BufferFlag, Phase, Record, Role, When

PRINTED_STATES = (CallState.COMPLETE, CallState.IN_FLIGHT, CallState.RESUMED)
"""The states of calls printed from the columns: an enter and its exit, an enter alone, an exit alone
(whose first record is then the exit).  A record that stands alone (``SINGLE``) is no ioctl call."""
_PRINTED = np.array([STATES.index(s) for s in PRINTED_STATES], dtype=np.uint8)
_UNREADABLE = int(BufferFlag.UNREADABLE)  # a plain int: an IntFlag's & costs more than the rest of the test


@dataclass(slots=True)
class ColumnCall:
    """A call as the call table describes it: its decode at the call level, and what its line says of it."""

    decoded: Decoded
    first_seq: int
    pid: int
    tid: int
    first_ns: int
    state: CallState
    duration_ns: int | None

    @property
    def label(self) -> Label:
        return Label(self.decoded.name, self.decoded.detail)

    def line(self, start_ns: int, end_ns: int | None = None) -> str:
        phase = Phase.EXIT if self.state is CallState.RESUMED else Phase.ENTER
        return call_line(self.decoded, self.pid, self.tid, self.first_ns, phase, self.state, self.duration_ns,
                         start_ns, end_ns)


FROM_COLUMNS, FROM_ARGUMENT = 1, 2
"""How a row's line is made without the decoders: from the columns alone (its summary is its handles), or
with the other members of its summary read from its argument's bytes (a control's flags, a mapping's
offset and length)."""


class ColumnLines:
    """Which rows of ``table`` print without the decoders, and their ``ColumnCall``s."""

    def __init__(self, decoders: DecoderSet, table: CallTable) -> None:
        self.table = table
        self.plan = Plan(decoders)
        self._kinds = KeyCache(self._op_kind)
        self._named: dict[int, bool] = {}
        self._summaries: dict[str, tuple[tuple[str, Field | None, int], ...]] = {}

    def kinds(self, rows: np.ndarray) -> np.ndarray:
        """How each of ``rows`` prints: ``FROM_COLUMNS``, ``FROM_ARGUMENT`` or 0 (through the decoders).  A
        row prints without them when its operation's summary is members at fixed offsets, and its argument
        was decoded (the row has handles, as the decode reads them)."""
        c = self.table.columns
        key = (c["source"][rows].astype(np.uint64) << np.uint64(32)) | c["op"][rows].astype(np.uint64)
        decoded = (c["handles"][rows] >= 0) & np.isin(c["state"][rows], _PRINTED)
        return np.where(decoded, self._kinds(key), 0)

    def calls(self, rows: np.ndarray) -> Iterator[ColumnCall]:
        """The ``ColumnCall`` of each of ``rows`` (rows ``kinds`` keeps), in order; the summary of a
        ``FROM_ARGUMENT`` row is still to be completed by ``with_argument``."""
        infos, decodes = self.table.infos_and_decoded(rows)
        states = self.table.columns["state"][rows].tolist()
        for info, d, state in zip(infos, decodes, states):
            d.args = d.handles  # the summary's handles, in its order (summary_members); with_argument adds the rest
            d.payload = d.detail is not None and self._named[info.source << 32 | info.op]
            call_state = STATES[state]
            duration = info.t_exit - info.t_enter if call_state is CallState.COMPLETE and info.t_exit is not None \
                else None
            yield ColumnCall(d, info.enter_seq, info.pid, info.tid, info.t_enter, call_state, duration)

    def with_argument(self, call: ColumnCall, records: Sequence[Record]) -> ColumnCall | None:
        """``call`` (a ``FROM_ARGUMENT`` row) with its summary's members read from its argument, read before
        and after the call, as the decode takes them: from the copy it uses, which is the only copy that
        decodes, or either when both do and agree (else None: the decoders decide)."""
        plan = self.plan.op(call.decoded.source, call.decoded.op)
        sides = []
        for when in (When.BEFORE, When.AFTER):
            buf = arg_buffer(records, Role.ARG, when)
            arg = plan.arg(len(buf.data)) if buf is not None and not buf.flags & _UNREADABLE else None
            if buf is not None and arg is not None:
                summary = self._summary(plan.op, arg)
                sides.append([(name, f if f is None else scalar_at(f, buf.data, at)) for name, f, at in summary])
        if not sides or any(side != sides[0] for side in sides):
            return None
        handles = call.decoded.handles
        call.decoded.args = {name: handles[name] if value is None else value for name, value in sides[0]}
        return call

    def _summary(self, decoder: IoctlOp, arg: ArgLayout) -> tuple[tuple[str, Field | None, int], ...]:
        found = self._summaries.get(arg.layout)
        if found is None:
            found = self._summaries[arg.layout] = summary_members(decoder, arg) or ()
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


def summary_members(decoder: IoctlOp, arg: ArgLayout) -> tuple[tuple[str, Field | None, int], ...] | None:
    """The members ``ioctl.summary_args`` shows (``ioctl.in_summary``) of layout ``arg``, in order: (name, None, 0) for a handle (the
    call table's handle columns hold it, under the same name) and (name, member, offset) for a number at a
    fixed offset; None when the summary holds anything else (text, an array, a bitfield) or names a
    member twice."""
    layouts = decoder.ctx.defs.layouts
    handles = {name for name, _ in arg.handles}
    out: list[tuple[str, Field | None, int]] = []
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
