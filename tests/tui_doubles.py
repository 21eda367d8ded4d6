"""A small in-memory session model for the TUI's unit tests, written beside a real trace.

``wedge_story(path)`` writes a short two-client trace with the real
TraceWriter (the second client's UVM registration never returns) and returns
a model double that says what the session model would say about it: clients,
objects, channels, calls, lanes, state at a time, a wedge.  Only the model's
queries are doubled; every value it hands out is the library's own class
(``rmtrace.session``'s entities, ``Wedge``, ``Divergence``, ``Decoded``).
Only unit tests use it; the TUI is shown on real traces through the real
model elsewhere.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import io
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders.base import Decoded
from rmtrace.tui.services import Services

from rmtrace.analysis.diff import Divergence
from rmtrace.analysis.wedges import Wedge
from rmtrace.record import Buffer, MarkOp, Phase, Record, Role, Source, SysOp, When
from rmtrace.session import STATE_SYMBOLS, CallInfo, Channel, Client, Lane, Rank, RmObject, Segment, State, Transition
from rmtrace.trace import TraceWriter

T0 = 1_000_000_000
US = 1_000


def _status_name(status: int | None) -> str | None:
    return None if status is None else ("OK" if status == 0 else f"rc {status}")


class DoubleDecoders:
    """Names by (source, op) from a table; handles from what the story wrote down."""

    NAMES = {(Source.RM, 0x2B): "RM_ALLOC", (Source.RM, 0x29): "RM_FREE", (Source.UVM, 37): "UVM_REGISTER_GPU",
             (Source.UVM, 38): "UVM_UNREGISTER_GPU", (Source.SEMA, 1): "REGISTER_CHANNEL",
             (Source.SEMA, 3): "PUBLISH_RING", (Source.SEMA, 5): "COMPLETION_HINT", (Source.SEMA, 6): "RELEASE",
             (Source.SEMA, 8): "LATCH_ARM", (Source.SEMA, 9): "LATCH_FIRE", (Source.SEMA, 10): "DRAIN_HOLD",
             (Source.SEMA, 14): "COUNTERS", (Source.SYS, SysOp.OPEN): "open", (Source.SYS, SysOp.EXIT): "exit",
             (Source.MARK, MarkOp.IN_FLIGHT): "IN_FLIGHT"}

    def __init__(self, handles: dict[int, int], status: dict[int, int]) -> None:
        self.handles = handles
        self.status = status

    def decode(self, item: Any, level: object = None) -> Decoded:
        rec = item.records[-1] if hasattr(item, "records") else item  # a call: its closing record
        name = self.NAMES.get((rec.source, rec.op), f"op {rec.op:#x}")
        status = self.status.get(rec.seq)
        handle = self.handles.get(rec.seq)
        return Decoded(rec.source, rec.op, name, status=status, status_name=_status_name(status),
                       ok=None if status is None else status == 0, handles={} if handle is None else {"hObject": handle})


@dataclass
class DoubleModel:
    reader_path: str
    start_ns: int
    end_ns: int
    clients: tuple[Client, ...]
    objects: dict[tuple[str, int], RmObject]
    channels: dict[str, Channel]
    calls: list[CallInfo]
    transitions: list[Transition]
    counters: list[tuple[int, dict[str, int]]]
    wedge_list: list[Wedge]
    decoders: DoubleDecoders
    owner: dict[int, str]
    ranks: dict[str, Rank] = field(default_factory=dict)
    lane_defs: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(entity, kind, group, label)"""

    def client_of(self, seq: int) -> str | None:
        return self.owner.get(seq)

    def client_seqs(self, client_id: str) -> list[int]:
        return sorted(s for s, c in self.owner.items() if c == client_id)

    def history(self, entity: str) -> list[Transition]:
        return [t for t in self.transitions if t.entity == entity]

    def state_at(self, t_ns: int) -> State:
        entities: dict[str, dict[str, object]] = {}
        for tr in self.transitions:
            if tr.t_ns > t_ns:
                break
            entities.setdefault(tr.entity, {})[tr.attr] = tr.value
        times = [t for t, _ in self.counters]
        i = bisect.bisect_right(times, t_ns)
        return State(t_ns, entities, self.counters[i - 1][1] if i else {})

    def lanes(self) -> list[Lane]:
        out = []
        for entity, kind, group, label in self.lane_defs:
            hist = [t for t in self.history(entity) if t.attr == "state"]
            segs = tuple(Segment(a.t_ns, b.t_ns if b is not None else self.end_ns, str(a.value), f"seq {a.seq}")
                         for a, b in zip(hist, hist[1:] + [None]))
            out.append(Lane(entity, kind, group, label, segs))
        return out


