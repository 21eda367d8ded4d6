"""The replay loop: a plan's messages, in a schedule's order, through a target, under a watchdog.

Every client's messages travel in *lanes* (one per stream): a lane sends its
next message once the previous one was answered and every message it
depends on (handles, files; possibly in another lane) was answered too.
The schedule picks which ready lane goes; the target answers at once or
later.  When nothing is ready the runner waits on the target until the
earliest outstanding message's deadline (``timeout``): a message unanswered
by then wedges its client at that message, and the client stops -- its
outstanding call stays outstanding in the target, holding whatever it holds,
as a stuck process does.

Each answer is compared with what the recording says came back (only the
parts the target answers), giving per client: green, diverged at message N
(with the difference) or wedged at message N (with the chain of why).  An
oracle may keep some answers for the end (a status that depends on other
clients, judged across the clients whose runs overlapped: ``Oracle.settle``).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmtrace.replayer.messages import Difference, Message, Outcome, compare
from rmtrace.replayer.oracle import Oracle
from rmtrace.replayer.output import ReplayWriter, provenance
from rmtrace.replayer.plan import Plan, PlanClient
from rmtrace.replayer.schedules import Schedule, policy_for
from rmtrace.replayer.targets.base import Reply, RunInfo, Target, Ticket

from rmtrace.exitcodes import ExitCode
from rmtrace.record import MarkOp

DEFAULT_TIMEOUT_NS = 10_000_000_000
STARVED = "cannot send"
"""How the chain of a lane starved by another lane's wedge begins."""


class Verdict(enum.Enum):
    GREEN = "green"
    DIVERGED = "diverged"
    WEDGED = "wedged"


EXIT_STATUS = {Verdict.GREEN: ExitCode.OK, Verdict.DIVERGED: ExitCode.FOUND, Verdict.WEDGED: ExitCode.WEDGED}
"""A run's exit status is its worst client's (docs/exit-codes.md: the numbers rise with severity)."""


@dataclass(eq=False)
class ClientResult:
    client: PlanClient
    verdict: Verdict = Verdict.GREEN
    at: Message | None = None
    """The message it diverged or wedged at."""
    differences: list[Difference] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    """Why it wedged, as the target explains it."""
    wedge_chain: list[str] = field(default_factory=list)
    """Why it wedged, as ``rmtrace wedges`` reads it off the replay's trace (see chains.py)."""
    sent: int = 0
    answered: int = 0
    diverged: int = 0
    """How many messages differed (the verdict names the first)."""
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(message index, why) of the messages the target left out (never sent, never compared)."""
    across: int = 0
    """How many of its answers were judged across the clients running beside it (see oracle.py)."""

    def summary(self) -> str:
        if self.verdict is Verdict.GREEN or self.at is None:
            left_out = f", {len(self.skipped)} skipped" if self.skipped else ""
            across = f", {self.across} judged across clients" if self.across else ""
            return f"green ({self.answered} messages{left_out}{across})"
        where = f"at message {self.at.index + 1} {self.at.name}"
        if self.verdict is Verdict.DIVERGED:
            more = f" (+{self.diverged - 1} more)" if self.diverged > 1 else ""
            return f"diverged {where}: {'; '.join(map(str, self.differences))}{more}"
        return f"wedged {where}"

    def to_json(self) -> dict[str, Any]:
        at = self.at
        return {
            "client": self.client.id, "label": self.client.label, "pid": self.client.pid,
            "origin": self.client.origin, "run": self.client.run, "verdict": self.verdict.value,
            "message": at.index + 1 if at else None, "name": at.name if at else None,
            "recorded_seq": at.seq if at else None,
            "differences": [{"what": d.what, "expected": str(d.expected), "got": str(d.got)} for d in self.differences],
            "diverged_messages": self.diverged, "chain": self.chain, "sent": self.sent, "answered": self.answered,
            "messages": len(self.client.messages),
            "skipped": len(self.skipped),
        }


@dataclass(eq=False)
class ReplayResult:
    schedule: Schedule
    target: str
    clients: list[ClientResult]
    counters: dict[str, int]
    output: str | None
    messages: int
    wall_s: float
    notes: list[str] = field(default_factory=list)
    """What the oracle and the target report beyond the verdicts (printed after the table)."""

    @property
    def exit_status(self) -> int:
        return max((EXIT_STATUS[c.verdict] for c in self.clients), default=0)

    @property
    def failed(self) -> bool:
        return self.exit_status != 0


class _Lane:
    """One stream of one client: its messages in order and where it stands."""

    __slots__ = ("run", "number", "messages", "pos", "busy", "key", "cross")

    def __init__(self, run: _ClientRun, number: int, messages: list[Message], cross: list[tuple[int, ...]]) -> None:
        self.run = run
        self.number = number
        self.messages = messages
        self.pos = 0
        self.busy = False
        self.key = (run.order, number)
        self.cross = cross
        """Per position: the messages in other lanes it waits for (same-lane ones hold by lane order)."""

    @property
    def next(self) -> Message | None:
        return self.messages[self.pos] if self.pos < len(self.messages) else None

    def rank(self) -> tuple:
        msg = self.messages[self.pos]
        return (msg.seq, self.run.order, self.number)

    def ready(self) -> bool:
        if self.busy or self.pos >= len(self.messages):
            return False
        need = self.cross[self.pos]
        if not need:
            return True
        answered = self.run.answered
        return all(d in answered for d in need)


def _lanes_of(messages: list[Message]) -> list[tuple[int, list[Message], list[tuple[int, ...]]]]:
    """(lane number, its messages, their cross-lane dependencies) of one client's messages."""
    lane_of = {m.index: m.lane for m in messages}
    lanes: dict[int, list[Message]] = {}
    for m in messages:
        lanes.setdefault(m.lane, []).append(m)
    return [(n, msgs, [tuple(d for d in m.deps if lane_of[d] != n) for m in msgs]) for n, msgs in sorted(lanes.items())]


