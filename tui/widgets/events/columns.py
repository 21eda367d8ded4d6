"""The events table's columns: a table of what each shows, and which to drop first when narrow."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rmtrace.tui.view import EventRow

from rmtrace.timefmt import format_duration, format_offset

GAP = 1


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    drop_order: int
    """0: always shown; higher numbers go first when the table is narrow."""
    cell: Callable[[EventRow], str]
    right: bool = False
    flex: bool = False
    """Takes the width the others leave (at least ``width``)."""


COLUMNS: tuple[Column, ...] = (
    Column("time", "time", 12, 0, lambda r: format_offset(r.t_rel), right=True),
    Column("pid", "pid/tid", 11, 5, lambda r: f"{r.pid}/{r.tid}"),
    Column("client", "cl", 3, 3, lambda r: r.client),
    Column("source", "src", 4, 4, lambda r: r.source),
    Column("operation", "operation", 16, 0, lambda r: r.operation, flex=True),
    Column("object", "object", 20, 6, lambda r: r.obj),
    Column("status", "status", 12, 1, lambda r: r.status),
    Column("latency", "latency", 9, 2, lambda r: "" if r.latency_ns is None else format_duration(r.latency_ns),
           right=True),
)


def fit_columns(width: int, columns: Sequence[Column] = COLUMNS) -> list[tuple[Column, int]]:
    """The columns that fit in ``width``, each with its width; the flexible one takes the rest."""
    shown = list(columns)
    while len(shown) > 1 and sum(c.width + GAP for c in shown) > width:
        worst = max(shown, key=lambda c: c.drop_order)
        if worst.drop_order == 0:
            break
        shown.remove(worst)
    spare = max(0, width - sum(c.width + GAP for c in shown))
    return [(c, c.width + (spare if c.flex else 0)) for c in shown]


def cell_text(text: str, width: int, right: bool) -> str:
    text = text if len(text) <= width else text[: max(0, width - 1)] + "…"
    return text.rjust(width) if right else text.ljust(width)
