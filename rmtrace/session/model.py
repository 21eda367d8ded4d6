"""``SessionModel``: a trace folded into state over time; ``load_session`` builds one.

The whole trace is folded once, streaming (records are not kept, only what
they changed); after that every question ("state at t", "history of channel
X", "which client is record N") is answered from memory.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.session.entities import (
    CallInfo,
    Channel,
    Client,
    GspExchange,
    Lane,
    LaneState,
    Process,
    Rank,
    RmObject,
    State,
    Transition,
)
from rmtrace.session.fold import Folder
from rmtrace.session.timeline import Timeline
from rmtrace.trace import Recovery, TraceReader

LIVE = "live"
"""``Recovery.reason`` of a trace still being written (read as it grows): not cut, only unfinished."""


class SessionModel:
    """Processes, clients, RM objects, channels, ranks, calls and their history."""

    def __init__(self, reader: TraceReader, decoders: DecoderSet, folder: Folder, timeline: Timeline,
                 start_ns: int, end_ns: int) -> None:
        self.reader = reader
        self.meta: Mapping[str, Any] = reader.meta
        self.decoders = decoders
        self.start_ns, self.end_ns = start_ns, end_ns
        self.processes: Mapping[int, Process] = folder.processes
        self.clients: tuple[Client, ...] = tuple(folder.clients.values())
        self._clients = folder.clients
        self.objects: Mapping[tuple[str, int], RmObject] = folder.objects
        self.object_list: Sequence[RmObject] = folder.object_list
        self.channels: Mapping[str, Channel] = folder.channels
        self.ranks: Mapping[str, Rank] = folder.ranks
        self.calls: Sequence[CallInfo] = folder.calls
        self.gsp: Sequence[GspExchange] = folder.gsp
        self.stray_frees: Sequence[CallInfo] = folder.stray_frees
        self.stop_reason = folder.stop_reason
        self.lost = folder.lost
        self.marked_in_flight: frozenset[tuple[int, int]] = frozenset(folder.marked_in_flight)
        self.recovery: Recovery = reader.recovery
        self.timeline = timeline
        pairs = sorted(folder.seq_client)
        self._seqs = [s for s, _ in pairs]
        self._seq_clients = [c for _, c in pairs]
        self._by_client: dict[str, list[int]] = {}
        for seq, cid in pairs:
            self._by_client.setdefault(cid, []).append(seq)
        for client in self.clients:
            proc = self.processes.get(client.pid)
            name = os.path.basename(proc.argv[0]) if proc and proc.argv else ""
            client.label = f"{client.id} pid {client.pid}" + (f" ({name})" if name else "")

    @property
    def cut(self) -> bool:
        """The recording ended abruptly: the trace was recovered (no intact footer: the recorder was
        killed, the file torn), so what was in flight at its end may well have returned after."""
        return not self.recovery.complete and self.recovery.reason != LIVE

    def cut_short(self, call: CallInfo) -> bool:
        """``call`` was in flight when the recording was cut, and the recorder never said it still was."""
        return call.in_flight and self.cut and (call.pid, call.call_id) not in self.marked_in_flight

    # -- lookups

    def client(self, client_id: str) -> Client:
        return self._clients[client_id]

    def client_of(self, seq: int) -> str | None:
        i = bisect.bisect_left(self._seqs, seq)
        return self._seq_clients[i] if i < len(self._seqs) and self._seqs[i] == seq else None

    def client_seqs(self, client_id: str) -> Sequence[int]:
        return self._by_client.get(client_id, [])

    def calls_of(self, client_id: str) -> list[CallInfo]:
        return [c for c in self.calls if c.client_id == client_id]

    def objects_of(self, client_id: str) -> list[RmObject]:
        return [o for o in self.object_list if o.client_id == client_id]

    def leaked(self, client_id: str | None = None) -> list[RmObject]:
        """Objects still allocated at the end of the trace (neither freed nor reclaimed at exit)."""
        return [o for o in self.object_list
                if o.free_ns is None and (client_id is None or o.client_id == client_id)]

    # -- time

    @property
    def transitions(self) -> Sequence[Transition]:
        return self.timeline.transitions

    def history(self, entity: str) -> Sequence[Transition]:
        return self.timeline.history(entity)

    def state_at(self, t_ns: int) -> State:
        return self.timeline.state_at(t_ns)

    def lanes(self) -> list[Lane]:
        """One lane per client, then per channel (grouped by client), then per rank (the host)."""
        out = [self.timeline.lane(c.entity, "client", c.id, c.label) for c in self.clients]
        for chan in self.channels.values():
            label = f"{chan.id} {chan.handle:#x} {chan.engine or ''}".rstrip()
            out.append(self.timeline.lane(chan.entity, "channel", chan.client_id, label))
        for rank in sorted(self.ranks.values(), key=lambda r: r.index):
            out.append(self.timeline.lane(rank.entity, "rank", "host", f"rank {rank.index}"))
        return out


def load_session(source: str | os.PathLike | TraceReader, driver: str | None = None,
                 snapshot_every: int = 20_000, decoders: DecoderSet | None = None) -> SessionModel:
    """Fold a trace (a path or an open reader) into a SessionModel."""
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    decoders = decoders or decoders_for(reader, override=driver)
    timeline = Timeline(snapshot_every)
    folder = Folder(decoders, timeline, client_ids(reader.meta))
    fold_records(folder, reader.records())
    span = reader.time_span or (0, 0)
    _mark_open_calls(folder, timeline, span[1])
    timeline.freeze(span[1])
    return SessionModel(reader, decoders, folder, timeline, span[0], span[1])


def client_ids(meta: Mapping[str, Any]) -> dict[int, str]:
    """pid -> client id of the clients a replay trace was made for: its plan's names, so that every
    reader calls a client what the replay's table called it.  None for a recording (clients are
    numbered by their first appearance)."""
    if meta.get("backend") != "replay":
        return {}
    clients = (meta.get("replay") or {}).get("clients") or []
    return {c["pid"]: c["id"] for c in clients if isinstance(c, dict) and "pid" in c and "id" in c}


def fold_records(folder: Folder, records: Iterable) -> None:
    for call in folder.decoders.calls(records):
        folder.fold(call)


def _mark_open_calls(folder: Folder, timeline: Timeline, end_ns: int) -> None:
    """Calls still in flight at the end show on their client's lane from their enter on."""
    for call in folder.calls:
        if call.in_flight and call.client_id is not None:
            entity = f"client/{call.client_id}"
            timeline.set(call.t_enter, call.enter_seq, entity, "state", LaneState.IN_FLIGHT)
            timeline.set(call.t_enter, call.enter_seq, entity, "detail", call.full_name)
