"""What the two targets that speak the replay protocol to another side share.

``kmod`` (``/dev/rmtrace-replay``, docs/kernel-shim.md) and ``unix:`` (a service
behind a socket, docs/replay-protocol.md) both send a message as records, get
its answer back as a record keyed like the request (``protocol.answer_key``),
and pass the host's own records (sema, GSP) on to the replay's trace, learning
its counters from them.  Only their transports and control records differ.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rmtrace.decoders.sema import SemaOp
from rmtrace.replayer.messages import Message, Outcome
from rmtrace.replayer.output import stamp
from rmtrace.replayer.protocol import EVENT_CALL_ID, answer_key, with_call_id
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import Reply, Sink, Target

from rmtrace.record import Phase, Record, RecordFlag, Source, decode_record


class ServiceTarget(Target):
    """A target on the other side of the replay protocol; subclasses bring the transport."""

    answers = frozenset({"status"})

    def __init__(self, semantics: Semantics) -> None:
        self.semantics = semantics
        self._sink: Sink | None = None
        self._pending: dict[tuple, tuple[Hashable, Message, bytes]] = {}
        """The requests sent and not yet answered, by the key their answer will carry."""
        self._ready: list[Reply] = []
        self._why: dict[tuple, list[str]] = {}
        self._counters: dict[str, int] = {}
        self._acks = 0
        self._now = 0

    def counters(self) -> dict[str, int]:
        return dict(self._counters)

    def _request(self, client: Any, msg: Message, now: int) -> tuple[bytes, Record]:
        """The message as sent: stamped for this replay; an event gets a call id of its own, so that its answer finds it."""
        request = stamp(msg.request, now, client.pid, client.tid(msg))
        record = decode_record(request)
        if record.phase == Phase.EVENT:
            request = with_call_id(request, EVENT_CALL_ID + msg.index)
            record = decode_record(request)
        return request, record

    def _hint(self, client: Any, msg: Message, now: int, call_id: int) -> list[bytes]:
        """What bare metal answered, flagged SYNTHETIC: a hint the service may use or ignore (none if unrecorded)."""
        if msg.reply is None:
            return []
        oracle = stamp(msg.reply, now, client.pid, client.tid(msg), RecordFlag.REPLAY | RecordFlag.SYNTHETIC)
        return [with_call_id(oracle, call_id)]

    def _answered(self, ticket: Hashable) -> Outcome | None:
        """The answer that came while its message was sent (a virtual clock's service answers before its ack)."""
        for i, (t, outcome) in enumerate(self._ready):
            if t == ticket:
                del self._ready[i]
                return outcome
        return None

    def _pending_key(self, ticket: Hashable) -> tuple | None:
        return next((k for k, (t, _m, _r) in self._pending.items() if t == ticket), None)

    def _answer(self, record: Record) -> bool:
        """If ``record`` answers a pending request, its outcome is ready (True)."""
        key = answer_key(record)
        pending = self._pending.pop(key, None) if key is not None else None
        if pending is None:
            return False
        ticket, msg, request = pending
        self._ready.append((ticket, self._outcome(msg, request, record)))
        return True

    def _host_record(self, record: Record) -> None:
        """The host's own record (sema, GSP): into the replay's trace; its counters noted."""
        if record.source == Source.SEMA and record.op == SemaOp.COUNTERS:
            args = self.semantics.decoders.decode(record).args
            self._counters = {k: v for k, v in args.items() if k not in ("vgpu", "session")}
        if self._sink is not None:
            self._sink(record.encode())

    def _outcome(self, msg: Message, request: bytes, answer: Record) -> Outcome:
        data = answer.encode()
        if msg.expect.response is False:
            return Outcome()
        status, ret, err, fields = self.semantics.reply_status(request, data)
        said = self.answers
        return Outcome(status if "status" in said else None, ret if "ret" in said else None,
                       err if "err" in said else None, fields if "fields" in said else None, record=data)

    def _flush(self) -> list[Reply]:
        out, self._ready = self._ready, []
        return out
