"""The events table's columns: what each shows, and which a narrow table leaves out.

The operation is what a row is read for, so it takes every column the others
leave, and a column beside it is shown only while the operation keeps at
least that column's ``op_floor`` columns.  An operation that still does not
fit loses its middle (``fit.elide_middle``), so a control keeps its class and
its command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rmtrace.tui.fit import elide, elide_middle
from rmtrace.tui.view import EventRow

from rmtrace.timefmt import format_duration, format_offset

GAP = 1
OP_LEAST = 8
"""The operation column is never narrower (a terminal narrower than the required columns crops the row)."""


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    op_floor: int
    """Shown only while the operation column keeps this many columns beside it (0: always shown)."""
    cell: Callable[[EventRow], str]
    right: bool = False
    flex: bool = False
    """Takes the width the others leave (at least ``width``)."""


COLUMNS: tuple[Column, ...] = (
    Column("time", "time", 11, 0, lambda r: format_offset(r.t_rel), right=True),
    Column("pid", "pid/tid", 11, 50, lambda r: f"{r.pid}/{r.tid}"),
    Column("client", "cl", 3, 28, lambda r: r.client),
    Column("source", "src", 4, 44, lambda r: r.source),
    Column("operation", "operation", 24, 0, lambda r: r.operation, flex=True),
    Column("object", "object", 20, 56, lambda r: r.obj),
    Column("status", "status", 10, 0, lambda r: r.status),
    Column("latency", "latency", 8, 30, lambda r: "" if r.latency_ns is None else format_duration(r.latency_ns),
           right=True),
)
"""In screen order; ``op_floor`` orders who goes first when narrow: object, pid, source, latency, client."""


def fit_columns(width: int, time_width: int = 11, columns: Sequence[Column] = COLUMNS) -> list[tuple[Column, int]]:
    """The columns shown in ``width``, each with its width; ``time_width`` fits the run's longest time."""
    widths = {c.key: (time_width if c.key == "time" else c.width) for c in columns}
    shown = [c for c in columns if c.op_floor == 0]
    for extra in sorted((c for c in columns if c.op_floor), key=lambda c: c.op_floor):
        used = sum(widths[c.key] + GAP for c in shown if not c.flex) + widths[extra.key] + GAP
        if width - used >= extra.op_floor:
            shown.append(extra)
    shown.sort(key=columns.index)
    spare = width - sum(widths[c.key] + GAP for c in shown)
    return [(c, max(OP_LEAST, widths[c.key] + spare) if c.flex else widths[c.key]) for c in shown]


def cell_text(column: Column, text: str, width: int) -> str:
    text = (elide_middle if column.flex else elide)(text, width)
    return text.rjust(width) if column.right else text.ljust(width)
