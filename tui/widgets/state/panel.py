"""State at the cursor: every lane's state at the cursor time, and the host counters."""

from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from rmtrace.timefmt import format_offset
from rmtrace.tui.states import look
from rmtrace.tui.workspace import Workspace

COUNTERS = ("pub_calls", "gr_rel", "faked", "drain_held")
STATE_COLUMNS = (("lane", 26), ("state", 15), ("detail", 60))
"""The host service's own counters, shown first when the trace has them."""


def state_rows(workspace: Workspace, state: Any) -> list[tuple[str, str, str, str]]:
    """(lane label, state, symbol, other attributes) for every lane of the active run, in lane order."""
    run = workspace.run
    entities: Mapping[str, Mapping[str, object]] = state.entities if state is not None else {}
    rows = []
    for lane in run.lanes():
        attrs = entities.get(lane.entity, {})
        name = str(attrs.get("state", "–"))
        others = " ".join(f"{k}={_short(v)}" for k, v in attrs.items() if k != "state")
        rows.append((lane.label, name, run.services.symbols.get(name, " "), others))
    return rows


def counter_text(state: Any) -> str:
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

    def compose(self) -> ComposeResult:
        yield Static(id="state-counters")
        table = DataTable(id="state-table", cursor_type="row", zebra_stripes=False)
        for title, width in STATE_COLUMNS:  # fixed widths: no reflow as the cursor moves
            table.add_column(title, width=width)
        yield table

    def on_mount(self) -> None:
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
        counters.update(f"{tag + ' ' if tag else ''}at {format_offset(t_rel)}\n{counter_text(state)}")
        for label, name, symbol, others in state_rows(self.workspace, state):
            table.add_row(label, Text(f"{symbol} {name}", style=f"on {look(name).colour}" if name != "–" else ""),
                          others)
        self.select(self.selected)

    def select(self, entity: str | None) -> None:
        """Put the table's cursor on ``entity``'s row (the lane selected in the timeline)."""
        self.selected = entity
        lanes = [lane.entity for lane in self.workspace.run.lanes()]
        if entity in lanes:
            self.query_one(DataTable).move_cursor(row=lanes.index(entity))
