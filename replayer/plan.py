"""A replay plan: per-client message streams cut from a trace.

Clients are the session model's (rmtrace.session): a traced process from
its first open of an NVIDIA device (for GSP records that name no process,
one GSP session: the records between two GSP_INIT_DONE events).
Each client's calls become :class:`~rmtrace.replayer.messages.Message`\\ s
in program order, each knowing what the recording says came back and which
earlier messages it depends on (the handles and files it uses).  A plan can
then be narrowed (``select``), repeated (``repeat``: the same recorded
client run N times, the seed's "three sequential clients" from one run) and
widened (``streams``: a client's channel work multiplied over N channels on
N CE ranks, the simultaneous case).  Plans are data; schedules and targets
never change them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.replayer.messages import Kind, Message
from rmtrace.replayer.model.host import RANK_SHIFT
from rmtrace.replayer.semantics import Member, Semantics

from rmtrace.calls import Call
from rmtrace.errors import RmtraceError
from rmtrace.record import Record, Source, decode_record
from rmtrace.semantics import Category, Ref, RefKind
from rmtrace.session import load_session
from rmtrace.trace import TraceReader

REPLAYED_SOURCES = frozenset({Source.RM, Source.UVM, Source.SYS, Source.GSP})
"""Sources whose records become messages (sema and mark records are the host's and the recorder's)."""
CALL_ID_LANE_SHIFT = 48
"""Cloned streams' call ids: the recorded call id plus lane << 48, unique within the process."""
HANDLE_LANE_STEP = 0x10000
LANE_TID_STEP = 100000
LANE_VA_SHIFT = 32
HANDLE_REFS = frozenset({RefKind.HANDLE, RefKind.UVM_CHANNEL})
"""Refs whose value is an RM handle: a lane's clone names its own."""


@dataclass(eq=False)
class PlanClient:
    """One client's messages, as a replay runs them."""

    id: str
    label: str
    pid: int
    """Process id the replay gives this client."""
    messages: list[Message]
    origin: str
    """The recorded client it was cut from (several repeats share one)."""
    run: int = 1
    """Which repeat of ``origin`` this is (1-based)."""
    lanes: int = 1
    argv: tuple[str, ...] = ()
    """The recorded process's command line."""

    def tid(self, msg: Message) -> int:
        """The thread a message runs on: the recorded one moved with the pid; a thread of its own per lane."""
        return self.pid + (msg.tid - msg.pid) + LANE_TID_STEP * msg.lane


@dataclass(eq=False)
class Plan:
    """Clients cut from one trace, ready for any schedule and target."""

    source: str
    meta: dict[str, Any]
    semantics: Semantics
    clients: list[PlanClient] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(c.messages) for c in self.clients)

    # -- shaping

    def select(self, numbers: Iterable[int]) -> Plan:
        """Only the recorded clients with these numbers (1 = c1, ...), in recorded order."""
        wanted = sorted(set(numbers))
        missing = [n for n in wanted if not 1 <= n <= len(self.clients)]
        if missing:
            raise RmtraceError(f"no client {', '.join(map(str, missing))}: the trace has {len(self.clients)} "
                               f"({', '.join(c.id for c in self.clients)})")
        return self._with([self.clients[n - 1] for n in wanted])

    def repeat(self, times: int) -> Plan:
        """The clients run ``times`` times over (the same recorded clients, each run a new process)."""
        if times < 1:
            raise RmtraceError(f"--repeat must be at least 1, not {times}")
        used = {c.pid for c in self.clients}
        out = []
        for run in range(1, times + 1):
            for c in self.clients:
                pid = c.pid if run == 1 else _fresh_pid(c.pid, used)
                used.add(pid)
                out.append(replace(c, pid=pid, run=run))
        return self._with(out)

    def streams(self, count: int) -> Plan:
        """Each client's channel work multiplied over ``count`` channels on ``count`` ranks."""
        if count < 1:
            raise RmtraceError(f"--streams must be at least 1, not {count}")
        if count == 1:
            return self
        return self._with([multiply_streams(c, count, self.semantics) for c in self.clients])

    def _with(self, clients: list[PlanClient]) -> Plan:
        renamed = []
        for n, c in enumerate(clients, 1):
            cid = f"c{n}"
            origin = "" if c.origin == cid and c.run == 1 else \
                f" (run {c.run} of recorded {c.origin})" if c.run > 1 else f" (recorded {c.origin})"
            renamed.append(replace(c, id=cid, label=f"{cid} pid {c.pid}{_program(c.label)}{origin}"))
        return Plan(self.source, self.meta, self.semantics, renamed)


