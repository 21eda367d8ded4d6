"""The recording itself as a target (``--against recorded``): answers what bare metal answered.

Each request is looked up in the recorded trace -- its calls paired afresh by
the decoders (ENTER with EXIT by call id, GSP requests with responses by RPC
sequence) -- and answered with the reply recorded there, decoded afresh; a
call the recording never saw answered gets no answer.  Replaying a capture
against itself in the recorded schedule must be green with zero
divergences: a check of the whole path (cutting, scheduling, comparing,
writing) with nothing modelled.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rmtrace.replayer.messages import Message, Outcome
from rmtrace.replayer.model.core import VirtualClock
from rmtrace.replayer.plan import REPLAYED_SOURCES
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import Reply, RunInfo, Sink, Target

from rmtrace.record import encode_record
from rmtrace.trace import TraceReader


class RecordedTarget(Target):
    name = "recorded"
    answers = frozenset({"status", "ret", "err", "fields"})

    def __init__(self, trace: str, semantics: Semantics) -> None:
        self.semantics = semantics
        self.clock = VirtualClock()
        self.replies: dict[int, bytes] = {}
        """The recorded reply to the request with this sequence number."""
        with TraceReader(trace) as reader:
            for call in semantics.decoders.calls(reader.records(source=REPLAYED_SOURCES)):
                if len(call.records) > 1:
                    self.replies[call.records[0].seq] = encode_record(call.records[-1])

    def open(self, info: RunInfo, sink: Sink | None) -> None:
        self.clock = VirtualClock(int(info.meta.get("start_monotonic_ns") or 0))

    def now(self) -> int:
        return self.clock.now

    def submit(self, ticket: Hashable, client: Any, msg: Message) -> Outcome | None:
        if msg.expect.response is False:
            return Outcome()
        reply = self.replies.get(msg.seq)
        if reply is None:
            return None
        status, ret, err, fields = self.semantics.reply_status(msg.request, reply)
        return Outcome(status, ret, err, fields, record=reply)

    def wait(self, deadline_ns: int) -> list[Reply]:
        self.clock.advance(deadline_ns)
        return []

    def idle(self, ns: int) -> list[Reply]:
        self.clock.advance(self.clock.now + ns)
        return []
