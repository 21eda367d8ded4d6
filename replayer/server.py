"""``rmtrace model serve``: the host-service model as the replay protocol's reference server.

One listening Unix socket; each connection is one replay with a fresh model
(a fresh host, as a rebooted host service would be).  The connection's hello
names the recorded driver, so requests are decoded with the same profile the
client cut them with; every request gets exactly one answer when the model
completes it (never, for a wedge), and the model's sema records go to the
client as they happen.

Each session runs on the clock its hello asks for.  ``virtual`` (what
``--against unix:`` asks by default): the session's model has its own
virtual clock, started at the recording's start as ``--against model``'s is,
moved only by the client's ``advance`` records; every request and advance is
acknowledged, after the answers and records it caused, with the clock's
time.  Timers (drain bounds) then fire at exact virtual times and a replay
gives the in-process model's outcome whatever the machine's load.  ``real``
(or a hello that names no clock): the model runs on CLOCK_MONOTONIC, a
drain bound is real milliseconds and the client's watchdog real seconds.
"""

from __future__ import annotations

import os
import selectors
import socket
import stat
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.replayer.messages import Message
from rmtrace.replayer.model.core import WallClock
from rmtrace.replayer.model.policy import Policy
from rmtrace.replayer.output import stamp
from rmtrace.replayer.protocol import ANSWER_PHASES, Stream, control, control_body, request_key, with_call_id
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import RunInfo
from rmtrace.replayer.targets.model import ModelTarget

from rmtrace.calls import Call, CallState
from rmtrace.errors import RmtraceError
from rmtrace.record import MarkOp, Phase, Record, RecordFlag

ACCEPT_BACKLOG = 8


@dataclass(eq=False)
class _Peer:
    """A replayed process as the server knows it (what the model target asks of a client)."""

    pid: int
    label: str

    @staticmethod
    def tid(msg: Message) -> int:
        return msg.tid


@dataclass(eq=False)
class _Session:
    stream: Stream
    target: ModelTarget | None = None
    peers: dict[int, _Peer] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    oracles: dict[tuple, Record] = field(default_factory=dict)
    requests: dict[tuple, Record] = field(default_factory=dict)
    virtual: bool = False
    """The session's model runs on its own virtual clock, moved by the client's advances."""


