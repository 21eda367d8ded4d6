"""The application: wires the main screen to the runs and carries messages between areas.

First paint needs only the trace index (the run line, the events table's
first page); the session model, which folds the whole trace, is built in a
worker thread started after that paint and attached when it is done.
``--follow`` polls the trace every half second and refolds it in the
background when it has grown.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rmtrace.tui.filters import EventFilter
from rmtrace.tui.messages import (
    CursorMoved,
    DecodersReady,
    ModelFailed,
    ModelLoaded,
    ObjectCleared,
    ObjectSelected,
    RecordChosen,
    TraceGrew,
    TreesReady,
    WedgeShown,
)
from rmtrace.tui.screens.detail import RecordDetail
from rmtrace.tui.screens.filter import FilterScreen, PromptScreen
from rmtrace.tui.screens.help import HelpScreen
from rmtrace.tui.screens.main import MainScreen
from rmtrace.tui.services import Services
from rmtrace.tui.view import RunView
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import DiffPanel, WedgePanel
from rmtrace.tui.workspace import Workspace
from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.widgets import TabbedContent

from rmtrace.errors import RmtraceError
from rmtrace.timefmt import parse_duration
from rmtrace.trace import TraceReader

if TYPE_CHECKING:
    from rmtrace.analysis.diff import Divergence as AnalysisDivergence
    from rmtrace.session import SessionModel

FOLLOW_POLL_S = 0.5
"""A recorder flushes a chunk at least this often."""
REFOLD_EVERY_S = 2.0
"""A followed trace's model is rebuilt at most this often."""
DRAWN_WAIT_S = 1.0
"""How long a worker waits for the screen to draw what it posted (lanes, wedges) before it goes on to what
the screen does not show yet (the whole fold, the object trees), at most: meanwhile the redraw has the
interpreter to itself."""
WORKER_SWITCH_S = 0.0005
"""The interpreter's thread switch interval while workers fold traces: the default 5 ms lets a fold
starve the screen (every keypress waits for the lock); this keeps keys and redraws prompt."""