def _program(label: str) -> str:
    start = label.find(" (")
    if start < 0:
        return ""
    inner = label[start + 2:label.find(")", start)]
    return "" if inner.startswith(("run ", "recorded ")) else f" ({inner})"


def _fresh_pid(pid: int, used: set[int]) -> int:
    candidate = pid + 1
    while candidate in used:
        candidate += 1
    return candidate


# --------------------------------------------------------------------------- cutting a trace


def build_plan(trace: str | os.PathLike | TraceReader, *, driver: str | None = None,
               decoders: DecoderSet | None = None) -> Plan:
    """Cut a trace into the session model's clients and their messages (see the module docstring)."""
    reader = trace if isinstance(trace, TraceReader) else TraceReader(trace)
    decoders = decoders or decoders_for(reader, override=driver)
    session = load_session(reader, decoders=decoders)
    semantics = Semantics(decoders)
    calls: dict[str, list[Call]] = {c.id: [] for c in session.clients}
    for call in decoders.calls(reader.records(source=REPLAYED_SOURCES)):
        client_id = session.client_of(call.records[0].seq)
        if client_id is not None:
            calls[client_id].append(call)
    clients: list[PlanClient] = []
    pids = {c.pid for c in session.clients}
    for client in session.clients:
        messages = [semantics.message(call, i) for i, call in enumerate(calls[client.id])]
        if not any(m.expect.response is not False for m in messages):
            continue  # opened a device and did nothing with it
        link(messages)
        _think_times(calls[client.id], messages)
        process = session.processes.get(client.pid)
        pid = client.pid
        if not pid or any(c.pid == pid for c in clients):  # GSP sessions recorded host-side name no process
            pid = _fresh_pid(max(pids | {c.pid for c in clients}), pids)
            pids.add(pid)
        clients.append(PlanClient(client.id, client.label, pid, messages, client.id,
                                  argv=process.argv if process is not None else ()))
    if not clients:
        raise RmtraceError(f"{reader.path}: no client in this trace (no RM, UVM or GSP calls to replay)")
    return Plan(reader.path, dict(reader.meta), semantics, clients)


def _think_times(calls: Sequence[Call], messages: Sequence[Message]) -> None:
    """Each message's recorded gap after the end of the calls before it (the process thinking)."""
    busy_until = None
    for call, msg in zip(calls, messages):
        start, end = call.records[0].time_ns, call.records[-1].time_ns
        if busy_until is not None:
            msg.think_ns = max(0, start - busy_until)
        busy_until = end if busy_until is None else max(busy_until, end)


# --------------------------------------------------------------------------- dependencies


def link(messages: Sequence[Message]) -> None:
    """Set each message's ``deps``: the latest earlier message defining each key it uses."""
    defined: dict[Ref, int] = {}
    for msg in messages:
        deps = {defined[key] for key in msg.uses if key in defined}
        msg.deps = tuple(sorted(deps))
        for key in msg.defines:
            defined[key] = msg.index


def dependency_closure(messages: Sequence[Message], keep: Iterable[int]) -> set[int]:
    """``keep`` plus every message they depend on, transitively (indices)."""
    by_index = {m.index: m for m in messages}
    out: set[int] = set()
    todo = list(keep)
    while todo:
        i = todo.pop()
        if i in out:
            continue
        out.add(i)
        todo.extend(by_index[i].deps)
    return out


# --------------------------------------------------------------------------- streams


STREAM_ROOTS = frozenset({Category.TSG, Category.CHANNEL})
"""Objects a stream is made of, with everything allocated under them: a channel group (its context
shares, its channels, their engine objects), or a channel outside any group.  A channel cloned into
the recorded group would share that group's runlist entry and scheduling state, which the real
driver refuses (NV_ERR_INVALID_STATE): a lane gets the whole group."""


def channel_work(messages: Sequence[Message]) -> tuple[set[int], set[int]]:
    """(indices of the messages that are channel work, handles of the channel groups, the channels
    outside them, and everything allocated under either).

    The categories are the semantic layer's (class numbers of the driver profile); the work is every
    message that uses or defines one of those handles: the allocations, their controls, UVM's
    REGISTER_CHANNEL and UNREGISTER_CHANNEL of them, their frees.  The memory their alloc params
    name (the GPFIFO and USERD buffer, the error notifiers) is the program's own and stays shared:
    ``--streams`` lanes get room inside it (targets/nvidia/compile.py ``_lane_room``)."""
    handles: set[int] = set()
    for msg in messages:
        if msg.kind == Kind.RM_ALLOC and (msg.category in STREAM_ROOTS or msg.h_parent in handles):
            handles.add(msg.h_object)
    work = {m.index for m in messages
            if any(ref.kind is RefKind.HANDLE and ref.value in handles for ref in m.uses + m.defines)}
    return work, handles


