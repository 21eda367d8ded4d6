"""State at the cursor: every lane's state at the cursor time, and the host counters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from rmtrace.tui.fit import elide_middle
from rmtrace.tui.states import look
from rmtrace.tui.view import LaneRow
from rmtrace.tui.workspace import Workspace
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from rmtrace.timefmt import format_offset

if TYPE_CHECKING:
    from rmtrace.session import State

COUNTERS = ("pub_calls", "gr_rel", "faked", "drain_held")
"""The host service's own counters, shown first when the trace has them."""
LANE_WIDTH = (12, 26)
"""The lane column's narrowest and widest: it gives way before the state column does."""
STATE_WIDTH, DETAIL_WIDTH = 15, 60
CELL_PADDING = 2
"""A DataTable column's padding, both sides together."""
MAX_ROWS = 200
"""Lanes listed at once: a trace with thousands of clients would make every cursor move slow."""


def lane_width(panel_width: int) -> int:
    """The lane column's width in a panel this wide, so that the state beside it shows whole."""
    fits = panel_width - STATE_WIDTH - 2 * CELL_PADDING - 1  # the table's scrollbar
    return max(LANE_WIDTH[0], min(LANE_WIDTH[1], fits))


def shown_lanes(lanes: Sequence[LaneRow], selected: str | None) -> list[LaneRow]:
    """Every lane, or past MAX_ROWS the selected lane's group and the host's ranks first, then the rest to the cap."""
    if len(lanes) <= MAX_ROWS:
        return list(lanes)
    group = next((lane.group for lane in lanes if lane.entity == selected), None)
    first = [lane for lane in lanes if lane.group in (group, "host")]
    rest = [lane for lane in lanes if lane.group not in (group, "host")]
    return (first + rest)[:MAX_ROWS]


def state_rows(workspace: Workspace, state: State | None, lanes: Sequence[LaneRow] | None = None) -> list[tuple[str, str, str, str]]:
    """(lane label, state, symbol, other attributes) for ``lanes`` (default: every lane of the active run)."""
    run = workspace.run
    entities: Mapping[str, Mapping[str, object]] = state.entities if state is not None else {}
    rows = []
    for lane in run.lanes() if lanes is None else lanes:
        attrs = entities.get(lane.entity, {})
        name = str(attrs.get("state", "–"))
        others = " ".join(f"{k}={_short(v)}" for k, v in attrs.items() if k != "state")
        rows.append((lane.label, name, run.services.symbols.get(name, " "), others))
    return rows


def counter_text(state: State | None) -> str:
    counters: Mapping[str, int] = state.counters if state is not None else {}
    if not counters:
        return "host counters: none reported yet"
    first = [k for k in COUNTERS if k in counters] + sorted(k for k in counters if k not in COUNTERS)
    return "  ".join(f"{k}={counters[k]}" for k in first)


def _short(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF:
        return f"{value:#x}"
    return str(value)


class StatePanel(Vertical):
    """The active run's lanes at the cursor time."""

    DEFAULT_CSS = """
    StatePanel > #state-counters { height: auto; padding: 0 1; }
    StatePanel > DataTable { height: 1fr; }
    """

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.workspace = workspace
        self.selected: str | None = None
        self.shown: list[LaneRow] = []
        """The lanes listed now, in table order."""
        self.lane_width = LANE_WIDTH[1]

    def compose(self) -> ComposeResult:
        yield Static(id="state-counters", markup=False)
        table: DataTable[Text] = DataTable(id="state-table", cursor_type="row", zebra_stripes=False)
        self._add_columns(table)
        yield table

    def _add_columns(self, table: DataTable) -> None:
        # fixed widths: no reflow as the cursor moves
        for title, width in (("lane", self.lane_width), ("state", STATE_WIDTH), ("detail", DETAIL_WIDTH)):
            table.add_column(title, width=width)

    def on_mount(self) -> None:
        self.show(self.workspace.cursor)

    def on_resize(self, event: events.Resize) -> None:
        width = lane_width(event.size.width)
        if width != self.lane_width:
            self.lane_width = width
            table = self.query_one(DataTable)
            table.clear(columns=True)
            self._add_columns(table)
            self.show(self.workspace.cursor)

    def show(self, t_rel: int) -> None:
        run = self.workspace.run
        counters = self.query_one("#state-counters", Static)
        table = self.query_one(DataTable)
        table.clear()
        if not run.loaded:
            counters.update(f"at {format_offset(t_rel)}: building the session model…")
            return
        state = run.state_at(t_rel)
        tag = self.workspace.tag(self.workspace.active)
        lanes = run.lanes()
        self.shown = shown_lanes(lanes, self.selected)
        note = "" if len(self.shown) == len(lanes) else \
            f"\n{len(self.shown)} of {len(lanes)} lanes: the selected lane's client and the host's first"
        counters.update(f"{tag + ' ' if tag else ''}at {format_offset(t_rel)}\n{counter_text(state)}{note}")
        for label, name, symbol, others in state_rows(self.workspace, state, self.shown):
            state_cell = Text(f"{symbol} {name}", style=f"on {look(name).colour}" if name != "–" else "")
            table.add_row(Text(elide_middle(label, self.lane_width)), state_cell, Text(others))
        self._move_to(self.selected)

    def select(self, entity: str | None) -> None:
        """Show the lane selected in the timeline: its client's lanes listed, the cursor on its row."""
        self.selected = entity
        listed = {lane.entity for lane in self.shown}
        if entity is not None and entity not in listed and self.workspace.run.loaded:
            self.show(self.workspace.cursor)  # its client was past the cap
        else:
            self._move_to(entity)

    def _move_to(self, entity: str | None) -> None:
        entities = [lane.entity for lane in self.shown]
        if entity in entities:
            self.query_one(DataTable).move_cursor(row=entities.index(entity))
