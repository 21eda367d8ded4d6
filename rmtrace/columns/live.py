"""The session model of a trace still being recorded, folded as it grows (``rmtrace tui --follow``).

``LiveSession(path).update()`` reads the chunks the recorder added since the
last update into the call table (``CallTableBuilder.update``), folds the rows
that became final (``TableFold.advance``) into the same fold state, and gives
a ``SessionModel`` of everything so far: an update costs what arrived, not the
whole trace.  Calls still open are held back as ``pair_calls`` holds them
(a window of records), and folded in flight at the first update and whenever
the trace did not grow since the last; one that ends later then has its end
folded on its own.  Once the recorder writes the trace's index, the rest is
folded as it stands.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from rmtrace.decoders import DecoderSet, decoders_for

from rmtrace.columns.fold import TableFold
from rmtrace.columns.table import CallTableBuilder
from rmtrace.session.fold import Folder
from rmtrace.session.model import SessionModel, _mark_open_calls
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader, is_finished


class TransitionLog(Timeline):
    """Where a growing fold's transitions accumulate; each update freezes a copy into its model's timeline."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, int, str, str, Any]] = []

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        self.log.append((t_ns, seq, entity, attr, value))


class LiveSession:
    """A growing trace and the fold state its updates continue."""

    def __init__(self, path: str | os.PathLike, decoders: DecoderSet | None = None,
                 snapshot_every: int = 20_000) -> None:
        self.path = os.fspath(path)
        self.reader = TraceReader(self.path)
        self.decoders = decoders or decoders_for(self.reader)
        ids = client_ids(self.reader.meta)
        self.builder = CallTableBuilder(self.reader, self.decoders, client_ids=ids)
        self.log = TransitionLog()
        self.folder = Folder(self.decoders, self.log, ids)
        self.fold = TableFold(self.folder, self.reader)
        self.snapshot_every = snapshot_every
        self.final = False
        self._updates = 0

    def update(self) -> SessionModel:
        """Fold what arrived since the last update; the model of the whole trace so far."""
        grew = self.reader.refresh() > 0
        grew = self.builder.update() > 0 or grew
        table = self.builder.table()
        self.final = self.final or is_finished(self.path)
        if not self.final or self.fold.next_row < len(table):  # the first update shows the trace as it stands
            self.fold.advance(table, final=self.final, flush=not grew or not self._updates)
        self._updates += 1
        span = self.reader.time_span or (0, 0)
        timeline = Timeline(self.snapshot_every)
        for transition in self.log.log:
            timeline.set(*transition)
        _mark_open_calls(table.infos_at(table.open_rows()), timeline)
        timeline.freeze(span[1])
        return SessionModel(self.reader, self.decoders, _snapshot(self.folder), timeline, span[0], span[1], table)


def _snapshot(folder: Folder) -> Folder:
    """The fold's results as they are now, in containers of their own (later updates change the fold's)."""
    out = copy.copy(folder)
    out.processes, out.clients, out.objects = dict(folder.processes), dict(folder.clients), dict(folder.objects)
    out.object_list, out.channels, out.ranks = list(folder.object_list), dict(folder.channels), dict(folder.ranks)
    out.gsp, out.stray_frees, out.lost = list(folder.gsp), list(folder.stray_frees), list(folder.lost)
    return out

