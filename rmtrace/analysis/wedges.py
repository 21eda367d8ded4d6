"""Where and why a session stalled: ranked wedges, each with its chain in plain words.

A wedge is something that never finished: a call still in flight at the end
of the trace (or slower than a threshold), a GSP request without a response,
a channel with work but no completion, a rank whose one-shot latch fired and
was never re-armed, a client that went quiet.  Each comes with a *chain*:
which client, blocked in what, since when, waiting on what.

What a blocked call can be waiting on is read off the model with the semantic
layer's rules (``rmtrace.semantics.LOCKS``: which calls hold which lock across an
exchange with the host, the same rules the host model follows), never guessed:
where the trace holds no evidence, the chain says so.

A trace that was cut short (recovered: the recorder was killed, the file torn)
proves nothing about the calls in flight at its end: they are reported as cut by
the end of the recording (``cut_by_end``), never as wedges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmtrace.record import Source
from rmtrace.semantics import LOCKS, LockRule
from rmtrace.session import CallInfo, LaneState, SessionModel
from rmtrace.session.entities import Named
from rmtrace.timefmt import format_duration, format_offset

WAITING_STATES = (LaneState.WAITING, LaneState.STALE)
CALL_SOURCES = (Source.RM, Source.UVM, Source.GSP)
"""Sources whose calls can be in flight (or slow): the guest's ioctls and its RPCs to GSP."""


class WedgeKind(Named):
    """What never finished."""

    IN_FLIGHT = "in_flight"                  # a call in flight at the end of the trace
    SLOW = "slow"                            # a call that returned, later than the threshold
    GSP_NO_RESPONSE = "gsp_no_response"      # a GSP request without its response
    NO_COMPLETION = "no_completion"          # a channel with work the host never completed
    LATCH_NOT_REARMED = "latch_not_rearmed"  # a rank whose one-shot latch fired and never re-armed
    DRAIN_HELD = "drain_held"                # a rank held by a drain that never ended
    QUIET = "quiet"                          # a client that stopped making calls without exiting


@dataclass
class Wedge:
    kind: WedgeKind
    summary: str
    client_id: str | None = None
    seq: int | None = None
    t_ns: int | None = None
    since_ns: int | None = None
    chain: list[str] = field(default_factory=list)
    score: float = 0.0
    rank: int = 0
    entity: str | None = None

    def to_dict(self) -> dict:
        return {"rank": self.rank, "kind": self.kind, "summary": self.summary, "client": self.client_id,
                "seq": self.seq, "t_ns": self.t_ns, "since_ns": self.since_ns, "entity": self.entity,
                "chain": list(self.chain)}


@dataclass(frozen=True)
class CutCall:
    """A call in flight when the recording was cut: whether it returned, the trace cannot say."""

    call: CallInfo
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {"client": self.call.client_id, "seq": self.call.enter_seq, "t_ns": self.call.t_enter,
                "name": self.call.full_name, "summary": self.summary}


