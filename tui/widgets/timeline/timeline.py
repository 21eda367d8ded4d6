"""The timeline: one lane per channel, rank and client, time left to right, a cursor.

Drawn line by line (Textual's line API): a ruler, the lanes, and a status
line saying what the selected lane is doing at the cursor.  Each column shows
the most severe state in its stretch of time as the state's symbol on its
colour, so a lane reads without colour and a brief ``wedged`` survives any
zoom.  A call or wait still open at the trace's end ends in ``▶``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rmtrace.tui.fit import elide, elide_middle
from rmtrace.tui.messages import CursorMoved
from rmtrace.tui.states import OPEN_STATES, look
from rmtrace.tui.widgets.timeline.rows import TimelineRow, build_rows, find_row
from rmtrace.tui.widgets.timeline.scale import LaneIndex, fit, ruler
from rmtrace.tui.workspace import Workspace
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from rmtrace.timefmt import format_duration, format_offset

LABEL_MIN, LABEL_MAX = 14, 30
CURSOR = Style(reverse=True)
SELECTED = Style(bold=True, reverse=True)
HIGHLIGHT = Style(color="yellow", bold=True)
GROUP = Style(bold=True)
DIM = Style(dim=True)
MARKS = {"wedge": ("W", Style(color="bright_white", bgcolor="red", bold=True)),
         "diverge": ("≠", Style(color="bright_white", bgcolor="magenta", bold=True))}
"""Ruler marks: where wedges were found, where a diff's runs part."""


