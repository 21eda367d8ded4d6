"""The main screen: a line about the runs, the timeline, the events table and the side tabs."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rmtrace.tui.fit import NARROW_WIDTH, elide, elide_middle
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.footer import KeysFooter
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import DiffPanel, WedgePanel
from rmtrace.tui.workspace import Workspace
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Static, TabbedContent, TabPane, Tabs

from rmtrace.timefmt import format_duration

if TYPE_CHECKING:
    from rmtrace.tui.app import RmtraceApp

LABEL_MIN = 12
"""A trace's name keeps at least this much of itself on the run line."""


def run_line(workspace: Workspace, width: int = 1_000) -> str:
    """One line per run, each fitted to ``width``: file, records, span, whole or recovered, what the model found.

    What gives way when narrow: the lane count first, then the middle of the file's name, then the end.
    """
    lines = []
    for i, run in enumerate(workspace.runs):
        tag = workspace.tag(i)
        head = ("▸" if workspace.is_diff and i == workspace.active else "") + (f"{tag} " if tag else "")
        facts = [f"{run.record_count:,} records", format_duration(run.end_rel)]
        if not run.complete:
            facts.append("live" if workspace.follow else "recovered (no footer)")
        if run.model is not None:
            found = [_count(len(run.model.clients), "client"), _count(len(run.lanes()), "lane"),
                     _count(len(run.wedges()), "wedge")]
        else:
            found = ["building the session model…"]
        if workspace.follow and i == len(workspace.runs) - 1:
            found.append("following")
        for shown in (found, [f for f in found if not f.endswith(("lane", "lanes"))]):
            rest = " · ".join([*facts, ", ".join(shown)])
            room = width - len(head) - len(" · ") - len(rest)
            if room >= len(run.label):
                break
        lines.append(elide(f"{head}{elide_middle(run.label, max(room, LABEL_MIN))} · {rest}", width))
    return "\n".join(lines)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class MainScreen(Screen):
    """The run line, the timeline, and below it the events table beside the side tabs.

    Below ``NARROW_WIDTH`` columns the events table and the side tabs take
    turns at the full width (class ``-narrow``; ``-side`` while the tabs show).
    """

    DEFAULT_CSS = """
    #run-line { height: auto; padding: 0 1; background: $panel; text-wrap: nowrap; }
    #timeline { height: 45%; min-height: 7; border: round $primary; }
    #timeline:focus { border: round $accent; }
    #lower { height: 1fr; }
    #events { width: 1fr; border: round $primary; }
    #events:focus { border: round $accent; }
    #side { width: 40%; min-width: 28; max-width: 64; }
    MainScreen.-narrow #side { display: none; }
    MainScreen.-narrow.-side #events { display: none; }
    MainScreen.-narrow.-side #side { display: block; width: 1fr; max-width: 100%; }
    """

    BINDINGS = [Binding("e", "events", "Events")]
    """Shown in the footer only while a narrow screen shows the side tabs: the way back (the app's own ``e``
    does the same, unshown)."""

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace

    def action_events(self) -> None:
        cast("RmtraceApp", self.app).action_show("events")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "events":
            return self.narrow and self.has_class("-side")
        return True

    def compose(self) -> ComposeResult:
        yield Static(run_line(self.workspace), id="run-line", markup=False)
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
        yield KeysFooter()

    def on_mount(self) -> None:
        self.update_titles()
        self.query_one(EventsTable).focus()
        self.call_after_refresh(cast("RmtraceApp", self.app).start_models)  # index first: the folding starts once this is on screen

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")
        self._focus_what_shows()
        self.update_titles()

    @property
    def narrow(self) -> bool:
        return self.has_class("-narrow")

    def show_side(self, side: bool) -> None:
        """Which of the events table and the side tabs a narrow screen shows (a wide one shows both).

        The focus leaves the events table when it hides: to the tabs, where ← → go from tab to tab.
        """
        self.set_class(side, "-side")
        self._focus_what_shows()
        self.update_titles()
        self.refresh_bindings()

    def _focus_what_shows(self) -> None:
        """Keys never go to a hidden area: a narrow screen moves the focus to the half it shows."""
        if not self.narrow or self.focused is None:
            return
        side = self.query_one(TabbedContent)
        in_side = side in self.focused.ancestors_with_self
        if self.has_class("-side") and isinstance(self.focused, EventsTable):
            side.query_one(Tabs).focus()
        elif not self.has_class("-side") and in_side:
            self.query_one(EventsTable).focus()

    def update_titles(self) -> None:
        self.query_one("#run-line", Static).update(run_line(self.workspace, max(1, self.size.width - 2)))
        events_table = self.query_one(EventsTable)
        events_table.show_title()
        events_table.border_subtitle = "s o w: the side tabs" if self.narrow else ""
