"""Show's lines of the calls whose whole line the call table's columns hold, printed without their records.

``rmtrace show`` prints a call as ``render.line`` does: who and when, the
name, the summary arguments, the detail, the status and the time taken.
For an ioctl the table reads at fixed offsets (``argspec.Kind.IOCTL``) whose
summary arguments are exactly its handles (RM_ALLOC, RM_FREE, most RM
escapes that name objects), every piece of that line is a column: pid, tid,
the times, the call's state, the name and detail, the status name, the
handles.  Such a call's line is made by ``render.call_line`` from a
``Decoded`` the table gives (``CallTable.infos_and_decoded``), without reading
its records or parsing its argument through construct.  Every other call
(system calls, UVM commands with ranges and uuids, controls with their flags,
GSP and sema messages, anything decoded in Python) is read and decoded as
before.  ``tests/test_show_columns.py`` checks that both make the same line
for every call of every shipped capture.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from rmtrace.decoders import Decoded, DecoderSet, Label
from rmtrace.decoders.ioctl import IoctlOp
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES, STATUS_FIELDS
from rmtrace.decoders.render import call_line
from rmtrace.decoders.rm import NamedByArg

from rmtrace.calls import CallState
from rmtrace.columns.argspec import ArgLayout, Kind, Plan, members
from rmtrace.columns.scan import KeyCache
from rmtrace.columns.table import STATES, CallTable
from rmtrace.record import Phase

PRINTED_STATES = (CallState.COMPLETE, CallState.IN_FLIGHT, CallState.RESUMED)
"""The states of calls printed from the columns: an enter and its exit, an enter alone, an exit alone
(whose first record is then the exit).  A record that stands alone (``SINGLE``) is no ioctl call."""
_PRINTED = np.array([STATES.index(s) for s in PRINTED_STATES], dtype=np.uint8)


@dataclass(slots=True)
class ColumnCall:
    """A call as the columns describe it: its decode at the call level, and what its line says of it."""

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


class ColumnLines:
    """Which rows of ``table`` print from the columns, and their ``ColumnCall``s."""

    def __init__(self, decoders: DecoderSet, table: CallTable) -> None:
        self.table = table
        self.plan = Plan(decoders)
        self._printable = KeyCache(self._op_printable)
        self._named: dict[int, bool] = {}

    def printable(self, rows: np.ndarray) -> np.ndarray:
        """Whether each of ``rows`` prints from the columns: its operation's summary is its handles,
        and its argument was decoded (the row has handles, as the decode reads them)."""
        c = self.table.columns
        key = (c["source"][rows].astype(np.uint64) << np.uint64(32)) | c["op"][rows].astype(np.uint64)
        return ((self._printable(key) != 0) & (c["handles"][rows] >= 0)
                & np.isin(c["state"][rows], _PRINTED))

    def calls(self, rows: np.ndarray) -> Iterator[ColumnCall]:
        """The ``ColumnCall`` of each of ``rows`` (rows ``printable`` keeps), in order."""
        infos, decodes = self.table.infos_and_decoded(rows)
        states = self.table.columns["state"][rows].tolist()
        for info, d, state in zip(infos, decodes, states):
            d.args = d.handles  # the summary arguments are the handles, in the same order (_op_printable)
            d.payload = d.detail is not None and self._named[info.source << 32 | info.op]
            call_state = STATES[state]
            duration = info.t_exit - info.t_enter if call_state is CallState.COMPLETE and info.t_exit is not None \
                else None
            yield ColumnCall(d, info.enter_seq, info.pid, info.tid, info.t_enter, call_state, duration)

    def _op_printable(self, key: int) -> int:
        plan = self.plan.op(key >> 32, key & 0xFFFFFFFF)
        decoder = plan.op
        self._named[key] = isinstance(decoder, NamedByArg)  # describe() marks its detail a payload
        if plan.kind != Kind.IOCTL or not isinstance(decoder, IoctlOp):
            return 0
        layouts = [*plan.arg_layouts.values(), plan.default]
        return int(all(a is None or summary_is_handles(decoder, a) for a in layouts))


def summary_is_handles(decoder: IoctlOp, arg: ArgLayout) -> bool:
    """Whether the summary arguments ``ioctl.summary_args`` makes of layout ``arg`` are its handle members
    and nothing else, under the same names and in the same order as the call table's handle columns."""
    layouts = decoder.ctx.defs.layouts
    names: dict[str, None] = {}
    for f, _ in members(layouts[arg.layout], layouts):
        if f.kind == "ptr" or f.type == "NvP64" or f.name in STATUS_FIELDS or f.name in decoder.hide:
            continue
        if f.type not in HANDLE_TYPES or f.bit_size is not None:
            return False
        names[HANDLE_ALIASES.get(f.name, f.name)] = None
    return tuple(names) == tuple(name for name, _ in arg.handles)