def multiply_streams(client: PlanClient, count: int, semantics: Semantics) -> PlanClient:
    """The client with its channel work cloned onto lanes 1..count-1 (see Plan.streams)."""
    work, handles = channel_work(client.messages)
    if not work:
        raise RmtraceError(f"{client.id} allocates no channel: nothing to multiply over streams")
    used = {ref.value for m in client.messages for ref in m.uses + m.defines if ref.kind is RefKind.HANDLE}
    mappings: list[dict[int, int]] = [{}] + [_remap(handles, lane, used) for lane in range(1, count)]
    out: list[Message] = []
    lanes: list[list[Message]] = [[] for _ in range(count)]
    last_work = max(work)
    joined = False
    before: list[tuple[Message, Message]] = []
    """(clone, the lane-0 message its original came after)."""
    previous: Message | None = None
    for msg in client.messages:
        if msg.index > last_work and not joined:
            joined = True
            out.extend(m for lane in lanes[1:] for m in lane)
        copy = replace(msg)  # a copy: repeats of a client share their message objects
        out.append(copy)
        if msg.index in work:
            for lane in range(1, count):
                clone = _clone(msg, lane, mappings[lane], semantics)
                lanes[lane].append(clone)
                if previous is not None:
                    before.append((clone, previous))
        previous = copy
    if not joined:
        out.extend(m for lane in lanes[1:] for m in lane)
    _renumber(out)
    # A clone goes no earlier than its original could: after what lane 0 did before it.  What a call
    # needs is more than the handles it names (a context share needs its VA space set up, a channel
    # group its device's); lane 0's order is the one the program was recorded in.
    for clone, after in before:
        clone.deps = tuple(sorted(set(clone.deps) | {after.index}))
    join = next((m for m in out if m.lane == 0 and m.index > max(m2.index for m2 in out if m2.lane)), None)
    if join is not None:
        tails = tuple(max(m.index for m in out if m.lane == lane) for lane in range(1, count))
        join.deps = tuple(sorted(set(join.deps) | set(tails)))
    return replace(client, messages=out, lanes=count)


def _remap(handles: set[int], lane: int, used: set[int]) -> dict[int, int]:
    mapping = {}
    for h in sorted(handles):
        candidate = (h + lane * HANDLE_LANE_STEP) & 0xFFFFFFFF
        while candidate in used:
            candidate = (candidate + 1) & 0xFFFFFFFF
        used.add(candidate)
        mapping[h] = candidate
    return mapping


def lane_shift(lane: int) -> int:
    """How far a lane's channel addresses move: 4 GiB per lane apart, and one CE rank further."""
    return (lane << LANE_VA_SHIFT) | (lane << RANK_SHIFT)


def _clone(msg: Message, lane: int, mapping: dict[int, int], semantics: Semantics) -> Message:
    shift = lane_shift(lane)

    def change(member: Member, value: Any) -> Any:
        if member.handle and isinstance(value, int) and value in mapping:
            return mapping[value]
        if member.name == "gpFifoOffset" and value:
            return value + shift
        if member.name == "userdOffset" and isinstance(value, list):
            return [v + shift if v else v for v in value]
        return value

    call_id = msg.call_id + (lane << CALL_ID_LANE_SHIFT)
    request = _rewrite(msg.request, change, semantics, call_id)
    reply = _rewrite(msg.reply, change, semantics, call_id) if msg.reply is not None else None
    remap = lambda ref: ref._replace(value=mapping.get(ref.value, ref.value)) if ref.kind in HANDLE_REFS \
        else ref  # noqa: E731
    return replace(
        msg, lane=lane, request=request, reply=reply, call_id=call_id,
        h_object=mapping.get(msg.h_object, msg.h_object), h_parent=mapping.get(msg.h_parent, msg.h_parent),
        ring_va=msg.ring_va + shift if msg.ring_va else 0, userd_va=msg.userd_va + shift if msg.userd_va else 0,
        uses=tuple(map(remap, msg.uses)), defines=tuple(map(remap, msg.defines)),
    )


def _rewrite(data: bytes, change: Any, semantics: Semantics, call_id: int) -> bytes:
    record: Record = decode_record(data)
    return semantics.rewrite(replace(record, call_id=call_id), change).encode()


def _renumber(messages: list[Message]) -> None:
    """Indices follow the new order; deps are recomputed from uses and defines."""
    for i, msg in enumerate(messages):
        msg.index = i
    link(messages)