class _ClientRun:
    __slots__ = ("client", "order", "result", "lanes", "answered", "dead", "unsent", "busy", "started")

    def __init__(self, client: PlanClient, order: int, shape: list) -> None:
        self.client = client
        self.order = order
        self.result = ClientResult(client)
        self.answered: set[int] = set()
        self.dead = False
        self.unsent = len(client.messages)
        self.busy = 0
        self.started = False
        self.lanes = [_Lane(self, n, msgs, cross) for n, msgs, cross in shape]

    @property
    def finished(self) -> bool:
        return self.dead or (self.unsent == 0 and self.busy == 0)


class Runner:
    """One replay of a plan; see the module docstring."""

    def __init__(self, plan: Plan, schedule: Schedule, target: Target, *, timeout_ns: int = DEFAULT_TIMEOUT_NS,
                 output: str | None = None, status_name: Callable[[int], str] | None = None,
                 oracle: Oracle | None = None) -> None:
        self.plan = plan
        self.oracle = oracle
        """What an answer is checked against; None: the recording, as ``compare`` reads it."""
        self.schedule = schedule
        self.target = target
        self.timeout_ns = timeout_ns
        self.policy = policy_for(schedule)
        shapes: dict[int, list] = {}  # repeats of a client share its message list, hence its lanes' shape
        self.runs = [_ClientRun(c, n, shapes.get(id(c.messages)) or shapes.setdefault(id(c.messages),
                                                                                     _lanes_of(c.messages)))
                     for n, c in enumerate(plan.clients)]
        self.open_runs = [run for run in self.runs if not run.finished]
        self.inflight: dict[Ticket, tuple[_Lane, Message, int]] = {}
        self.stuck: dict[Ticket, tuple[_Lane, Message, int]] = {}
        """Messages past their deadline: never waited on again, still outstanding in the target."""
        self.status_name = status_name or plan.semantics.status_name
        self.output = output
        self.writer: ReplayWriter | None = None
        self.overlaps: list[tuple[str, str]] = []
        """Pairs of clients whose runs overlapped: one started while the other still had calls to make (a
        client whose last call, its exit, is still in flight has made them all: the recorded schedule lets
        the next client of a sequential recording start then)."""

    # ------------------------------------------------------------------ the loop

    def run(self) -> ReplayResult:
        started = time.perf_counter()
        info = RunInfo(self.plan.meta, str(self.schedule), self.schedule.seed,
                       tuple((c.id, c.pid, c.label) for c in self.plan.clients))
        if self.output is not None:
            self.writer = ReplayWriter(self.output, self._meta())
        target = self.target
        self._open(info)
        try:
            try:
                self._loop()
            finally:
                try:
                    target.close()
                finally:
                    if self.oracle is not None:
                        self.oracle.close()
            self._settle()
            self._finish()
        finally:
            if self.writer is not None:
                self.writer.mark(MarkOp.STOP, target.now(), {"why": "replay finished", "exit_status": self._status()})
                self.writer.close()
        notes = (self.oracle.report() if self.oracle is not None else []) + target.report()
        return ReplayResult(self.schedule, target.name, [r.result for r in self.runs], target.counters(),
                            self.output, self.plan.message_count, time.perf_counter() - started, notes)

    def _open(self, info: RunInfo) -> None:
        """The target, then the oracle; if either cannot open, the replay never started and leaves no trace."""
        try:
            self.target.open(info, self.writer.raw if self.writer else None)
            try:
                if self.oracle is not None:
                    self.oracle.open(info)
            except BaseException:
                self.target.close()
                raise
        except BaseException:
            if self.writer is not None:
                self.writer.discard()
            raise

    def _loop(self) -> None:
        target, policy = self.target, self.policy
        while True:
            lanes = self._open_lanes()
            ready = [lane for lane in lanes if lane.ready()]
            lane = policy.pick(ready, lanes) if ready else None
            if lane is not None:
                self._run_lane(lane, len(lanes) == 1 and policy.one_client_at_a_time)
                continue
            if not self.inflight:
                if not lanes:
                    return
                self._starved(lanes)
                continue
            deadline = min(d for _l, _m, d in self.inflight.values())
            replies = target.wait(deadline)
            if replies:
                self._handle(replies)
            elif target.now() >= deadline:
                self._expire(target.now())

    def _run_lane(self, lane: _Lane, alone: bool) -> None:
        """Send the lane's next message; a lane alone in a one-at-a-time schedule keeps going while it can."""
        target, policy = self.target, self.policy
        while True:
            msg = lane.messages[lane.pos]
            think = policy.think(lane, msg)
            if think > 0:
                replies = target.idle(think)
                if replies:
                    self._handle(replies)
            self._send(lane, msg)
            if self.inflight:
                replies = target.idle(0)
                if replies:
                    self._handle(replies)
            if not (alone and lane.ready()):
                return

    def _open_lanes(self) -> list[_Lane]:
        """Lanes with messages left, of the clients the schedule has started."""
        runs = self.open_runs
        while runs and runs[0].finished:
            runs.pop(0)
        lanes = []
        for run in runs[:1] if self.policy.one_client_at_a_time else runs:
            if run.finished:
                continue
            for lane in run.lanes:
                if lane.pos < len(lane.messages):
                    lanes.append(lane)
        return lanes

    def _send(self, lane: _Lane, msg: Message) -> None:
        run = lane.run
        client = run.client
        ticket = (client.id, msg.index)
        lane.pos += 1
        lane.busy = True
        run.unsent -= 1
        run.busy += 1
        run.result.sent += 1
        target = self.target
        now = target.now()
        if self.writer is not None and not run.started and client.argv:
            self.writer.exec(now, client.pid, client.argv)
        if not run.started:  # it starts while these have calls still to make: their runs overlap
            self.overlaps.extend((other.client.id, client.id) for other in self.runs
                                 if other is not run and other.started and other.unsent > 0)
        run.started = True
        reason = target.skip(ticket, client, msg)
        if reason is not None:
            self._skipped(lane, msg, reason, now)
            return
        if self.writer is not None:
            self.writer.message(msg.request, now, client.pid, client.tid(msg))
        outcome = target.submit(ticket, client, msg)
        if outcome is None:
            self.inflight[ticket] = (lane, msg, now + self.timeout_ns)
            return
        if msg.dur_ns > 0:
            replies = target.idle(msg.dur_ns)
            if replies:
                self._handle(replies)
        self._answered(lane, msg, outcome)

    def _skipped(self, lane: _Lane, msg: Message, reason: str, now: int) -> None:
        """A message the target leaves out: noted in the trace, counted, never compared."""
        run = lane.run
        lane.busy = False
        run.busy -= 1
        run.answered.add(msg.index)
        run.result.sent -= 1
        run.result.skipped.append((msg.index, reason))
        if self.writer is not None:
            client = run.client
            self.writer.mark(MarkOp.NOTE, now, {"skipped": reason, "message": msg.index + 1, "name": msg.name},
                             pid=client.pid, tid=client.tid(msg), call_id=msg.call_id)

    def _handle(self, replies: list[Reply]) -> None:
        for ticket, outcome in replies:
            entry = self.inflight.pop(ticket, None) or self.stuck.pop(ticket, None)
            if entry is not None:
                self._answered(entry[0], entry[1], outcome)

    def _answered(self, lane: _Lane, msg: Message, outcome: Outcome) -> None:
        run = lane.run
        lane.busy = False
        run.busy -= 1
        run.answered.add(msg.index)
        result = run.result
        result.answered += 1
        if self.writer is not None and outcome.record is not None:
            self.writer.message(outcome.record, self.target.now(), run.client.pid, run.client.tid(msg))
        if self.oracle is not None:
            diffs = self.oracle.differences(run.client, msg, outcome)
        else:
            diffs = compare(msg.expect, outcome, self.status_name)
        if diffs:
            self._diverged(result, msg, diffs)

    @staticmethod
    def _diverged(result: ClientResult, msg: Message, diffs: list[Difference]) -> None:
        """A difference at ``msg``: the verdict names the client's first (in message order: an oracle
        may judge an answer late)."""
        result.diverged += 1
        if result.verdict is Verdict.GREEN or (result.verdict is Verdict.DIVERGED and result.at is not None
                                               and msg.index < result.at.index):
            result.verdict, result.at, result.differences = Verdict.DIVERGED, msg, diffs

    def _settle(self) -> None:
        """The oracle's late judgements: statuses judged across the clients whose runs overlapped."""
        if self.oracle is None:
            return
        results = {run.client.id: run.result for run in self.runs}
        for client, msg, diffs in self.oracle.settle(self._overlapping()):
            self._diverged(results[client], msg, diffs)
        for cid, result in results.items():
            result.across = self.oracle.judged_across(cid)

    def _overlapping(self) -> list[frozenset[str]]:
        """The sets of clients whose runs overlapped (a client that ran alone is a set of its own)."""
        group = {run.client.id: frozenset({run.client.id}) for run in self.runs}
        for a, b in self.overlaps:
            merged = group[a] | group[b]
            for cid in merged:
                group[cid] = merged
        return list(dict.fromkeys(group.values()))

    def _expire(self, now: int) -> None:
        """The watchdog: every message past its deadline wedges its client."""
        for ticket, (lane, msg, deadline) in list(self.inflight.items()):
            if deadline <= now:
                self.stuck[ticket] = self.inflight.pop(ticket)
                chain = self.target.explain(ticket) or [
                    f"{lane.run.client.label} got no answer to {msg.name} (message {msg.index + 1}) "
                    f"within {self.timeout_ns / 1e9:g}s"]
                self._wedge(lane.run, msg, chain)

    @staticmethod
    def _wedge(run: _ClientRun, msg: Message, chain: list[str]) -> None:
        if run.dead:
            return
        run.dead = True
        run.busy = 0
        result = run.result
        result.verdict, result.at, result.differences, result.chain = Verdict.WEDGED, msg, [], chain

    def _starved(self, lanes: list[_Lane]) -> None:
        """Nothing is ready and nothing outstanding: the open lanes wait on messages of wedged lanes."""
        for lane in lanes:
            run = lane.run
            msg = lane.next
            if msg is None:  # open lanes have a next message
                continue
            missing = [d for d in lane.cross[msg.index] if d not in run.answered]
            self._wedge(run, msg, [f"{run.client.label} {STARVED} {msg.name} (message {msg.index + 1}): it "
                                   f"needs message {', '.join(str(d + 1) for d in missing)}, never answered"])

    # ------------------------------------------------------------------ the end

    def _finish(self) -> None:
        now = self.target.now()
        writer = self.writer
        if writer is None:
            return
        for lane, msg, _deadline in {**self.inflight, **self.stuck}.values():
            client = lane.run.client
            writer.mark(MarkOp.IN_FLIGHT, now, {"replay": "no answer", "message": msg.index + 1, "name": msg.name},
                        pid=client.pid, tid=client.tid(msg), call_id=msg.call_id)
        for run in self.runs:
            body = {**run.result.to_json(), "target": self.target.name, "schedule": str(self.schedule)}
            writer.mark(MarkOp.VERDICT, now, body, pid=run.client.pid)

    def _status(self) -> int:
        return max((EXIT_STATUS[r.result.verdict] for r in self.runs), default=0)

    def _meta(self) -> dict[str, Any]:
        meta = dict(self.plan.meta)
        meta["replay"] = {
            "source": self.plan.source, "target": self.target.name, "schedule": str(self.schedule),
            "seed": self.schedule.seed, "timeout_ns": self.timeout_ns,
            "clients": [{"id": c.id, "pid": c.pid, "label": c.label, "origin": c.origin, "run": c.run,
                         "lanes": c.lanes, "messages": len(c.messages)} for c in self.plan.clients],
        }
        meta["made"] = provenance(self.plan.meta, self.plan.source, "rmtrace replay")
        meta["command"] = ["rmtrace", "replay", self.plan.source]
        return meta


def replay(plan: Plan, schedule: Schedule, target: Target, **kwargs: Any) -> ReplayResult:
    """Run ``plan`` once in ``schedule`` against ``target`` (see :class:`Runner`)."""
    return Runner(plan, schedule, target, **kwargs).run()