class Timeline(Widget, can_focus=True):
    """Lanes over time for every run of the workspace."""

    BINDINGS = [
        Binding("left", "move(-1)", "Cursor ◀", show=False),
        Binding("right", "move(1)", "Cursor ▶", show=False),
        Binding("shift+left", "move(-10)", "Cursor ◀◀", show=False),
        Binding("shift+right", "move(10)", "Cursor ▶▶", show=False),
        Binding("up", "lane(-1)", "Lane up", show=False),
        Binding("down", "lane(1)", "Lane down", show=False),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in"),
        Binding("minus", "zoom(2)", "Zoom out"),
        Binding("0", "fit", "Fit"),
        Binding("left_square_bracket", "pan(-0.5)", "Pan ◀", show=False),
        Binding("right_square_bracket", "pan(0.5)", "Pan ▶", show=False),
        Binding("n", "next_event", "Next event"),
        Binding("p", "previous_event", "Prev event"),
        Binding("home", "edge(0)", "Start", show=False),
        Binding("end", "edge(1)", "End", show=False),
        Binding("space,enter", "fold", "Fold group"),
    ]

    DEFAULT_CSS = """
    Timeline { height: 1fr; }
    """

    @dataclass
    class LaneSelected(Message):
        """The selected lane changed (its entity; None on a group heading)."""

        entity: str | None
        run: int

    cursor: reactive[int] = reactive(0, init=False)
    selected: reactive[int] = reactive(0, init=False)

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.workspace = workspace
        self.collapsed: frozenset[str] = frozenset()
        self.highlighted: frozenset[str] = frozenset()
        self.rows: list[TimelineRow] = []
        self._longest = 1
        """The longest label of ``rows`` and a space (``rebuild``)."""
        self.window = fit(workspace.end_rel, 40)
        self.top = 0
        self._fitted = True
        self._index_cache: dict = {}
        self._strips: LRUCache[tuple, Strip] = LRUCache(512)
        self._drag_from: int | None = None
        self._dragged = False
        self.rebuild()

    # -- data

    def rebuild(self) -> None:
        """Re-read the lanes (a model was attached, a group folded)."""
        self.rows = build_rows(self.workspace, self.collapsed, self._index_cache)
        # the longest label, once per rebuild: every lane drawn asks for the label width, and a 1M-record
        # trace has ~12,500 lanes (a max over them per line drawn was a fifth of a second of the UI thread)
        self._longest = max((len(row.label) for row in self.rows), default=0) + 1
        width = self.plot_width if self.size.width else self.window.width  # labels set the plot's width
        self.window = fit(self.workspace.end_rel, width) if self._fitted else self.window.resized(width)
        self.selected = min(self.selected, max(0, len(self.rows) - 1))
        self._strips.clear()
        self.refresh()

    def grew(self) -> None:
        """The run got longer (a followed trace): a fitted view keeps showing all of it."""
        if self._fitted:
            self.window = fit(self.workspace.end_rel, self.plot_width)
            self._strips.clear()
        self.refresh()

    @property
    def label_width(self) -> int:
        """As wide as the longest label, within LABEL_MIN..LABEL_MAX and 3/10 of the widget."""
        return max(LABEL_MIN, min(LABEL_MAX, self.size.width * 3 // 10, self._longest))

    @property
    def plot_width(self) -> int:
        return max(1, self.size.width - self.label_width)

    @property
    def lane_rows(self) -> int:
        """Screen lines for lanes: all but the ruler and the status line."""
        return max(1, self.size.height - 2)

    @property
    def selected_row(self) -> TimelineRow | None:
        return self.rows[self.selected] if 0 <= self.selected < len(self.rows) else None

    def on_resize(self, event: events.Resize) -> None:
        if self._fitted:
            self.window = fit(self.workspace.end_rel, self.plot_width)
        else:
            self.window = self.window.resized(self.plot_width)
        self._strips.clear()

    # -- moving

    def set_cursor(self, t_rel: int, *, post: bool = True) -> None:
        t_rel = max(0, min(t_rel, self.workspace.end_rel))
        if t_rel != self.cursor:
            self.cursor = t_rel
            if post:
                self.post_message(CursorMoved(t_rel, "timeline"))
        self.window = self.window.showing(self.cursor, self._total)
        self.refresh()

    def select_entity(self, entity: str, run: int | None = None) -> bool:
        """Select the lane of ``entity`` (unfolding its group); False when no lane has it."""
        group = next((lane.group for r in self.workspace.runs for lane in r.lanes() if lane.entity == entity), None)
        if group is not None and group in self.collapsed:
            self.collapsed = self.collapsed - {group}
            self.rebuild()
        index = find_row(self.rows, entity, run)
        if index is None:
            return False
        self.selected = index
        return True

    @property
    def _total(self) -> int:
        return max(self.workspace.end_rel, self.window.width)

    def watch_cursor(self) -> None:
        self.refresh()

    def watch_selected(self, value: int) -> None:
        if value < self.top:
            self.top = value
        elif value >= self.top + self.lane_rows:
            self.top = value - self.lane_rows + 1
        row = self.selected_row
        self.post_message(self.LaneSelected(row.entity if row else None, row.run if row else 0))
        self.refresh()

    def action_move(self, cols: int) -> None:
        step = max(1, round(self.window.ns_per_col * abs(cols)))
        self.set_cursor(self.cursor + (step if cols > 0 else -step))

    def action_lane(self, delta: int) -> None:
        if self.rows:
            self.selected = max(0, min(len(self.rows) - 1, self.selected + delta))

    def action_zoom(self, factor: float) -> None:
        self._fitted = False
        self.window = self.window.zoomed(factor, self.cursor, self._total)
        self._strips.clear()
        self.refresh()

    def action_fit(self) -> None:
        self._fitted = True
        self.window = fit(self.workspace.end_rel, self.plot_width)
        self._strips.clear()
        self.refresh()

    def action_pan(self, screens: float) -> None:
        self._fitted = False
        self.window = self.window.panned(screens * self.window.width, self._total)
        self._strips.clear()
        self.refresh()

    def action_edge(self, end: int) -> None:
        self.set_cursor(self.workspace.end_rel if end else 0)

    def action_next_event(self) -> None:
        self._jump(LaneIndex.next_change)

    def action_previous_event(self) -> None:
        self._jump(LaneIndex.previous_change)

    def _jump(self, how) -> None:
        row = self.selected_row
        if row is None or row.index is None:
            self.notify("Select a lane (↑/↓) to jump between its events.", severity="warning")
            return
        t = how(row.index, self.cursor)
        if t is None:
            self.notify(f"No more events on {row.label.strip()}.", markup=False)
            return
        self.set_cursor(t)

    def action_fold(self) -> None:
        row = self.selected_row
        if row is None:
            return
        self.collapsed = self.collapsed ^ {row.group}
        self.rebuild()
        self.selected = next(i for i, r in enumerate(self.rows) if r.is_group and r.group == row.group)

    # -- mouse: click moves the cursor, wheel zooms over the lanes (scrolls over the labels), drag pans

    def _time_at_x(self, x: int) -> int:
        return self.window.time_at(max(0, x - self.label_width))

    def _row_at_y(self, y: int) -> int | None:
        if 1 <= y <= self.lane_rows and self.top + y - 1 < len(self.rows):
            return self.top + y - 1
        return None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        at = event.get_content_offset(self)
        self._dragged = False
        if at is not None and at.x >= self.label_width:
            self._drag_from = at.x
            self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        x = event.get_content_offset_capture(self).x
        if self._drag_from is not None and event.button and x != self._drag_from:
            self.action_pan((self._drag_from - x) / max(1, self.window.width))
            self._drag_from, self._dragged = x, True

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag_from is not None:
            self.release_mouse()
            self._drag_from = None

    def on_click(self, event: events.Click) -> None:
        at = event.get_content_offset(self)
        if self._dragged or at is None:
            self._dragged = False
            return
        row = self._row_at_y(at.y)
        if row is not None:
            self.selected = row
            if at.x < self.label_width and self.rows[row].is_group:
                self.action_fold()
                return
        if at.x >= self.label_width:
            self.set_cursor(self._time_at_x(at.x))

    def _wheel(self, event: events.MouseEvent, zoom: float, lanes: int) -> None:
        event.stop()
        at = event.get_content_offset_capture(self)
        if at.x < self.label_width:
            self.top = max(0, min(max(0, len(self.rows) - self.lane_rows), self.top + lanes))
            self.refresh()
        elif event.shift:
            self.action_pan(lanes * 0.1)
        else:
            self._fitted = False
            self.window = self.window.zoomed(zoom, self._time_at_x(at.x), self._total)
            self._strips.clear()
            self.refresh()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 0.8, -1)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 1.25, 1)

    def on_mouse_scroll_left(self, event: events.MouseScrollLeft) -> None:
        event.stop()
        self.action_pan(-0.1)

    def on_mouse_scroll_right(self, event: events.MouseScrollRight) -> None:
        event.stop()
        self.action_pan(0.1)

    # -- drawing

    def status_text(self, width: int = 1_000) -> str:
        """The last line: cursor time, the selected lane's state there, the zoom; fitted to ``width``
        (the zoom goes first, then the end of the state's detail)."""
        cursor = f"cursor {format_offset(self.cursor)}"
        zoom = f"{format_duration(self.window.span)}/screen"
        lane = None
        row = self.selected_row
        if row is not None and row.lane is not None and row.index is not None:
            # a state still open at the run's end covers the end itself
            at = min(self.cursor, max(0, self.workspace.runs[row.run].end_rel - 1))
            seg = row.index.state_in(at, at + 1)
            tag = self.workspace.tag(row.run)
            name = f"{tag + ' ' if tag else ''}{row.lane.label}"
            if seg is None:
                lane = f"{name}: –"
            else:
                detail = row.lane.segments[row.index.order[seg]][3]
                lane = f"{name}: {row.index.states[seg]}" + (f" ({detail})" if detail else "")
        elif not any(run.loaded for run in self.workspace.runs):
            lane = "building the session model…"
        sep = "  │  "
        parts = [cursor, *([lane] if lane else []), zoom]
        if len(sep.join(parts)) > width:
            parts = [cursor, *([lane] if lane else [])]
        return elide(sep.join(parts), width)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._ruler_strip(width)
        if y == self.size.height - 1:
            return Strip([Segment(self.status_text(width).ljust(width), DIM)], width)
        index = self._row_at_y(y)
        if index is None:
            return Strip.blank(width)
        row = self.rows[index]
        cursor_col = self.window.column(self.cursor)
        key = (index, id(row), self.window, cursor_col, index == self.selected,
               row.entity in self.highlighted, width, self.has_focus, tuple(r.generation for r in self.workspace.runs))
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._row_strip(row, index == self.selected, cursor_col, width)
        return strip

    def _label(self, row: TimelineRow, selected: bool) -> Segment:
        # a lane keeps its engine (the end), a heading its client and pid (the start)
        fitted = elide(row.label, self.label_width - 1) if row.is_group else elide_middle(row.label, self.label_width - 1)
        text = fitted.ljust(self.label_width)
        style = GROUP if row.is_group else Style()
        if row.entity is not None and row.entity in self.highlighted:
            style += HIGHLIGHT
            text = ("*" + text[1:]) if text.startswith(" ") else text
        if selected:
            style += SELECTED if self.has_focus else Style(bold=True, underline=True)
        return Segment(text, style)

    def _row_strip(self, row: TimelineRow, selected: bool, cursor_col: int, width: int) -> Strip:
        segments = [self._label(row, selected)]
        if row.index is None:
            cells = ["─" if c != cursor_col else "│" for c in range(self.window.width)]
            segments.append(Segment("".join(cells), DIM))
            return Strip(segments, width).crop(0, width)
        symbols = self.workspace.runs[row.run].services.symbols
        end_col = self.window.column(self.workspace.runs[row.run].end_rel)
        for col, seg in enumerate(row.index.cells(self.window)):
            if seg is None:
                char, style = " ", Style()
            else:
                state = row.index.states[seg]
                char = symbols.get(state, "?")
                if col == end_col and state in OPEN_STATES and row.index.ends[seg] >= self.workspace.runs[row.run].end_rel:
                    char = "▶"
                style = Style(color="bright_white", bgcolor=look(state).colour)
            if col == cursor_col:
                style += CURSOR
            segments.append(Segment(char, style))
        return Strip(Segment.simplify(segments), width).crop(0, width)

    def _ruler_strip(self, width: int) -> Strip:
        marks: dict[int, str] = {}
        for kind, t in self._marks():
            marks.setdefault(self.window.column(t), kind)
        line = list(ruler(self.window, {col: MARKS[kind][0] for col, kind in marks.items()}))
        styles = [MARKS[marks[col]][1] if col in marks else DIM for col in range(len(line))]
        cursor_col = self.window.column(self.cursor)
        if 0 <= cursor_col < len(line):  # keep a tick label readable: mark the cursor by style there
            if line[cursor_col] in " |":
                line[cursor_col] = "▼"
            styles[cursor_col] += CURSOR
        title = f"time {format_duration(self.window.span)}"[: self.label_width - 1].ljust(self.label_width)
        segments = [Segment(title, Style(bold=True))] + [Segment(c, s) for c, s in zip(line, styles)]
        return Strip(Segment.simplify(segments), width).crop(0, width)

    def _marks(self) -> list[tuple[str, int]]:
        marks = []
        for run in self.workspace.runs:
            for wedge in run.wedges():
                marks.append(("wedge", run.wedge_time(wedge)))
        div = self.workspace.divergence
        if div is not None:
            marks.extend(("diverge", t) for t in div.t_rel if t is not None)
        return marks

