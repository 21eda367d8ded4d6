"""The embedded reference host-service model as a target (``--against model``, ``model:legacy``)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rmtrace.replayer.messages import Message, Outcome
from rmtrace.replayer.model.core import HostModel, VirtualClock
from rmtrace.replayer.model.policy import Policy
from rmtrace.replayer.model.records import GspRecords, SemaRecords
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import Reply, RunInfo, Sink, Target


class ModelTarget(Target):
    """Runs every message through a :class:`HostModel` on a virtual clock."""

    answers = frozenset({"status"})

    def __init__(self, policy: Policy, semantics: Semantics, clock: Any = None) -> None:
        """``clock``: the model's time; a virtual clock (the default) unless serving real clients."""
        self.policy = policy
        self.semantics = semantics
        self.name = f"model:{policy.name}"
        self._own_clock = clock
        self.clock = clock or VirtualClock()
        self.model = HostModel(policy, self.clock)
        self._messages: dict[Hashable, Message] = {}

    def open(self, info: RunInfo, sink: Sink | None) -> None:
        self.clock = self._own_clock or VirtualClock(int(info.meta.get("start_monotonic_ns") or 0))
        emit = rpc = None
        if sink is not None:
            emit = SemaRecords(sink, self.clock, lambda: self.model.host.session)
            profile = self.semantics.profile
            rpc = GspRecords(sink, self.clock, profile) if GspRecords.available(profile) else None
        self.model = HostModel(self.policy, self.clock, emit, rpc)

    def now(self) -> int:
        return self.clock.now

    def submit(self, ticket: Hashable, client, msg: Message) -> Outcome | None:
        done, status = self.model.submit(ticket, client.label, client.pid, client.tid(msg), msg)
        if done:
            return self.outcome(msg, status)
        self._messages[ticket] = msg
        return None

    def wait(self, deadline_ns: int) -> list[Reply]:
        model = self.model
        while not model.finished:
            due = model.next_timer()
            if due is None or due > deadline_ns:
                model.run_until(deadline_ns)
                break
            model.run_until(due)
        return self._finished()

    def idle(self, ns: int) -> list[Reply]:
        if ns > 0:
            self.model.run_until(self.clock.now + ns)
        return self._finished() if self.model.finished else []

    def explain(self, ticket: Hashable) -> list[str]:
        return self.model.explain(ticket)

    def counters(self) -> dict[str, int]:
        return self.model.counters()

    def close(self) -> None:
        self.model.close()

    def _finished(self) -> list[Reply]:
        return [(ticket, self.outcome(self._messages.pop(ticket), status))
                for ticket, status in self.model.take_finished()]

    def outcome(self, msg: Message, status: str | None) -> Outcome:
        """The answer to ``msg``: bare metal's where the model has nothing to add, else its own status."""
        expect = msg.expect
        if expect.response is False:
            return Outcome()
        if status is None:
            return Outcome(expect.status, record=msg.reply or self.semantics.answer(msg.request))
        code = self.semantics.status_code(status)
        if code == expect.status:
            return Outcome(code, record=msg.reply)
        record = self.semantics.answer(msg.reply or msg.request, code)
        return Outcome(code, record=record)
