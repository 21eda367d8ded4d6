"""Which calls a view wants: by operation name, status, failure, handle.

Header filters (pid, source, time range) work on raw records before any
decoding (``rmtrace.trace.RecordFilter``); these work on what the decoders
say, each at the cheapest level that can answer: names at the name level
(a peek, no params parsed), status at the call level, handles at full depth.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from rmtrace.decoders.base import Decoded, Label, Level
from rmtrace.decoders.parse import handle_values


@dataclass(frozen=True)
class CallFilter:
    """Globs over names (``RM_CONTROL``, ``NV2080_CTRL_CMD_GPU_*``, ``UVM_REGISTER_*``) and statuses,
    failures only, handles; empty means any."""

    names: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    failed: bool = False
    handles: frozenset[int] = frozenset()

    @property
    def level(self) -> Level:
        """The decode depth the status and handle tests need."""
        if self.handles:
            return Level.FULL
        return Level.CALL if self.statuses or self.failed else Level.NAME

    def wants_label(self, label: Label) -> bool:
        if not self.names:
            return True
        return any(fnmatchcase(label.name, p) or (label.detail is not None and fnmatchcase(label.detail, p))
                   for p in self.names)

    def wants(self, d: Decoded) -> bool:
        if self.failed and d.ok is not False:
            return False
        if self.statuses and not _status_matches(d, self.statuses):
            return False
        return not self.handles or bool(self.handles & set(all_handles(d)))


def status_number(pattern: str) -> int | None:
    """The status a ``--status`` pattern names by number (0x0, -22), or None: the pattern is a glob on names."""
    try:
        return int(pattern, 0)
    except ValueError:
        return None


def _status_matches(d: Decoded, patterns: Iterable[str]) -> bool:
    for p in patterns:
        if d.status_name is not None and fnmatchcase(d.status_name, p):
            return True
        if d.status is not None and d.status == status_number(p):
            return True
    return False


def all_handles(d: Decoded) -> set[int]:
    """Every handle a decoded call names: its summary handles and every handle member of its buffers."""
    found = set(d.handles.values())
    for buf in d.buffers:
        if buf.layout is not None and buf.value is not None and hasattr(buf.value, "items"):
            found.update(handle_values(buf.layout, buf.value, buf.layouts or {}))
    return found
