"""Any host service behind a Unix socket (``--against unix:PATH[,clock=real]``), speaking docs/replay-protocol.md.

Clocks (docs/replay-protocol.md, "Time"): the client asks for a ``virtual``
clock by default.  A service that grants it moves its clock only when the
runner lets time pass (an ``advance``) and acknowledges each request and
advance after whatever it caused, with its clock; the replay is then
deterministic and equal, message by message, to ``--against model``.  A
service that does not grant it runs on CLOCK_MONOTONIC (``real``), as does
one asked for ``clock=real``; the watchdog is then real time.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Hashable
from typing import Any

from rmtrace.replayer.messages import Message, Outcome
from rmtrace.replayer.protocol import (
    Stream,
    control,
    control_body,
    request_key,
)
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import Reply, RunInfo, Sink
from rmtrace.replayer.targets.service import ServiceTarget

from rmtrace.errors import RmtraceError
from rmtrace.record import MarkOp

HELLO_TIMEOUT_S = 10.0
WHY_TIMEOUT_S = 2.0
ACK_TIMEOUT_S = 10.0
"""How long a virtual-clock service may take, in real time, to acknowledge one request or advance."""


class UnixTarget(ServiceTarget):
    """The client end of the replay protocol; see the module docstring for its clocks."""

    def __init__(self, path: str, semantics: Semantics, clock: str = "virtual") -> None:
        super().__init__(semantics)
        self.path = path
        self.clock = clock
        """The clock asked for; after open, the one the service runs."""
        self.name = f"unix:{path}"
        self._stream: Stream | None = None
        self._sel = selectors.DefaultSelector()

    def open(self, info: RunInfo, sink: Sink | None) -> None:
        self._sink = sink
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise RmtraceError(f"cannot reach a replay service at {self.path}: {exc.strerror or exc} "
                               f"(start one with 'rmtrace model serve --socket {self.path}')") from None
        sock.setblocking(False)
        self._stream = Stream(sock)
        self._sel.register(sock, selectors.EVENT_READ)
        self._stream.send(control(MarkOp.NOTE, {"hello": True, "meta": info.meta, "schedule": info.schedule,
                                                "clients": [list(c) for c in info.clients], "clock": self.clock}))
        body = self._hello_reply(time.monotonic() + HELLO_TIMEOUT_S)
        self.name = f"unix:{self.path} ({body.get('service', '?')})"
        self.answers = frozenset(body.get("answers", ["status"]))
        self.clock = "virtual" if self.clock == "virtual" and body.get("clock") == "virtual" else "real"
        self._now = int(body.get("now_ns") or 0)

    def _hello_reply(self, until: float) -> dict[str, Any]:
        while time.monotonic() < until:
            for record in self._drain(until - time.monotonic()):
                body = control_body(record)
                if body is not None and body.get("hello"):
                    return body
                if self._sink is not None:
                    self._sink(record.encode())
        raise RmtraceError(f"the service at {self.path} did not answer the replay hello")

    @property
    def virtual(self) -> bool:
        return self.clock == "virtual"

    def now(self) -> int:
        return self._now if self.virtual else time.monotonic_ns()

    def submit(self, ticket: Hashable, client: Any, msg: Message) -> Outcome | None:
        request, record = self._request(client, msg, self.now())
        self._pending[request_key(record)] = (ticket, msg, request)
        self._send(*self._hint(client, msg, self.now(), record.call_id), request)  # the hint goes first
        return self._answered(ticket)

    def wait(self, deadline_ns: int) -> list[Reply]:
        if self.virtual:
            if not self._ready:
                self._send(control(MarkOp.NOTE, {"advance": deadline_ns, "until_answer": True}))
            return self._flush()
        while not self._ready:
            left = (deadline_ns - self.now()) / 1e9
            if left <= 0:
                break
            self._take(self._drain(left))
            if self.stream.closed:
                break
        return self._flush()

    def idle(self, ns: int) -> list[Reply]:
        if not self.virtual:
            self._take(self._drain(0))
        elif ns > 0:  # with no time passing, a virtual clock's service has sent all it will before its last ack
            self._send(control(MarkOp.NOTE, {"advance": self._now + ns, "until_answer": False}))
        return self._flush()

    def explain(self, ticket: Hashable) -> list[str]:
        """Ask the service why a request is unanswered (a service may not know: then nothing)."""
        key = self._pending_key(ticket)
        if key is None or self._stream is None:
            return []
        self._stream.send(control(MarkOp.NOTE, {"why": list(key)}))
        until = time.monotonic() + WHY_TIMEOUT_S
        while time.monotonic() < until and self._why.get(key) is None:
            self._take(self._drain(until - time.monotonic()))
        return self._why.pop(key, None) or []

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.send(control(MarkOp.STOP, {"bye": True}))
                deadline = time.monotonic() + 1.0
                while not self._stream.closed and time.monotonic() < deadline:
                    self._take(self._drain(deadline - time.monotonic()))
            except RmtraceError:
                pass
            self._sel.close()
            self._stream.sock.close()
            self._stream = None

    # -- internals

    @property
    def stream(self) -> Stream:
        """The connection, between open and close."""
        if self._stream is None:
            raise RmtraceError(f"the {self.name} target is not open")
        return self._stream

    def _send(self, *parts: bytes) -> None:
        """Send; on a virtual clock, read what the send caused, up to the service's ack of it."""
        want = self._acks + 1
        self.stream.send(*parts)
        if not self.virtual:
            return
        until = time.monotonic() + ACK_TIMEOUT_S
        while self._acks < want:
            if self.stream.closed:
                raise RmtraceError(f"the service at {self.path} closed the connection")
            if time.monotonic() >= until:
                raise RmtraceError(f"the service at {self.path} did not acknowledge within {ACK_TIMEOUT_S:g}s")
            self._take(self._drain(until - time.monotonic()))

    def _drain(self, timeout: float):
        if self.stream.closed:
            return []
        if self._sel.select(max(timeout, 0.0)):
            self.stream.read_available()
        return list(self.stream.records())

    def _take(self, records) -> None:
        for record in records:
            if self._answer(record):
                continue
            body = control_body(record)
            if body is not None and body.get("ack"):
                self._acks += 1
                self._now = max(self._now, int(body.get("now_ns") or 0))
            elif body is not None and "why" in body:
                self._why[tuple(body["why"])] = list(body.get("chain", []))
            elif body is None:
                self._host_record(record)
