"""The main screen: a line about the runs, the timeline, the events table and the side tabs."""

from __future__ import annotations

from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import DiffPanel, WedgePanel
from rmtrace.tui.workspace import Workspace
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from rmtrace.timefmt import format_duration


def run_line(workspace: Workspace) -> str:
    """One line per run: file, records, span, whole or recovered, model state."""
    lines = []
    for i, run in enumerate(workspace.runs):
        tag = workspace.tag(i)
        state = "" if run.complete else (" · live" if workspace.follow else " · recovered (no footer)")
        if run.loaded:
            model = ", ".join(_count(len(things), what) for things, what in (
                (run.model.clients, "client"), (run.lanes(), "lane"), (run.wedges(), "wedge")))
        else:
            model = "building the session model…"
        active = "▸" if workspace.is_diff and i == workspace.active else ""
        lines.append(f"{active}{tag + ' ' if tag else ''}{run.label} · {run.record_count:,} records · "
                     f"{format_duration(run.end_rel)}{state} · {model}")
    if workspace.follow:
        lines[-1] += " · following"
    return "\n".join(lines)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class MainScreen(Screen):
    DEFAULT_CSS = """
    #run-line { height: auto; padding: 0 1; background: $panel; }
    #timeline { height: 45%; min-height: 7; border: round $primary; }
    #timeline:focus { border: round $accent; }
    #lower { height: 1fr; }
    #events { width: 1fr; border: round $primary; }
    #events:focus { border: round $accent; }
    #side { width: 40%; min-width: 28; max-width: 64; }
    """

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace

    def compose(self) -> ComposeResult:
        yield Static(run_line(self.workspace), id="run-line")
        timeline = Timeline(self.workspace, id="timeline")
        timeline.border_title = "Timeline"
        yield timeline
        with Horizontal(id="lower"):
            yield EventsTable(self.workspace, id="events")
            with TabbedContent(id="side"):
                with TabPane("State", id="tab-state"):
                    yield StatePanel(self.workspace, id="state")
                with TabPane("Objects", id="tab-objects"):
                    yield ObjectsTree(self.workspace, id="objects")
                with TabPane("Wedges", id="tab-wedges"):
                    yield WedgePanel(self.workspace, id="wedges")
                if self.workspace.is_diff:
                    with TabPane("Diff", id="tab-diff"):
                        yield DiffPanel(self.workspace, id="diff")
        yield Footer()

    def on_mount(self) -> None:
        self.update_titles()
        self.query_one(EventsTable).focus()
        self.call_after_refresh(self.app.start_models)  # index first: the folding starts once this is on screen

    def update_titles(self) -> None:
        self.query_one("#run-line", Static).update(run_line(self.workspace))
        events = self.query_one(EventsTable)
        events.border_title = events.title()