def double_services(models: dict[str, DoubleModel]) -> Services:
    """Services whose model loader hands back the double made for each path."""
    return Services(
        load_model=lambda path, decoders: models[str(path)],
        find_wedges=lambda model: model.wedge_list,
        first_divergence=lambda a, b: _diverge(a, b),
        symbols=STATE_SYMBOLS,
    )


def _diverge(a: DoubleModel, b: DoubleModel) -> Divergence | None:
    for i, (ca, cb) in enumerate(zip(a.calls, b.calls)):
        if (ca.name, ca.in_flight, ca.status) != (cb.name, cb.in_flight, cb.status):
            return Divergence(ca.client_id, "status", i, f"{ca.name}: A {'in flight' if ca.in_flight else ca.status}, "
                              f"B {'in flight' if cb.in_flight else cb.status}", ca, cb, ["(the double's diff)"])
    return None


class _Story:
    """Writes records and keeps, beside them, what the model double will say."""

    def __init__(self, path: str, meta: dict[str, Any]) -> None:
        self.writer = TraceWriter(path, meta)
        self.path = path
        self.t = T0
        self.owner: dict[int, str] = {}
        self.handles: dict[int, int] = {}
        self.status: dict[int, int] = {}
        self.transitions: list[Transition] = []
        self.calls: list[CallInfo] = []
        self.objects: dict[tuple[str, int], RmObject] = {}
        self.counters: list[tuple[int, dict[str, int]]] = []
        self.call_ids = 0

    def write(self, client: str, rec: Record, handle: int | None = None, status: int | None = None,
              gap_us: int = 50) -> int:
        self.t += gap_us * US
        seq = self.writer.write(Record(rec.source, rec.phase, rec.op, 0, self.t, rec.pid, rec.tid, rec.call_id,
                                       rec.fd, rec.ret, rec.err, rec.flags, rec.buffers))
        self.owner[seq] = client
        if handle is not None:
            self.handles[seq] = handle
        if status is not None:
            self.status[seq] = status
        return seq

    def state(self, seq: int, entity: str, value: str, **attrs: object) -> None:
        self.transitions.append(Transition(self.t, seq, entity, "state", value))
        for k, v in attrs.items():
            self.transitions.append(Transition(self.t, seq, entity, k, v))

    def call(self, client: str, pid: int, source: int, op: int, name: str, handle: int | None = None,
             returns: bool = True, latency_us: int = 120, status: int = 0) -> tuple[int, int | None]:
        self.call_ids += 1
        cid = self.call_ids
        payload = (Buffer(Role.ARG, When.BEFORE, cid.to_bytes(4, "little") * 8),)
        enter = self.write(client, Record(source, Phase.ENTER, op, pid=pid, tid=pid, call_id=cid, fd=3,
                                          buffers=payload), handle)
        t_enter = self.t
        exit_seq = t_exit = None
        if returns:
            exit_seq = self.write(client, Record(source, Phase.EXIT, op, pid=pid, tid=pid, call_id=cid, fd=3,
                                                 buffers=payload), handle, status, gap_us=latency_us)
            t_exit = self.t
        result = status if returns else None
        self.calls.append(CallInfo(pid, pid, cid, client, source, op, name, None, result, _status_name(result),
                                   None if result is None else result == 0, enter, exit_seq, t_enter, t_exit,
                                   not returns))
        return enter, exit_seq

    def sema(self, client: str, phase: int, op: int, handle: int | None = None, status: int | None = None,
             pid: int = 0) -> int:
        body = Buffer(Role.PAYLOAD, When.ONCE, op.to_bytes(4, "little") + bytes(28))
        return self.write(client, Record(Source.SEMA, phase, op, pid=pid, tid=pid, buffers=(body,)), handle, status)

    def alloc(self, client: str, pid: int, handle: int, parent: int | None, cls: int, class_name: str,
              stable: str) -> int:
        enter, _ = self.call(client, pid, Source.RM, 0x2B, "RM_ALLOC", handle)
        self.objects[(client, handle)] = RmObject(client, handle, parent, cls, class_name, stable, enter, self.t)
        return enter