class RmtraceApp(App):
    TITLE = "rmtrace tui"
    ENABLE_COMMAND_PALETTE = False

    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("w", "wedge(1)", "Next wedge"),
        Binding("W", "wedge(-1)", "Prev wedge", show=False),
        Binding("f", "filter", "Filter"),
        Binding("slash", "search", "Search"),
        Binding("g", "goto", "Go to time"),
        Binding("t", "show('timeline')", "Timeline", show=False),
        Binding("e", "show('events')", "Events", show=False),
        Binding("s", "tab('tab-state')", "State", show=False),
        Binding("o", "tab('tab-objects')", "Objects", show=False),
        Binding("d", "tab('tab-diff')", "Diff", show=False),
        Binding("x", "switch_run", "A ⇄ B"),
        Binding("F", "toggle_follow", "Follow"),
    ]

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self._loading: set[int] = set()
        self._last_fold = [0.0] * len(workspace.runs)
        self._refold_pending: set[int] = set()
        self._folded_upto = [0] * len(workspace.runs)
        self._switch_interval = sys.getswitchinterval()
        self._drawn = [threading.Event() for _ in workspace.runs]
        """Per run: set once the screen has drawn the model its worker last posted."""

    @classmethod
    def open(cls, paths: Sequence[str], services: Services, *, follow: bool = False) -> RmtraceApp:
        """Open the traces (index only: fast) and make the application."""
        if not 1 <= len(paths) <= 2:
            raise RmtraceError("give one trace, or two to compare them")
        if follow and len(paths) != 1:
            raise RmtraceError("--follow takes one trace")
        runs = [RunView(TraceReader(p), services) for p in paths]
        return cls(Workspace(runs, follow=follow))

    # -- lifecycle

    def get_default_screen(self) -> MainScreen:
        """The main screen is the bottom of the stack: nothing can pop it, every other screen closes onto it."""
        self._main = MainScreen(self.workspace)
        return self._main

    def on_mount(self) -> None:
        if self.workspace.follow:
            self.set_interval(FOLLOW_POLL_S, self._poll)

    def start_models(self) -> None:
        """Decode and fold every run in workers (the main screen calls this once it has painted)."""
        keep_out_of_collections()  # the modules, textual's objects, the first screen: as long-lived as the app
        for index, run in enumerate(self.workspace.runs):
            if not run.loaded:
                self._fold(index)

    @on(DecodersReady)
    def _decoders_ready(self, message: DecodersReady) -> None:
        run = self.workspace.runs[message.run]
        run.attach_decoders(message.decoders)
        if message.run == self.workspace.active:
            self.main.query_one(EventsTable).reset()

    def _fold(self, index: int) -> None:
        if index in self._loading:
            return
        self._loading.add(index)
        sys.setswitchinterval(WORKER_SWITCH_S)
        self._last_fold[index] = time.monotonic()
        self._folded_upto[index] = self.workspace.runs[index].record_count
        self._build_model(index)

    @work(thread=True, group="model")
    def _build_model(self, index: int) -> None:
        """The decoders first (cheap: rows get their names), then what the first screen draws of the session
        model (lanes, wedges) when that comes sooner than the whole model, then the whole model."""
        run = self.workspace.runs[index]
        try:
            decoders = run.decoders
            if decoders is None:
                decoders = run.build_decoders()  # None: the services build none, the model brings its own
                if decoders is not None:
                    self.post_message(DecodersReady(index, decoders))
            first = run.build_first(decoders) if not run.loaded else None  # a refold has lanes on screen
            if first is not None and not first[1]:
                self._post_drawn(ModelLoaded(index, first[0], whole=False))
            folded = first[0] if first is not None and first[1] else run.build_model(decoders)
        except RmtraceError as exc:
            self.post_message(ModelFailed(index, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 -- a fold bug must not take the events table down with it
            self.post_message(ModelFailed(index, f"could not fold this trace ({type(exc).__name__}: {exc}); "
                                                 "the events table still shows every record"))
            return
        self._post_drawn(ModelLoaded(index, folded))
        folded.trees()
        self.post_message(TreesReady(index, folded))
        run.services.keep_model(folded.model)  # after what the screen shows: the next open loads it

    def _post_drawn(self, message: ModelLoaded) -> None:
        """Post ``message`` (from a worker) and wait until the screen has drawn it (``DRAWN_WAIT_S`` at most):
        the lanes and wedges appear before the worker takes the interpreter back for the rest."""
        drawn = self._drawn[message.run]
        drawn.clear()
        self.post_message(message)
        drawn.wait(DRAWN_WAIT_S)

    def _folded(self, index: int) -> None:
        """A fold ended: with none left, the interpreter switches threads at its usual pace again."""
        self._loading.discard(index)
        if not self._loading:
            sys.setswitchinterval(self._switch_interval)

    @on(ModelLoaded)
    def _model_loaded(self, message: ModelLoaded) -> None:
        run = self.workspace.runs[message.run]
        # the worker waits for the screen to have drawn this before it goes on
        self.call_after_refresh(self._drawn[message.run].set)
        if not message.whole:  # the lanes and wedges, while the whole model folds: drawn, nothing else
            if not run.loaded:
                run.attach(message.folded)
                self.redraw()
            return
        self._folded(message.run)
        run.attach(message.folded)
        if run.record_count > self._folded_upto[message.run]:
            self._refold_soon(message.run)  # it grew while this fold ran
        elif not self.workspace.follow:  # no refold will replace this model: it lives as long as the app
            keep_out_of_collections()
        if self.workspace.is_diff:
            a, b = (r.model for r in self.workspace.runs)
            if a is not None and b is not None:
                self._diverge(a, b)
        self.redraw()

    @on(TreesReady)
    def _trees_ready(self, message: TreesReady) -> None:
        if self.workspace.runs[message.run].folded is message.folded and message.run == self.workspace.active:
            self.main.query_one(ObjectsTree).reload()

    @on(ModelFailed)
    def _model_failed(self, message: ModelFailed) -> None:
        self._folded(message.run)
        self.notify(f"session model: {message.error}", severity="error", timeout=10, markup=False)

    @work(thread=True, group="diff", exclusive=True)
    def _diverge(self, a: SessionModel, b: SessionModel) -> None:
        div = self.workspace.run.services.first_divergence(a, b)
        self.call_from_thread(self._show_divergence, div)

    def _show_divergence(self, div: AnalysisDivergence | None) -> None:
        ws = self.workspace
        ws.divergence = ws.divergence_from(div)
        self.redraw()
        t_rel = ws.divergence.t_rel[ws.active] if ws.divergence is not None else None
        if t_rel is not None and ws.cursor == 0:
            self.main.query_one(Timeline).set_cursor(t_rel)  # start where the runs part

    def redraw(self) -> None:
        """Everything drawn from the models again."""
        from rmtrace.columns.collector import young_collections  # imported by the fold or the load before this
        with young_collections():  # thousands of rows of lanes and states, none garbage: no full collection
            self._redraw()

    def _redraw(self) -> None:
        screen = self.main
        screen.query_one(Timeline).rebuild()
        screen.query_one(EventsTable).reset()
        screen.query_one(StatePanel).show(self.workspace.cursor)
        screen.query_one(ObjectsTree).reload()
        screen.query_one(WedgePanel).reload()
        for panel in screen.query(DiffPanel):
            panel.reload()
        screen.update_titles()

    @property
    def main(self) -> MainScreen:
        return self._main

    # -- following a live trace

    def _poll(self) -> None:
        for index, run in enumerate(self.workspace.runs):
            added = run.refresh()
            if added:
                self.post_message(TraceGrew(index, added))

    @on(TraceGrew)
    def _grew(self, message: TraceGrew) -> None:
        screen = self.main
        if message.run == self.workspace.active:
            screen.query_one(EventsTable).grew(message.added)
            timeline = screen.query_one(Timeline)
            timeline.grew()
            if self.workspace.follow:  # the cursor rides the end: what is the state now?
                end = self.workspace.runs[message.run].end_rel
                self.workspace.cursor = end
                timeline.set_cursor(end, post=False)
                screen.query_one(StatePanel).show(end)
            screen.update_titles()
        self._refold_soon(message.run)

    def _refold_soon(self, index: int) -> None:
        """Refold a grown trace at most every REFOLD_EVERY_S (one timer per run, however often it grows)."""
        if index in self._refold_pending:
            return
        wait = max(0.0, REFOLD_EVERY_S - (time.monotonic() - self._last_fold[index]))
        self._refold_pending.add(index)

        def go() -> None:
            self._refold_pending.discard(index)
            self._fold(index)
        self.set_timer(wait, go)

    def action_toggle_follow(self) -> None:
        self.workspace.follow = not self.workspace.follow
        self.notify("following the trace's end" if self.workspace.follow else "stopped following")
        self.main.update_titles()

    # -- moving in time

    @on(CursorMoved)
    def _cursor_moved(self, message: CursorMoved) -> None:
        self.workspace.cursor = message.t_rel
        screen = self.main
        screen.query_one(StatePanel).show(message.t_rel)
        if message.origin != "events":
            screen.query_one(EventsTable).follow_time(message.t_rel)

    @on(RecordChosen)
    def _record_chosen(self, message: RecordChosen) -> None:
        self.workspace.cursor = message.t_rel
        screen = self.main
        screen.query_one(Timeline).set_cursor(message.t_rel, post=False)
        screen.query_one(StatePanel).show(message.t_rel)
        if message.origin != "events":
            screen.query_one(EventsTable).show_seq(message.seq)

    @on(Timeline.LaneSelected)
    def _lane_selected(self, message: Timeline.LaneSelected) -> None:
        if message.run == self.workspace.active:
            self.main.query_one(StatePanel).select(message.entity)

    @on(EventsTable.OpenRecord)
    def _open_record(self, message: EventsTable.OpenRecord) -> None:
        self.push_screen(RecordDetail(self.workspace.runs[message.run], message.seq))

    def action_goto(self) -> None:
        def go(text: str | None) -> None:
            if text:
                self.main.query_one(Timeline).set_cursor(parse_duration(text))
        self.push_screen(PromptScreen("Go to a time after the start (e.g. 1.5s, 250ms)", "1.5s", time=True), go)

    # -- objects

    @on(ObjectSelected)
    def _object_selected(self, message: ObjectSelected) -> None:
        screen = self.main
        timeline = screen.query_one(Timeline)
        timeline.highlighted = message.entities
        for entity in sorted(message.entities):
            if timeline.select_entity(entity, self.workspace.active):
                break
        timeline.refresh()
        events = screen.query_one(EventsTable)
        events.set_filter(replace(events.filter, handles=message.handles, object_label=message.label))
        screen.update_titles()

    @on(ObjectCleared)
    def _object_cleared(self) -> None:
        screen = self.main
        timeline = screen.query_one(Timeline)
        timeline.highlighted = frozenset()
        timeline.refresh()
        events = screen.query_one(EventsTable)
        events.set_filter(replace(events.filter, handles=frozenset(), object_label=""))
        screen.update_titles()

    # -- filter and search

    def action_filter(self) -> None:
        events = self.main.query_one(EventsTable)

        def apply(flt: EventFilter | None) -> None:
            if flt is not None:
                events.set_filter(flt)
                self.main.update_titles()
        self.push_screen(FilterScreen(events.filter), apply)

    def action_search(self) -> None:
        events = self.main.query_one(EventsTable)

        def find(text: str | None) -> None:
            if text:
                events.focus()
                events.search(text)
        self.push_screen(PromptScreen("Search the events (n / N: next / previous match)", "REGISTER_GPU",
                                      events.search_text), find)

    # -- wedges

    def action_wedge(self, direction: int) -> None:
        run = self.workspace.run
        if not run.loaded:
            self.notify("The session model is still being built; wedges come with it.", severity="warning")
            return
        wedges = run.wedges()
        if not wedges:
            self.notify("No wedge found in this run.")
            return
        ws = self.workspace
        ws.wedge_index = (ws.wedge_index + direction) % len(wedges)
        wedge = wedges[ws.wedge_index]
        screen = self.main
        timeline = screen.query_one(Timeline)
        entity = run.lane_for_wedge(wedge)
        if entity is not None:
            timeline.select_entity(entity, ws.active)
        t_rel = run.wedge_time(wedge)
        timeline.set_cursor(t_rel, post=False)
        ws.cursor = t_rel
        events = screen.query_one(EventsTable)
        if wedge.seq is not None:
            events.show_seq(wedge.seq)
        else:
            events.follow_time(t_rel)
        screen.query_one(StatePanel).show(t_rel)
        screen.query_one(WedgePanel).reload()
        self.action_tab("tab-wedges")
        self.post_message(WedgeShown(ws.wedge_index, wedge))

    # -- focus, tabs, runs

    def action_show(self, widget_id: str) -> None:
        """Focus the timeline or the events table (which a narrow screen shows instead of the side tabs)."""
        if widget_id == "events":
            self.main.show_side(False)
        self.main.query_one(f"#{widget_id}").focus()

    def action_tab(self, tab: str) -> None:
        self.main.query_one(TabbedContent).active = tab
        self.main.show_side(True)

    def action_switch_run(self) -> None:
        ws = self.workspace
        ws.active = 1 - ws.active
        ws.wedge_index = -1
        screen = self.main
        events = screen.query_one(EventsTable)
        events.set_filter(EventFilter())
        screen.query_one(StatePanel).show(ws.cursor)
        screen.query_one(ObjectsTree).reload()
        screen.query_one(WedgePanel).reload()
        screen.update_titles()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide what does not apply now: run switching outside a diff, following outside --follow."""
        if action in ("switch_run",) or (action == "tab" and parameters == ("tab-diff",)):
            return self.workspace.is_diff
        if action == "toggle_follow":
            return self._followable
        return True

    @property
    def _followable(self) -> bool:
        return len(self.workspace.runs) == 1 and not self.workspace.runs[0].complete

    # -- help

    def action_help(self) -> None:
        areas = [("Everywhere", self.BINDINGS), ("Timeline", Timeline.BINDINGS), ("Events", EventsTable.BINDINGS),
                 ("Objects", ObjectsTree.BINDINGS), ("Field tree + hex", RecordDetail.BINDINGS),
                 ("Filter", FilterScreen.BINDINGS)]
        self.push_screen(HelpScreen(areas, dict(self.workspace.run.services.symbols)))

    def on_unmount(self) -> None:
        for run in self.workspace.runs:
            run.close()
        gc.unfreeze()  # what the app kept out of collections, back in: a process that goes on collects it


def keep_out_of_collections() -> None:
    """Every object alive now out of the collector's generations (``gc.freeze``), for the app's lifetime: no
    full collection walks them again.  At 1M records one walked the startup heap (modules, textual) on the UI
    thread while the worker loaded the model (0.09 s CPU of the 0.95 s between first paint and the lanes, the
    cache warm), and later ones walked the model too (0.16-0.37 s each).  Only what the app keeps for good:
    a cycle among them is never collected (refcounts still free the rest)."""
    gc.freeze()