class ModelServer:
    """Serves the model on ``path`` until ``stop`` is set (see the module docstring)."""

    def __init__(self, path: str, policy: Policy) -> None:
        self.path = path
        self.policy = policy
        self._decoders: dict[str, DecoderSet] = {}
        self._sel = selectors.DefaultSelector()
        self._sessions: dict[socket.socket, _Session] = {}
        self._listener = self._listen(path)
        self.clock = WallClock()

    @staticmethod
    def _listen(path: str) -> socket.socket:
        if os.path.exists(path):
            if not stat.S_ISSOCK(os.stat(path).st_mode):
                raise RmtraceError(f"{path} exists and is not a socket; not replacing it")
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
        except OSError as exc:
            sock.close()
            raise RmtraceError(f"cannot listen on {path}: {exc.strerror or exc}") from None
        sock.listen(ACCEPT_BACKLOG)
        sock.setblocking(False)
        return sock

    def serve(self, stop: threading.Event | None = None) -> None:
        self._sel.register(self._listener, selectors.EVENT_READ)
        try:
            while stop is None or not stop.is_set():
                for key, _events in self._sel.select(self._timeout()):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif isinstance(key.fileobj, socket.socket):
                        self._readable(key.fileobj)
                for session in list(self._sessions.values()):
                    if session.target is not None and not session.virtual:
                        self._answer(session, session.target.wait(self.clock.now))
        finally:
            for sock in list(self._sessions):
                self._drop(sock)
            self._sel.close()
            self._listener.close()
            if os.path.exists(self.path):
                os.unlink(self.path)

    def _timeout(self) -> float:
        """Sleep until the next real-clock model timer (drain bounds), at most a quarter second."""
        now = self.clock.now
        timers = [s.target.model.next_timer() for s in self._sessions.values()
                  if s.target is not None and not s.virtual]
        dues = [d for d in timers if d is not None]
        return max(0.0, min([0.25] + [(d - now) / 1e9 for d in dues]))

    def _accept(self) -> None:
        sock, _addr = self._listener.accept()
        sock.setblocking(False)
        self._sessions[sock] = _Session(Stream(sock))
        self._sel.register(sock, selectors.EVENT_READ)

    def _drop(self, sock: socket.socket) -> None:
        self._sel.unregister(sock)
        del self._sessions[sock]
        sock.close()

    def _readable(self, sock: socket.socket) -> None:
        session = self._sessions[sock]
        try:
            session.stream.read_available()
            for record in session.stream.records():
                if not self._record(session, record):
                    self._drop(sock)
                    return
        except RmtraceError:
            self._drop(sock)
            return
        if session.stream.closed:
            self._drop(sock)

    def _record(self, session: _Session, record: Record) -> bool:
        """Handle one record; False when the peer said goodbye."""
        body = control_body(record)
        if body is not None:
            if body.get("hello"):
                self._hello(session, body)
                return True
            if "why" in body and session.target is not None:
                key = tuple(body["why"])
                session.stream.send(control(MarkOp.NOTE, {"why": list(key), "chain": session.target.explain(key)}))
                return True
            if "advance" in body and session.target is not None:
                self._advance(session, session.target, int(body["advance"]), bool(body.get("until_answer")))
                return True
            if session.target is not None:
                session.target.close()
            return False
        if session.target is None:
            raise RmtraceError("a request before the hello")
        if record.flags & RecordFlag.SYNTHETIC:  # the oracle: kept as the reply bare metal gave
            session.oracles[request_key(record)] = replace(record, flags=record.flags & ~RecordFlag.SYNTHETIC)
            return True
        self._request(session, session.target, record)
        return True

    def _hello(self, session: _Session, body: dict[str, Any]) -> None:
        meta = body.get("meta") or {}
        version = str(meta.get("driver_version"))
        decoders = self._decoders.get(version)
        if decoders is None:
            decoders = self._decoders[version] = decoders_for(meta)
        session.virtual = body.get("clock") == "virtual"
        # a virtual session's target makes its own clock at the recording's start (ModelTarget.open)
        target = ModelTarget(self.policy, Semantics(decoders), clock=None if session.virtual else self.clock)
        session.peers = {int(pid): _Peer(int(pid), label) for _cid, pid, label in body.get("clients", [])}
        target.open(RunInfo(meta, str(body.get("schedule", "")), None), session.stream.send)
        session.target = target
        session.stream.send(control(MarkOp.NOTE, {"hello": True, "service": target.name,
                                                  "answers": sorted(target.answers),
                                                  "clock": "virtual" if session.virtual else "real",
                                                  "now_ns": target.now()}))

    def _request(self, session: _Session, target: ModelTarget, record: Record) -> None:
        key = request_key(record)
        oracle = session.oracles.pop(key, None)
        if record.phase == Phase.EVENT:
            call = Call((record,), CallState.SINGLE)
        else:
            call = Call((record, oracle), CallState.COMPLETE) if oracle else Call((record,), CallState.IN_FLIGHT)
        index = session.counts.get(record.pid, 0)
        session.counts[record.pid] = index + 1
        msg = target.semantics.message(call, index)
        peer = session.peers.setdefault(record.pid, _Peer(record.pid, f"pid {record.pid}"))
        session.requests[key] = record
        outcome = target.submit(key, peer, msg)
        if outcome is not None:
            self._answer(session, [(key, outcome)])
        if session.virtual:
            self._answer(session, target.idle(0))  # what the request completed for others, before the ack
            self._ack(session, target)

    def _advance(self, session: _Session, target: ModelTarget, to_ns: int, until_answer: bool) -> None:
        """A virtual session's client lets time pass: up to ``to_ns``, or to the first answers before it."""
        if until_answer:
            self._answer(session, target.wait(to_ns))
        else:
            self._answer(session, target.idle(to_ns - target.now()))
        self._ack(session, target)

    @staticmethod
    def _ack(session: _Session, target: ModelTarget) -> None:
        session.stream.send(control(MarkOp.NOTE, {"ack": True, "now_ns": target.now()}))

    def _answer(self, session: _Session, replies: list) -> None:
        if not replies or session.target is None:
            return
        now = session.target.now()
        for key, outcome in replies:
            request = session.requests.pop(key)
            if outcome.record is not None:
                data = with_call_id(stamp(outcome.record, now, request.pid, request.tid), request.call_id)
            else:
                data = Record(request.source, ANSWER_PHASES[request.phase], op=request.op, time_ns=now,
                              pid=request.pid, tid=request.tid, call_id=request.call_id,
                              flags=RecordFlag.REPLAY).encode()
            session.stream.send(data)
