"""Which events the table shows: a filter typed in the filter screen or set by selecting an object.

The cheap part of a filter (pids, sources) goes to the trace reader as a
header filter, and a client narrows the scan to that client's records; only
what needs a decoded row (operation, status, text, channel, object) looks at
rows.  Parsing turns what a person typed into sets and says clearly what it
could not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from rmtrace.tui.view import EventRow

from rmtrace.errors import RmtraceError
from rmtrace.record import Source

STATUS_WORDS: Mapping[str, Callable[[EventRow], bool]] = {
    "error": lambda row: row.error,
    "ok": lambda row: not row.error and not row.in_flight,
    "in_flight": lambda row: row.in_flight,
    "in flight": lambda row: row.in_flight,
}
"""Status words with a meaning of their own; anything else matches the status text."""

FIELDS = ("pid", "client", "channel", "source", "operation", "status", "text")
"""The filter screen's inputs, in order."""


@dataclass(frozen=True)
class EventFilter:
    pids: frozenset[int] = frozenset()
    clients: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    """Channel ids (``c1/ch0``) or handles (``0xcaf000d4``)."""
    sources: frozenset[int] = frozenset()
    operation: str = ""
    status: str = ""
    text: str = ""
    handles: frozenset[int] = field(default=frozenset())
    """Set from the objects tree: a row must name one of these handles."""
    object_label: str = ""

    @property
    def empty(self) -> bool:
        return self == EventFilter()

    @property
    def needs_rows(self) -> bool:
        """Whether matching needs decoded rows, not just record headers."""
        return bool(self.channels or self.operation or self.status or self.text or self.handles)

    def describe(self) -> str:
        parts = [
            ("pid", ",".join(map(str, sorted(self.pids)))),
            ("client", ",".join(sorted(self.clients))),
            ("channel", ",".join(sorted(self.channels))),
            ("source", ",".join(Source(s).name.lower() for s in sorted(self.sources))),
            ("operation", self.operation), ("status", self.status), ("text", repr(self.text) if self.text else ""),
            ("object", self.object_label),
        ]
        return ", ".join(f"{k} {v}" for k, v in parts if v) or "none"

    def as_fields(self) -> dict[str, str]:
        """The filter screen's input values for this filter."""
        return {
            "pid": ",".join(map(str, sorted(self.pids))), "client": ",".join(sorted(self.clients)),
            "channel": ",".join(sorted(self.channels)),
            "source": ",".join(Source(s).name.lower() for s in sorted(self.sources)),
            "operation": self.operation, "status": self.status, "text": self.text,
        }

    @classmethod
    def parse(cls, values: Mapping[str, str], keep: EventFilter | None = None) -> EventFilter:
        """From the filter screen's inputs; ``keep`` carries an object selection over."""
        base = keep or EventFilter()
        return replace(
            base,
            pids=_ints(values.get("pid", ""), "pid"),
            clients=_words(values.get("client", "")),
            channels=_channels(values.get("channel", "")),
            sources=_sources(values.get("source", "")),
            operation=values.get("operation", "").strip(),
            status=values.get("status", "").strip().lower(),
            text=values.get("text", "").strip(),
        )

    def header_matches(self, pid: int, source: int) -> bool:
        return (not self.pids or pid in self.pids) and (not self.sources or source in self.sources)

    def row_matches(self, row: EventRow, channel_handles: frozenset[int] = frozenset()) -> bool:
        """Everything but the header part (callers check that first, cheaply)."""
        if self.clients and row.client not in self.clients:
            return False
        if channel_handles and not (row.handles & channel_handles):
            return False
        if self.handles and not (row.handles & self.handles):
            return False
        if self.operation and not _op_matches(self.operation, row):
            return False
        if self.status:
            test = STATUS_WORDS.get(self.status)
            if not (test(row) if test else self.status in row.status.lower()):
                return False
        return not self.text or self.text.lower() in row.text.lower()


def _op_matches(wanted: str, row: EventRow) -> bool:
    return wanted.lower() in row.operation.lower()


def _split(text: str) -> Iterable[str]:
    return (p.strip() for p in text.split(",") if p.strip())


def _words(text: str) -> frozenset[str]:
    return frozenset(_split(text))


def _ints(text: str, what: str) -> frozenset[int]:
    try:
        return frozenset(int(p, 0) for p in _split(text))
    except ValueError:
        raise RmtraceError(f"{what}: not a list of numbers: {text!r}") from None


def _channels(text: str) -> frozenset[str]:
    out = set()
    for part in _split(text):
        if "/" not in part:
            try:
                int(part, 0)
            except ValueError:
                raise RmtraceError(f"channel: {part!r} is neither a channel id (c1/ch0) nor a handle (0xcaf000d4)") from None
        out.add(part)
    return frozenset(out)


def _sources(text: str) -> frozenset[int]:
    out = set()
    for part in _split(text):
        try:
            out.add(int(Source[part.upper()]))
        except KeyError:
            names = ", ".join(s.name.lower() for s in Source)
            raise RmtraceError(f"source: unknown {part!r} (one of: {names})") from None
    return frozenset(out)
