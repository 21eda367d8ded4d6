"""The events table: every record of the active run, one line each, drawn only where visible.

A ScrollView over a virtual height of one line per record (or per match of
the filter): ``render_line`` asks the run for the rows on screen, and rendered
lines sit in an LRU cache whose key holds everything that changes them
(toolong's pattern).  A filter scan or a search runs in a cancellable worker
thread and reports by messages; the table shows matches as they arrive.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.messages import RecordChosen
from rmtrace.tui.widgets.events.columns import GAP, cell_text, fit_columns
from rmtrace.tui.workspace import Workspace
from textual import events, on, work
from textual.binding import Binding
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import get_current_worker

from rmtrace.timefmt import format_offset

HEADER = Style(bold=True, underline=True)
POINTER = Style(reverse=True)
POINTER_BLURRED = Style(bold=True, underline=True)
ERROR = Style(color="red")
IN_FLIGHT = Style(color="dark_orange", bold=True)


class EventsTable(ScrollView, can_focus=True):
    """Rows of the active run, filtered or not, with a pointer that follows the time cursor."""

    BINDINGS = [
        Binding("up", "pointer(-1)", "Up", show=False),
        Binding("down", "pointer(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
        Binding("enter", "open", "Fields + hex"),
        Binding("n", "search_again(1)", "Next match", show=False),
        Binding("N", "search_again(-1)", "Prev match", show=False),
        Binding("c", "clear_filter", "Clear filter"),
    ]

    DEFAULT_CSS = """
    EventsTable { height: 1fr; scrollbar-size-vertical: 1; overflow-x: hidden; }
    """

    @dataclass
    class OpenRecord(Message):
        run: int
        seq: int

    @dataclass
    class Matches(Message):
        """A filter scan's batch: matching sequence numbers and how far it got."""

        token: int
        seqs: list[int]
        looked: int
        total: int
        done: bool
        end: int = 0
        """On the last batch: the scan covered records before this sequence number."""

    @dataclass
    class SearchDone(Message):
        token: int
        text: str
        index: int | None

    pointer: reactive[int] = reactive(0, init=False, always_update=True)

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.workspace = workspace
        self.filter = EventFilter()
        self.matches: array | None = None
        """Sequence numbers shown when filtered; None shows every record."""
        self.scan_state = ""
        self.search_text = ""
        self._token = 0
        self._scanned_to = 0
        self._strips: LRUCache[tuple, Strip] = LRUCache(1024)
        self._moved_by_user = False
        self._update_size()

    # -- rows

    @property
    def row_count(self) -> int:
        return self.workspace.run.record_count if self.matches is None else len(self.matches)

    def seq_of(self, index: int) -> int:
        return index if self.matches is None else self.matches[index]

    def index_of_seq(self, seq: int) -> int:
        """The row of ``seq``, or of the first shown record after it (the last row if none)."""
        if self.matches is None:
            return min(seq, max(0, self.row_count - 1))
        return min(bisect.bisect_left(self.matches, seq), max(0, len(self.matches) - 1))

    @property
    def pointer_seq(self) -> int | None:
        return self.seq_of(self.pointer) if self.row_count else None

    def _update_size(self) -> None:
        self.virtual_size = Size(0, self.row_count + 1)

    def reset(self) -> None:
        """The active run changed or its model arrived: draw everything again."""
        self._strips.clear()
        self._update_size()
        self._changed()

    def follow_time(self, t_rel: int) -> None:
        """Put the pointer on the first shown record at or after ``t_rel``."""
        if self.row_count:
            self._set_pointer(self.index_of_seq(self.workspace.run.seq_at(t_rel)), post=False)

    def show_seq(self, seq: int) -> None:
        if self.row_count:
            self._set_pointer(self.index_of_seq(seq), post=False)

    def grew(self, added: int) -> None:
        """A followed trace has ``added`` more records: keep showing the end if we were there."""
        if self.matches is None:
            at_end = self.pointer >= self.row_count - 1 - added
            self._update_size()
            if at_end or self.workspace.follow:
                self._set_pointer(self.row_count - 1, post=False)
        elif not self.scan_state:
            self._scan_more()
        self._changed()

    # -- moving

    def _set_pointer(self, index: int, *, post: bool = True) -> None:
        index = max(0, min(index, self.row_count - 1))
        self._moved_by_user = self._moved_by_user or post
        self.pointer = index
        self._reveal()
        if post and self.row_count:
            seq = self.seq_of(index)
            run = self.workspace.run
            self.post_message(RecordChosen(self.workspace.active, seq, run.t_rel_of(seq), "events"))

    def _reveal(self) -> None:
        """Scroll just enough that the pointer's row is on screen (under the header)."""
        height = max(1, self.scrollable_content_region.height - 1)
        top = self.scroll_offset.y
        if self.pointer < top:
            self.scroll_to(y=self.pointer, animate=False, immediate=True)
        elif self.pointer >= top + height:
            self.scroll_to(y=self.pointer - height + 1, animate=False, immediate=True)

    def watch_pointer(self) -> None:
        self.refresh()

    def action_pointer(self, delta: int) -> None:
        self._set_pointer(self.pointer + delta)

    def action_page(self, pages: int) -> None:
        self._set_pointer(self.pointer + pages * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, end: int) -> None:
        self._set_pointer(self.row_count - 1 if end else 0)

    def action_open(self) -> None:
        if self.row_count:
            self.post_message(self.OpenRecord(self.workspace.active, self.seq_of(self.pointer)))

    def on_click(self, event: events.Click) -> None:
        at = event.get_content_offset(self)
        if at is None or at.y < 1:
            return
        index = self.scroll_offset.y + at.y - 1
        if index < self.row_count:
            self._set_pointer(index)

    # -- filter

    def set_filter(self, flt: EventFilter) -> None:
        self._token += 1
        self.filter = flt
        self._strips.clear()
        self._moved_by_user = False
        if flt.empty:
            self.matches = None
            self.scan_state = ""
            self._update_size()
            self.follow_time(self.workspace.cursor)
        else:
            self.matches = array("q")
            self._scanned_to = 0
            self._update_size()
            self.pointer = 0
            self._scan_more()
        self._changed()

    def action_clear_filter(self) -> None:
        self.set_filter(EventFilter())

    def _scan_more(self) -> None:
        """Scan what the filter has not seen yet (the whole run, or what a followed trace added)."""
        run = self.workspace.run
        if self._scanned_to < run.record_count:
            self.scan_state = "scanning…"
            self._scan(self.filter, self._token, self._scanned_to, run.record_count)

    @work(thread=True, exclusive=True, group="events-filter")
    def _scan(self, flt: EventFilter, token: int, start: int, end: int) -> None:
        worker = get_current_worker()
        for found, looked in self.workspace.run.scan(flt, start, end, stop=lambda: worker.is_cancelled):
            if worker.is_cancelled:
                return
            self.post_message(self.Matches(token, found, looked, end - start, False))
        self.post_message(self.Matches(token, [], end - start, end - start, True, end))

    @on(Matches)
    def _got_matches(self, message: Matches) -> None:
        message.stop()
        if message.token != self._token or self.matches is None:
            return
        self.matches.extend(message.seqs)
        self.scan_state = "" if message.done else f"scanning {message.looked * 100 // max(1, message.total)}%"
        self._update_size()
        if message.done:
            self._scanned_to = message.end
            if not self._moved_by_user:
                self.follow_time(self.workspace.cursor)
            self._scan_more()
        self._changed()

    # -- search

    def search(self, text: str, direction: int = 1) -> None:
        self.search_text = text
        self._token += 1
        start = self.pointer + direction
        indices = range(start, self.row_count) if direction > 0 else range(start, -1, -1)
        self.scan_state = f"searching {text!r}…"
        self._search(text, [self.seq_of(i) for i in indices] if self.matches is not None else indices,
                     start, direction, self._token)
        self._changed()

    def action_search_again(self, direction: int) -> None:
        if not self.search_text:
            self.notify("Nothing to search for yet: press / first.")
            return
        self.search(self.search_text, direction)

    @work(thread=True, exclusive=True, group="events-search")
    def _search(self, text: str, seqs, start: int, direction: int, token: int) -> None:
        worker = get_current_worker()
        found = self.workspace.run.find_text(text, seqs, stop=lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.post_message(self.SearchDone(token, text, None if found is None else start + direction * found))

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        message.stop()
        if message.token != self._token:
            return
        self.scan_state = ""
        if message.index is None:
            self.notify(f"{message.text!r} not found.", severity="warning", markup=False)
        else:
            self._set_pointer(message.index)
        self._changed()

    # -- drawing

    def _changed(self) -> None:
        """What the table shows changed: new title, redraw."""
        self.show_title()

    def show_title(self) -> None:
        """The title as plain text: it holds what a person typed (a filter, a search), never markup."""
        self.border_title = Content(self.title())

    def title(self) -> str:
        run = self.workspace.run
        tag = self.workspace.tag(self.workspace.active)
        what = f"{self.row_count:,} of {run.record_count:,}" if self.matches is not None else f"{run.record_count:,}"
        parts = [f"Events{' ' + tag if tag else ''} ({what})"]
        if not self.filter.empty:
            parts.append(f"filter: {self.filter.describe()}")
        if self.scan_state:
            parts.append(self.scan_state)
        return " · ".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        run = self.workspace.run
        columns = fit_columns(width, len(format_offset(run.end_rel)))
        if y == 0:
            text = (" " * GAP).join(cell_text(c, c.title, w) for c, w in columns)
            return Strip([Segment(text[:width].ljust(width), HEADER)], width)
        index = self.scroll_offset.y + y - 1
        if index >= self.row_count:
            return Strip.blank(width)
        seq = self.seq_of(index)
        key = (self.workspace.active, seq, width, index == self.pointer, self.has_focus, run.generation)
        strip = self._strips.get(key)
        if strip is None:
            row = run.row(seq)
            text = (" " * GAP).join(cell_text(c, c.cell(row), w) for c, w in columns)
            style = IN_FLIGHT if row.in_flight else ERROR if row.error else Style()
            if index == self.pointer:
                style += POINTER if self.has_focus else POINTER_BLURRED
            strip = self._strips[key] = Strip([Segment(text[:width].ljust(width), style)], width)
        return strip

    def on_resize(self) -> None:
        self._strips.clear()
        self._update_size()
        self._reveal()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
