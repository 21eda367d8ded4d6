"""Delta debugging of a wedge: the smallest trace that still wedges the same way.

``reduce`` replays a plan, takes the *root* wedges of the result (clients
blocked on something other than another client: a host completion that
never comes, not a lock another wedged client holds) as the failure's
signature, then runs ddmin (Zeller and Hildebrandt, "Simplifying and
Isolating Failure-Inducing Input", 2002) first over whole clients, then over
the messages of the clients left.  Every candidate is closed under the
messages' dependencies (a message stays only with the messages that
allocate the handles and open the files it uses), so each replay is of a
well-formed session.  The result is written as an ordinary trace: the kept
messages' recorded requests and replies, each client its own process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rmtrace.replayer.model.core import STAGES
from rmtrace.replayer.output import exec_record, provenance, stamp
from rmtrace.replayer.plan import Plan, build_plan, dependency_closure, link
from rmtrace.replayer.runner import STARVED, ReplayResult, Verdict, replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets.base import Target

from rmtrace.errors import RmtraceError
from rmtrace.record import decode_record
from rmtrace.semantics import LOCKS
from rmtrace.trace import TraceWriter

WAIT_KINDS: tuple[tuple[str, str], ...] = (
    *((f"waiting for the {rule.name}", "lock") for rule in LOCKS.values()),
    *((stage, stage) for stage in STAGES),
    (STARVED, "starved"),
)
"""How a wedge's chain begins (the model's lock and stage words, the runner's) -> what kind of wait
it is; waits for a lock and starved lanes are waits on other clients."""
SECONDARY = frozenset({"lock", "starved"})
RUN_GAP_NS = 1_000_000


def wait_kind(chain: Sequence[str]) -> str:
    first = chain[0] if chain else ""
    return next((kind for phrase, kind in WAIT_KINDS if phrase in first), "no answer")


def signature(result: ReplayResult) -> tuple[tuple[str, str], ...]:
    """The root wedges of a replay: (message name, kind of wait) of each client not waiting on another."""
    roots = {(c.at.name, wait_kind(c.chain)) for c in result.clients if c.verdict is Verdict.WEDGED and c.at}
    return tuple(sorted(r for r in roots if r[1] not in SECONDARY))


@dataclass
class Reduction:
    plan: Plan
    signature: tuple
    before_clients: int
    before_messages: int
    tests: int

    @property
    def messages(self) -> int:
        return self.plan.message_count

    def describe(self) -> str:
        removed = 100.0 * (1 - self.messages / self.before_messages) if self.before_messages else 0.0
        return (f"reduced {self.before_clients} clients / {self.before_messages} messages to "
                f"{len(self.plan.clients)} client{'s' * (len(self.plan.clients) != 1)} / {self.messages} messages "
                f"(removed {removed:.1f} % of the messages) in {self.tests} replays")


class Reducer:
    """Runs ddmin for one plan, schedule and target; see the module docstring."""

    def __init__(self, plan: Plan, schedule: Schedule, target: Callable[[Plan], Target], timeout_ns: int) -> None:
        self.plan = plan
        self.schedule = schedule
        self.target = target
        self.timeout_ns = timeout_ns
        self.tests = 0
        self.wanted: tuple = ()

    def run(self) -> Reduction:
        first = self._replay(self.plan)
        self.wanted = signature(first)
        if not self.wanted:
            raise RmtraceError(f"{self.plan.source}: its replay does not wedge on its own (no client blocked on the host): "
                               "nothing to reduce" + ("" if first.failed else "; every client was green"))
        clients = self._ddmin(list(range(len(self.plan.clients))), self._clients_fail)
        plan = self._with_clients(clients)
        keys = [(c, m.index) for c, client in enumerate(plan.clients) for m in client.messages]
        base = plan
        kept = self._ddmin(keys, lambda subset: self._fails(self._subset(base, subset)), close=self._closer(base))
        reduced = self._subset(base, kept)
        return Reduction(reduced, self.wanted, len(self.plan.clients), self.plan.message_count, self.tests)

    # -- tests

    def _replay(self, plan: Plan) -> ReplayResult:
        self.tests += 1
        return replay(plan, self.schedule, self.target(plan), timeout_ns=self.timeout_ns)

    def _fails(self, plan: Plan) -> bool:
        return bool(plan.clients) and signature(self._replay(plan)) == self.wanted

    def _clients_fail(self, subset: Sequence[int]) -> bool:
        return self._fails(self._with_clients(subset))

    def _with_clients(self, subset: Sequence[int]) -> Plan:
        return replace(self.plan, clients=[self.plan.clients[i] for i in sorted(subset)])

    @staticmethod
    def _closer(plan: Plan) -> Callable[[Sequence[tuple[int, int]]], list[tuple[int, int]]]:
        def close(subset: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
            out = []
            for c, client in enumerate(plan.clients):
                wanted = [i for cc, i in subset if cc == c]
                out += [(c, i) for i in sorted(dependency_closure(client.messages, wanted))]
            return out
        return close

    @staticmethod
    def _subset(plan: Plan, keys: Sequence[tuple[int, int]]) -> Plan:
        """The plan with only these messages, renumbered, dependencies recomputed."""
        clients = []
        for c, client in enumerate(plan.clients):
            keep = sorted(i for cc, i in keys if cc == c)
            if not keep:
                continue
            by_index = {m.index: m for m in client.messages}
            messages = [replace(by_index[i], index=n) for n, i in enumerate(keep)]
            link(messages)
            clients.append(replace(client, messages=messages))
        return replace(plan, clients=clients)

    # -- ddmin

    @staticmethod
    def _ddmin(items: list, fails: Callable[[Sequence], bool], close: Callable[[Sequence], list] = list) -> list:
        """ddmin: try each of n chunks, then each complement; halve the chunks when neither fails."""
        items = close(items)
        n = 2
        while len(items) >= 2:
            size = math.ceil(len(items) / n)
            chunks = [items[i:i + size] for i in range(0, len(items), size)]
            found = None
            for chunk in chunks:
                candidate = close(chunk)
                if len(candidate) < len(items) and fails(candidate):
                    found, n = candidate, 2
                    break
            else:
                for chunk in chunks if n > 2 else ():
                    dropped = set(chunk)
                    candidate = close([x for x in items if x not in dropped])
                    if len(candidate) < len(items) and fails(candidate):
                        found, n = candidate, max(n - 1, 2)
                        break
            if found is not None:
                items = found
                continue
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
        return items


def reduce_plan(plan: Plan, schedule: Schedule, target: Callable[[Plan], Target], timeout_ns: int) -> Reduction:
    return Reducer(plan, schedule, target, timeout_ns).run()


def write_plan(plan: Plan, path: str, extra_meta: dict[str, Any]) -> str:
    """The plan's messages as a trace: recorded requests and replies, each client its own process,
    repeats laid out one after another."""
    records: list[tuple[int, int, bytes]] = []
    span = _span(plan)
    for c in plan.clients:
        shift = (c.run - 1) * (span + RUN_GAP_NS)
        if c.argv and c.messages:
            t = decode_record(c.messages[0].request).time_ns + shift - 1
            records.append((t, len(records), exec_record(t, c.pid, c.argv)))
        for m in c.messages:
            for data in (m.request, m.reply):
                if data is None:
                    continue
                t = decode_record(data).time_ns + shift
                records.append((t, len(records), stamp(data, t, c.pid, c.tid(m), 0)))
    records.sort()
    meta = {**plan.meta, **extra_meta, "backend": "reduce", "made": provenance(plan.meta, plan.source, "rmtrace reduce")}
    with TraceWriter(path, meta) as writer:
        for _t, _n, data in records:
            writer.write_encoded(data)
    return path


def _span(plan: Plan) -> int:
    times = [decode_record(m.request).time_ns for c in plan.clients for m in c.messages]
    return max(times) - min(times) if times else 0


def check(path: str, schedule: Schedule, target: Callable[[Plan], Target], timeout_ns: int,
          wanted: tuple) -> bool:
    """Whether the written trace, cut afresh, still wedges the same way."""
    plan = build_plan(path)
    return signature(replay(plan, schedule, target(plan), timeout_ns=timeout_ns)) == wanted