def wedge_story(path: str, *, second_client_recovers: bool = False) -> DoubleModel:
    """Two clients: c1 runs and leaves stale host state; c2's UVM registration never returns.

    ``second_client_recovers`` writes the fixed run instead (c2's registration
    returns), for diffs.
    """
    s = _Story(str(path), {"host": "fixture", "driver_version": "580.159.04", "backend": "fixture",
                           "command": ["victory_mail"]})
    root1, dev1, ch1 = 0xC1D00001, 0x5C000001, 0xCAF000D4
    s.write("c1", Record(Source.SYS, Phase.EVENT, SysOp.OPEN, pid=100, tid=100, fd=3,
                         buffers=(Buffer(Role.PATH, When.ONCE, b"/dev/nvidiactl"),)))
    seq = s.alloc("c1", 100, root1, None, 0x41, "NV01_ROOT_CLIENT", "NV01_ROOT_CLIENT")
    s.state(seq, "client/c1", "allocated")
    s.alloc("c1", 100, dev1, root1, 0x80, "NV01_DEVICE_0", "NV01_ROOT_CLIENT/NV01_DEVICE_0#0")
    seq = s.alloc("c1", 100, ch1, dev1, 0xC56F, "AMPERE_CHANNEL_GPFIFO_A",
                  "NV01_ROOT_CLIENT/NV01_DEVICE_0#0/AMPERE_CHANNEL_GPFIFO_A#0")
    s.state(seq, "chan/c1/ch0", "allocated", handle=ch1)
    seq = s.sema("c1", Phase.SEND, 1, ch1, 0, pid=100)
    s.state(seq, "chan/c1/ch0", "registered", rank=2)
    seq = s.sema("c1", Phase.SEND, 3, ch1, 0, pid=100)
    s.state(seq, "chan/c1/ch0", "published")
    s.counters.append((s.t, {"pub_calls": 1, "gr_rel": 0, "faked": 0, "drain_held": 0}))
    seq = s.sema("c1", Phase.EVENT, 8, ch1)
    s.state(seq, "rank/2", "latch_armed")
    seq = s.sema("c1", Phase.SEND, 5, ch1, 0, pid=100)
    s.state(seq, "chan/c1/ch0", "waiting")
    seq = s.sema("c1", Phase.RECV, 6, ch1, 0, pid=100)
    s.state(seq, "chan/c1/ch0", "completed")
    s.counters.append((s.t, {"pub_calls": 1, "gr_rel": 1, "faked": 0, "drain_held": 0}))
    seq = s.sema("c1", Phase.EVENT, 9, ch1)
    s.state(seq, "rank/2", "latch_fired")
    seq, _ = s.call("c1", 100, Source.UVM, 38, "UVM_UNREGISTER_GPU")
    s.state(seq, "client/c1", "in_flight")
    for _ in range(2):
        seq = s.sema("c1", Phase.SEND, 5, ch1, -22, pid=100)
    s.state(seq, "chan/c1/ch0", "stale")
    seq = s.sema("c1", Phase.EVENT, 10, ch1)
    s.state(seq, "rank/2", "drain_held")
    s.counters.append((s.t, {"pub_calls": 1, "gr_rel": 1, "faked": 0, "drain_held": 2}))
    seq = s.write("c1", Record(Source.SYS, Phase.EVENT, SysOp.EXIT, pid=100, tid=100))
    s.state(seq, "client/c1", "exited")

    root2 = 0xC1D00002
    s.write("c2", Record(Source.SYS, Phase.EVENT, SysOp.OPEN, pid=200, tid=200, fd=3,
                         buffers=(Buffer(Role.PATH, When.ONCE, b"/dev/nvidiactl"),)), gap_us=2000)
    seq = s.alloc("c2", 200, root2, None, 0x41, "NV01_ROOT_CLIENT", "NV01_ROOT_CLIENT")
    s.state(seq, "client/c2", "allocated")
    enter, _ = s.call("c2", 200, Source.UVM, 37, "UVM_REGISTER_GPU", returns=second_client_recovers)
    s.state(enter, "client/c2", "completed" if second_client_recovers else "in_flight")
    since = s.t
    s.sema("c2", Phase.EVENT, 14)
    s.t += 3000 * US
    if not second_client_recovers:
        s.write("c2", Record(Source.MARK, Phase.EVENT, MarkOp.IN_FLIGHT, pid=200, tid=200, call_id=s.call_ids))
        s.state(enter, "client/c2", "wedged")
    s.writer.close()

    clients = (
        Client("c1", 100, root1, T0, since, 0, max(q for q, c in s.owner.items() if c == "c1"), 0,
               "c1 pid 100 (victory_mail)"),
        Client("c2", 200, root2, since, s.t, min(q for q, c in s.owner.items() if c == "c2"), max(s.owner), 1,
               "c2 pid 200 (victory_mail)"),
    )
    channels = {"c1/ch0": Channel("c1/ch0", "c1", ch1, root1, "AMPERE_CHANNEL_GPFIFO_A",
                                  "NV01_ROOT_CLIENT/NV01_DEVICE_0#0/AMPERE_CHANNEL_GPFIFO_A#0", engine="CE", rank=2,
                                  token=7, uvm_registered=True)}
    wedges = [] if second_client_recovers else [Wedge(
        "stuck_call", "c2's UVM_REGISTER_GPU never returned", "c2", enter, s.t, since, ["c2 pid 200 entered UVM_REGISTER_GPU and never left it",
         "c1's channel 0xcaf000d4 went stale: two COMPLETION_HINTs answered rc=-22",
         "rank2's one-shot latch fired and was never re-armed; a drain hold kept 2 completions",
         "so the host completion path is quiet for c2 and the guest UVM global lock stays held"],
        score=1.0, rank=1, entity="client/c2")]
    lanes = [("client/c1", "client", "c1", "calls"), ("chan/c1/ch0", "channel", "c1", "c1/ch0 0xcaf000d4"),
             ("client/c2", "client", "c2", "calls"), ("rank/2", "rank", "host", "rank 2")]
    return DoubleModel(str(path), T0 + 50 * US, s.t, clients, s.objects, channels, s.calls,
                       sorted(s.transitions, key=lambda t: (t.t_ns, t.seq)), s.counters, wedges,
                       DoubleDecoders(s.handles, s.status), s.owner, {"rank2": Rank("rank2", 2)}, lanes)


def pilot_test(fn):
    """Run an ``async def`` test in its own event loop (no asyncio plugin needed); fixtures still work."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))
    return run


def plain(renderable, width: int = 80) -> str:
    """What a Rich renderable shows, as text (for asserting on panels built from Groups)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