class _Finder:
    def __init__(self, model: SessionModel, slow_ns: int) -> None:
        self.m = model
        self.slow_ns = slow_ns
        self.end = model.end_ns
        self.rel = lambda t: format_offset(t - model.start_ns)
        self.final = model.final_state()  # not state_at: its snapshots on the way copy every entity each
        self.in_flight = [c for c in model.in_flight_calls(CALL_SOURCES) if not model.cut_short(c)]

    def client_label(self, client_id: str | None) -> str:
        if client_id is None:
            return "the host"
        return self.m.client(client_id).label

    # -- chains -----------------------------------------------------------------------

    def lock_holder(self, call: CallInfo) -> tuple[LockRule, CallInfo] | None:
        """A call of another client holding a lock ``call`` needs, in flight since before it."""
        for kind in call.locks:
            holders = [c for c in self.in_flight if c is not call and kind in c.locks
                       and c.t_enter < call.t_enter and c.client_id != call.client_id]
            if holders:
                return LOCKS[kind], min(holders, key=lambda c: c.t_enter)
        return None

    def host_evidence(self, client_id: str | None) -> list[str]:
        """What the host service's records say about this client's channels and their ranks."""
        lines = []
        for chan in self.m.channels.values():
            if chan.client_id != client_id:
                continue
            state = self.final.of(chan.entity).get("state")
            if state not in WAITING_STATES:
                continue
            history = self.m.history(chan.entity)
            since = next((tr.t_ns for tr in reversed(history) if tr.attr == "state" and tr.value == state), None)
            detail = self.final.of(chan.entity).get("detail", "")
            where = f"rank {chan.rank}" if chan.rank is not None else "an unknown rank"
            if state == "stale":
                lines.append(f"its channel {chan.handle:#x} ({chan.id}) waits for a completion on {where}; the host "
                             f"refused it as stale at {self.rel(since or 0)} ({detail})")
            else:
                lines.append(f"its channel {chan.handle:#x} ({chan.id}) waits for a completion on {where} since "
                             f"{self.rel(since or 0)} ({detail})")
            if chan.rank is not None:
                lines.extend(self.rank_evidence(chan.rank))
        counters = self.frozen_counters()
        if lines and counters:
            lines.append(counters)
        return lines

    def rank_evidence(self, index: int) -> list[str]:
        """What holds rank ``index`` at the end: a spent one-shot latch, a drain hold (either or both)."""
        rank = self.m.ranks.get(f"rank{index}")
        if rank is None:
            return []
        lines = []
        if rank.latch_armed is False:
            who = f" of {rank.last_channel_id.split('/')[0]}" if rank.last_channel_id else ""
            lines.append(f"rank {index}'s one-shot latch fired at {self.rel(rank.fired_ns or 0)} "
                         f"(generation {rank.latch_generation}, channel {rank.last_channel or 0:#x}{who}) "
                         f"and was never re-armed")
        if rank.drain_held:
            lines.append(f"rank {index} is in a drain hold since {self.rel(rank.held_ns or 0)}: "
                         f"the host holds its completions")
        return lines

    def frozen_counters(self) -> str | None:
        history = self.m.history("host")
        if not history:
            return None
        moved = [tr for tr in history if tr.attr in ("pub_calls", "gr_rel", "faked")]
        last_move = max((tr.t_ns for tr in moved), default=None)
        values = " ".join(f"{k}={v}" for k, v in self.final.counters.items() if k != "session")
        if last_move is None:
            return f"host counters: {values}"
        return f"host counters last moved at {self.rel(last_move)} and stayed {values}"

    def chain_for(self, call: CallInfo) -> tuple[list[str], float]:
        label = self.client_label(call.client_id)
        chain = [f"{label} is blocked in {call.full_name} since {self.rel(call.t_enter)} "
                 f"({format_duration(self.end - call.t_enter)} by the end of the trace), thread {call.tid}"]
        proc = self.m.processes.get(call.pid)
        if proc is not None and proc.exit_status is not None:
            how = (f"was killed by signal {-proc.exit_status}" if proc.exit_status < 0
                   else f"exited with status {proc.exit_status}")
            chain.append(f"the process {how} while the call was still in flight: it never returned")
        score = (self.end - call.t_enter) / 1e9
        held = self.lock_holder(call)
        if held is not None:
            lock, holder = held
            chain.append(f"waiting for the {lock.side} {lock.name}, held by {self.client_label(holder.client_id)}'s "
                         f"{holder.full_name} (in flight since {self.rel(holder.t_enter)}): {lock.why}")
            return chain, score
        evidence = self.host_evidence(call.client_id)
        if evidence:
            chain.extend(evidence)
            score += 1000  # the root of a chain ranks above what waits on it
        else:
            chain.append("the trace holds no host-side record of what it waits for (no GSP or sema-service "
                         "traffic for this client after it entered)")
        blocked = [c for c in self.in_flight if (h := self.lock_holder(c)) is not None and h[1] is call]
        for other in blocked:
            chain.append(f"{self.client_label(other.client_id)} waits behind it in {other.full_name} "
                         f"since {self.rel(other.t_enter)}")
        return chain, score + 100 * len(blocked)

    # -- kinds ------------------------------------------------------------------------

    def calls(self) -> list[Wedge]:
        out = []
        for call in self.in_flight:
            chain, score = self.chain_for(call)
            out.append(Wedge(WedgeKind.IN_FLIGHT, f"{self.client_label(call.client_id)}: {call.full_name} never returned",
                             call.client_id, call.enter_seq, call.t_enter, call.t_enter, chain, score))
        for call in self.m.calls_slower_than(self.slow_ns, CALL_SOURCES):
            latency = call.latency_ns
            if latency is not None:
                out.append(Wedge(WedgeKind.SLOW, f"{self.client_label(call.client_id)}: {call.full_name} took "
                                 f"{format_duration(latency)}", call.client_id, call.enter_seq, call.t_enter,
                                 call.t_enter, [f"returned {call.status_name} after {format_duration(latency)} "
                                                f"(threshold {format_duration(self.slow_ns)})"], latency / 1e9))
        return out

    def gsp(self) -> list[Wedge]:
        return [Wedge(WedgeKind.GSP_NO_RESPONSE, f"GSP {x.function} (sequence {x.sequence}) got no response",
                      x.client_id, x.request_seq, x.t_request, x.t_request,
                      [f"sent at {self.rel(x.t_request)}, no response by the end of the trace"],
                      (self.end - x.t_request) / 1e9)
                for x in self.m.gsp if x.response_seq is None and not self.m.cut]

    def channels(self) -> list[Wedge]:
        out = []
        for chan in self.m.channels.values():
            state = self.final.of(chan.entity).get("state")
            if state in WAITING_STATES:
                chain = self.host_evidence(chan.client_id) or [f"state {state}"]
                out.append(Wedge(WedgeKind.NO_COMPLETION, f"channel {chan.handle:#x} ({chan.id}) has work but no completion",
                                 chan.client_id, None, None, None, chain, 10, entity=chan.entity))
        return out

    def ranks(self) -> list[Wedge]:
        out = []
        for rank in self.m.ranks.values():
            evidence = self.rank_evidence(rank.index)
            waiting = [c for c in self.m.channels.values()
                       if c.rank == rank.index and self.final.of(c.entity).get("state") in WAITING_STATES]
            if evidence and waiting:
                kind, what = ((WedgeKind.LATCH_NOT_REARMED, "latch fired and never re-armed")
                              if rank.latch_armed is False else (WedgeKind.DRAIN_HELD, "drain hold never released"))
                out.append(Wedge(kind, f"rank {rank.index}: {what}",
                                 None, None, None, None,
                                 evidence + [f"{c.id} waits on it" for c in waiting], 20, entity=rank.entity))
        return out

    def quiet(self) -> list[Wedge]:
        out = []
        for client in self.m.clients:
            proc = self.m.processes.get(client.pid)
            exited = proc is not None and proc.exit_status is not None
            gap = self.end - client.last_ns
            if exited or gap < max(self.slow_ns, (self.end - self.m.start_ns) // 10):
                continue
            blocked = [c for c in self.in_flight if c.client_id == client.id]
            why = (f"its last call, {blocked[0].full_name}, never returned" if blocked
                   else "it did not exit and made no call since")
            out.append(Wedge(WedgeKind.QUIET, f"{client.label} went quiet", client.id, client.last_seq, client.last_ns,
                             client.last_ns, [f"no traffic for {format_duration(gap)} before the end: {why}"],
                             gap / 1e9 / 10))
        return out


def cut_by_end(model: SessionModel) -> list[CutCall]:
    """The calls (and GSP requests) in flight when a recovered trace was cut: not wedges, since
    their returns may be in what the recording lost.  Empty unless ``model.cut``."""
    if not model.cut:
        return []
    rel = lambda t: format_offset(t - model.start_ns)  # noqa: E731
    out = []
    for call in model.calls:
        if call.source in CALL_SOURCES and model.cut_short(call):
            who = model.client(call.client_id).label if call.client_id else f"pid {call.pid}"
            out.append(CutCall(call, f"{who}: {call.full_name} cut by the end of the recording (entered at "
                                     f"{rel(call.t_enter)}, {format_duration(model.end_ns - call.t_enter)} "
                                     f"before the trace ends; whether it returned was lost)"))
    return out


def find_wedges(model: SessionModel, slow_ns: int = 1_000_000_000) -> list[Wedge]:
    """Every wedge in the session, most important first (``rank`` 1 is the top)."""
    finder = _Finder(model, slow_ns)
    wedges = finder.calls() + finder.gsp() + finder.channels() + finder.ranks() + finder.quiet()
    wedges.sort(key=lambda w: (-w.score, w.t_ns if w.t_ns is not None else 0))
    for i, w in enumerate(wedges, 1):
        w.rank = i
    return wedges
