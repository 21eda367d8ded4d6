"""A kernel host service behind /dev/rmtrace-replay (``--against kmod[:PATH][,clock=real]``).

The device speaks docs/replay-protocol.md with the binary control records of
kmod_shim/rmtrace_replay.h (mirrored below, checked by DWARF in
tests/kernel/test_kmod_abi.py): a HELLO, then per message one write of
[MSG facts] [oracle] request, each write answered, after whatever it caused,
by an ACK; the answers and the service's own records come back through
read().  The MSG carries what the plan already knows of the message (its
kind, handles, ring address, where its answer's NV_STATUS lives), so the
kernel target models exactly what the in-process model does.

PATH is the device (default /dev/rmtrace-replay) or, for a guest, the
host end of a virtio-serial port relayed to it by kmod_shim/guest/rmt_relay
(a Unix socket: each write goes as a frame, a u32 length then the bytes).

Clocks: ``virtual`` (the default) moves the session's clock only when the
runner lets time pass (ADVANCE), so a replay is deterministic and equal,
message by message, to ``--against model``; ``clock=real`` runs the service
on CLOCK_MONOTONIC with its own timers, as a live host service would.
"""

from __future__ import annotations

import errno
import fcntl
import os
import selectors
import socket
import stat
import struct
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from construct import Array, Bytes, Int16ul, Int32sl, Int32ul, Int64ul, Struct
from rmtrace.replayer.messages import Kind, Message, Outcome
from rmtrace.replayer.model.core import UVM_CLIENT, UVM_OBJECTS
from rmtrace.replayer.model.records import GspRecords
from rmtrace.replayer.protocol import request_key, whole_records
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.base import Reply, RunInfo, Sink, clock_spec
from rmtrace.replayer.targets.service import ServiceTarget

from rmtrace.capture.kmod import IOC_READ, ioc
from rmtrace.errors import RmtraceError
from rmtrace.record import (
    BUFFER_LAYOUT,
    HEADER,
    HEADER_SIZE,
    Buffer,
    H,
    MarkOp,
    Phase,
    Record,
    RecordFlag,
    Role,
    Source,
    When,
    decode_record,
)

DEVICE = "/dev/rmtrace-replay"
MAGIC = 0x594C5052
VERSION = 1
OP = {"HELLO": 1, "MSG": 2, "WHY": 3, "ADVANCE": 4, "BYE": 5, "ACK": 6, "TARGET": 7, "REFUSED": 8}
CLOCKS = {"virtual": 1, "real": 2}
ANSWERS = ("status", "ret", "err", "fields")
UNTIL_ANSWER = 1
STATUSES = ("NV_OK", "NV_ERR_ILLEGAL_ACTION", "NV_ERR_INSERT_DUPLICATE_NAME", "NV_ERR_INVALID_OBJECT_HANDLE",
            "NV_ERR_OBJECT_NOT_FOUND", "NV_ERR_INVALID_CLIENT")
"""enum rmt_replay_status: the statuses the target answers with, numbered from the trace's profile."""
STATUS_KINDS = frozenset({Kind.RM_CLIENT, Kind.RM_ALLOC, Kind.RM_FREE, Kind.RM_CONTROL, Kind.WORK_TOKEN,
                          Kind.UVM_CALL, Kind.UVM_REGISTER_GPU, Kind.UVM_UNREGISTER_GPU})
"""Kinds whose answer the model may give its own status (so the MSG says where the status lives)."""
HELLO_TIMEOUT_S = 10.0
ACK_TIMEOUT_S = 60.0
FRAME = struct.Struct("<I")
ERROR_MAX = 160
IOC_REPLAY_ERROR = ioc(IOC_READ, 0x20, ERROR_MAX)
TEXT_MAX = 256
"""The longest name or label a MSG carries."""
STATUS_COUNT = 8
STATUS_AT = 4
TARGET_NAME_MAX = 32
SERVICE_NAME_MAX = 64
SAMPLE_GSP_TEMPLATE = 1

ReplayCtl = Struct("magic" / Int32ul, "version" / Int16ul, "op" / Int16ul, "length" / Int32ul, "reserved" / Int32ul)
ReplayHello = Struct("clock" / Int32ul, "reserved" / Int32ul, "start_ns" / Int64ul,
                     "status" / Array(STATUS_COUNT, Int32ul), "target" / Bytes(TARGET_NAME_MAX))
ReplayHelloReply = Struct("clock" / Int32ul, "answers" / Int32ul, "now_ns" / Int64ul,
                          "service" / Bytes(SERVICE_NAME_MAX))
ReplayStatusAt = Struct("buffer" / Int16ul, "width" / Int16ul, "offset" / Int32ul)
ReplayMsg = Struct(
    "kind" / Int32ul, "index" / Int32ul, "category" / Int32ul, "fd" / Int32sl, "h_client" / Int32ul,
    "h_parent" / Int32ul, "h_object" / Int32ul, "expect" / Int32sl, "has_status" / Int32ul, "status" / Int32ul,
    "ring_va" / Int64ul, "userd_va" / Int64ul, "ring_size" / Int64ul, "gpu" / Bytes(16), "nstatus" / Int32ul,
    "reserved" / Int32ul, "status_at" / Array(STATUS_AT, ReplayStatusAt),
)
ReplayWhy = Struct("source" / Int32ul, "pid" / Int32ul, "call_id" / Int64ul)
ReplayAdvance = Struct("to_ns" / Int64ul, "flags" / Int32ul, "reserved" / Int32ul)
ReplayAck = Struct("write_seq" / Int64ul, "now_ns" / Int64ul, "next_timer_ns" / Int64ul, "parked" / Int32ul,
                   "reserved" / Int32ul)
ReplayRefused = Struct("err" / Int32sl, "reserved" / Int32ul)
SampleGspTemplate = Struct("kind" / Int32ul, "index" / Int32ul, "function" / Int32ul, "seq_off" / Int32ul,
                           "result_off" / Int32ul, "result_private_off" / Int32ul)
"""The sample target's TARGET body (kmod_shim/sample_target/rmtrace_sample.h)."""
MIRRORS = {"rmt_replay_ctl": ReplayCtl, "rmt_replay_hello": ReplayHello, "rmt_replay_hello_reply": ReplayHelloReply,
           "rmt_replay_status_at": ReplayStatusAt, "rmt_replay_msg": ReplayMsg, "rmt_replay_why": ReplayWhy,
           "rmt_replay_advance": ReplayAdvance, "rmt_replay_ack": ReplayAck, "rmt_replay_refused": ReplayRefused,
           "rmt_sample_gsp_template": SampleGspTemplate}


def control(op: str, body: bytes = b"", texts: tuple[bytes, ...] = (), pid: int = 0, call_id: int = 0,
            extra: tuple[Buffer, ...] = ()) -> bytes:
    """A device control record: MARK NOTE, flag REPLAY, ARG = header + body, then TEXT buffers."""
    head = ReplayCtl.build({"magic": MAGIC, "version": VERSION, "op": OP[op], "length": ReplayCtl.sizeof() + len(body),
                            "reserved": 0})
    bufs = (Buffer(Role.ARG, When.ONCE, head + body),) + tuple(Buffer(Role.TEXT, When.ONCE, t) for t in texts) + extra
    return Record(Source.MARK, Phase.EVENT, op=MarkOp.NOTE, pid=pid, tid=pid, call_id=call_id,
                  flags=RecordFlag.REPLAY, buffers=bufs).encode()


def control_of(record: Record) -> tuple[int, bytes, Record] | None:
    """(op, body, record) of a device control record, None for any other record."""
    if record.source != Source.MARK or not record.flags & RecordFlag.REPLAY or not record.buffers:
        return None
    arg = record.buffers[0]
    if arg.role != Role.ARG or len(arg.data) < ReplayCtl.sizeof():
        return None
    head = ReplayCtl.parse(arg.data)
    if head.magic != MAGIC:
        return None
    return head.op, arg.data[ReplayCtl.sizeof():head.length], record


class _Device:
    """The device itself: one write() per unit batch."""

    def __init__(self, path: str) -> None:
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        except OSError as exc:
            hint = " (only root may replay into the kernel)" if exc.errno in (errno.EACCES, errno.EPERM) else \
                " (load rmtrace.ko and a host-service module: docs/kernel-shim.md)"
            raise RmtraceError(f"cannot open {path}: {exc.strerror}{hint}") from None
        self.path = path

    def fileno(self) -> int:
        return self.fd

    def send(self, data: bytes) -> None:
        try:
            os.write(self.fd, data)
        except OSError as exc:
            why = bytearray(ERROR_MAX)
            try:
                fcntl.ioctl(self.fd, IOC_REPLAY_ERROR, why)
            except OSError:
                pass
            reason = why.split(b"\0", 1)[0].decode(errors="replace") or exc.strerror
            raise RmtraceError(f"{self.path} refused a write: {reason}") from None

    def recv(self) -> bytes:
        try:
            return os.read(self.fd, 1 << 20) or b""
        except BlockingIOError:
            return b""

    def close(self) -> None:
        os.close(self.fd)


class _Relay:
    """A guest's device through rmt_relay: writes go as frames, refusals come back as records."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError as exc:
            self.sock.close()
            raise RmtraceError(f"cannot reach the guest's replay port at {path}: {exc.strerror}") from None
        self.sock.setblocking(False)
        self.path = path

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, data: bytes) -> None:
        self.sock.setblocking(True)
        try:
            self.sock.sendall(FRAME.pack(len(data)) + data)
        except OSError as exc:
            raise RmtraceError(f"the guest's replay port went away: {exc.strerror}") from None
        finally:
            self.sock.setblocking(False)

    def recv(self) -> bytes:
        try:
            chunk = self.sock.recv(1 << 20)
        except BlockingIOError:
            return b""
        if not chunk:
            raise RmtraceError(f"the guest's replay port at {self.path} closed")
        return chunk

    def close(self) -> None:
        self.sock.close()


def parse_spec(arg: str) -> tuple[str, str]:
    """``PATH[,clock=real|virtual]`` -> (path, clock)."""
    path, clock = clock_spec(arg, "kmod")
    return path or DEVICE, clock


class KmodTarget(ServiceTarget):
    """The client end of /dev/rmtrace-replay; see the module docstring."""

    def __init__(self, arg: str, semantics: Semantics) -> None:
        super().__init__(semantics)
        self.path, self.clock = parse_spec(arg)
        self.name = f"kmod:{self.path}"
        self._io: _Device | _Relay | None = None
        self._sel = selectors.DefaultSelector()
        self._buf = bytearray()
        self._offset = 0
        self._status_at: dict[tuple, list[tuple[int, int]]] = {}
        self._hello: Any = None

    # -- the session

    def open(self, info: RunInfo, sink: Sink | None) -> None:
        self._sink = sink
        try:
            mode = os.stat(self.path).st_mode
        except OSError as exc:
            raise RmtraceError(f"cannot open {self.path}: {exc.strerror} (load rmtrace.ko and a host-service "
                               f"module: docs/kernel-shim.md)") from None
        self._io = _Relay(self.path) if stat.S_ISSOCK(mode) else _Device(self.path)
        self._sel.register(self._io, selectors.EVENT_READ)
        start = int(info.meta.get("start_monotonic_ns") or 0) if self.clock == "virtual" else 0
        codes = [self.semantics.status_code(name) for name in STATUSES] + [0] * (STATUS_COUNT - len(STATUSES))
        hello = ReplayHello.build({"clock": CLOCKS[self.clock], "reserved": 0, "start_ns": start, "status": codes,
                                   "target": bytes(TARGET_NAME_MAX)})
        sent = time.monotonic_ns()
        self._io.send(control("HELLO", hello))
        self._until(lambda: self._hello is not None, HELLO_TIMEOUT_S, "the replay hello")
        reply = self._hello
        if self.clock == "real":
            self._offset = reply.now_ns - (sent + time.monotonic_ns()) // 2
        self._now = reply.now_ns
        service = reply.service.split(b"\0", 1)[0].decode(errors="replace")
        self.name = f"kmod:{self.path} ({service})"
        self.answers = frozenset(name for bit, name in enumerate(ANSWERS) if reply.answers & (1 << bit))
        templates = list(self._gsp_templates())
        if templates:
            self._write(b"".join(templates))

    def _gsp_templates(self) -> Iterator[bytes]:
        """The registration exchange's RPCs as the in-process model builds them, for the sample target."""
        profile = self.semantics.profile
        if not GspRecords.available(profile):
            return
        captured: list[bytes] = []
        rpc = GspRecords(captured.append, _Clock(), profile)
        for h_parent, h_object, cls, params in UVM_OBJECTS:
            rpc.alloc(0, UVM_CLIENT, h_parent, h_object, cls, **params)
        rpc.free(0, UVM_CLIENT, UVM_CLIENT, UVM_CLIENT)
        header = profile.layouts["rpc_message_header_v03_00"]
        offsets = {f.name: f.offset for f in header.fields}
        for index, data in enumerate(captured[0::2]):  # each exchange's request
            record = decode_record(data)
            body = SampleGspTemplate.build({"kind": SAMPLE_GSP_TEMPLATE, "index": index, "function": record.op,
                                            "seq_off": offsets["sequence"], "result_off": offsets["rpc_result"],
                                            "result_private_off": offsets["rpc_result_private"]})
            yield control("TARGET", body, extra=(record.buffers[0],))

    def now(self) -> int:
        return self._now if self.clock == "virtual" else time.monotonic_ns() + self._offset

    def submit(self, ticket: Hashable, client: Any, msg: Message) -> Outcome | None:
        now = self.now()
        request, record = self._request(client, msg, now)
        self._pending[request_key(record)] = (ticket, msg, request)
        self._write(b"".join([self._msg(msg, client, record), *self._hint(client, msg, now, record.call_id), request]))
        return self._answered(ticket)

    def wait(self, deadline_ns: int) -> list[Reply]:
        if self._ready:
            return self._flush()
        if self.clock == "virtual":
            self._write(control("ADVANCE", ReplayAdvance.build({"to_ns": deadline_ns, "flags": UNTIL_ANSWER,
                                                                "reserved": 0})))
            return self._flush()
        while not self._ready:
            left = (deadline_ns - self.now()) / 1e9
            if left <= 0:
                break
            self._take(self._read(left))
        return self._flush()

    def idle(self, ns: int) -> list[Reply]:
        if self.clock == "virtual" and ns > 0:
            self._write(control("ADVANCE", ReplayAdvance.build({"to_ns": self._now + ns, "flags": 0, "reserved": 0})))
        elif self.clock == "real":
            self._take(self._read(0))
        return self._flush()

    def explain(self, ticket: Hashable) -> list[str]:
        key = self._pending_key(ticket)
        if key is None or self._io is None:
            return []
        self._write(control("WHY", ReplayWhy.build({"source": key[0], "pid": key[1], "call_id": key[2]})))
        return self._why.pop(key, None) or []

    def close(self) -> None:
        if self._io is None:
            return
        try:
            self._write(control("BYE"))
        except RmtraceError:
            pass
        self._sel.close()
        self._io.close()
        self._io = None

    # -- internals

    def _msg(self, msg: Message, client: Any, record: Record) -> bytes:
        expect = msg.expect
        where = self._status_places(msg) if msg.kind in STATUS_KINDS else []
        body = ReplayMsg.build({
            "kind": int(msg.kind), "index": msg.index, "category": int(msg.category), "fd": msg.fd,
            "h_client": msg.h_client & 0xFFFFFFFF, "h_parent": msg.h_parent & 0xFFFFFFFF,
            "h_object": msg.h_object & 0xFFFFFFFF,
            "expect": 1 if expect.response else 0 if expect.response is False else -1,
            "has_status": int(expect.status is not None), "status": (expect.status or 0) & 0xFFFFFFFF,
            "ring_va": msg.ring_va, "userd_va": msg.userd_va, "ring_size": msg.ring_size,
            "gpu": bytes(msg.gpu[:16]).ljust(16, b"\0"), "nstatus": len(where), "reserved": 0,
            "status_at": [{"buffer": b, "width": 4, "offset": o} for b, o in where]
            + [{"buffer": 0, "width": 0, "offset": 0}] * (STATUS_AT - len(where)),
        })
        return control("MSG", body, (msg.name.encode()[:TEXT_MAX], client.label.encode()[:TEXT_MAX]), pid=record.pid,
                       call_id=record.call_id)

    def _status_places(self, msg: Message) -> list[tuple[int, int]]:
        """Where the NV_STATUS of this message's answer lives: (buffer index, offset), found by asking the
        decoders to write two different statuses into it; cached per record shape."""
        base = msg.reply or msg.request
        record = decode_record(base)
        shape = (record.source, record.op, record.phase, tuple((b.role, b.when, len(b.data)) for b in record.buffers))
        places = self._status_at.get(shape)
        if places is None:
            one, two = self.semantics.answer(base, 0x5A5A5A5A), self.semantics.answer(base, 0xA5A5A5A5)
            offsets = sorted({i & ~3 for i in range(min(len(one), len(two))) if one[i] != two[i]})
            places = [p for p in (_buffer_offset(one, off) for off in offsets) if p is not None][:STATUS_AT]
            self._status_at[shape] = places
        return places

    def _write(self, data: bytes) -> None:
        """One write; what it caused is read up to its ACK."""
        want = self._acks + 1
        if self._io is None:
            raise RmtraceError(f"{self.name}: the session is closed")
        self._io.send(data)
        self._until(lambda: self._acks >= want, ACK_TIMEOUT_S, "a write's acknowledgement")

    def _until(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise RmtraceError(f"{self.name}: no answer to {what} within {timeout_s:g}s")
            self._take(self._read(left))

    def _read(self, timeout: float) -> Iterator[Record]:
        if self._io is not None and self._sel.select(max(timeout, 0.0)):
            self._buf += self._io.recv()
        yield from whole_records(self._buf, self.name)

    def _take(self, records: Iterator[Record]) -> None:
        for record in records:
            ctl = control_of(record)
            if ctl is not None:
                self._control(*ctl)
                continue
            if not self._answer(record):
                self._host_record(record)

    def _control(self, op: int, body: bytes, record: Record) -> None:
        if op == OP["ACK"]:
            ack = ReplayAck.parse(body)
            self._acks += 1
            self._now = max(self._now, ack.now_ns) if self.clock == "virtual" else self._now
        elif op == OP["HELLO"]:
            self._hello = ReplayHelloReply.parse(body)
        elif op == OP["WHY"]:
            why = ReplayWhy.parse(body)
            text = record.buffer(Role.TEXT)
            lines = text.data.decode(errors="replace").splitlines() if text is not None else []
            self._why[(why.source, why.pid, why.call_id)] = lines
        elif op == OP["REFUSED"]:
            text = record.buffer(Role.TEXT)
            reason = text.data.decode(errors="replace") if text is not None else "?"
            raise RmtraceError(f"{self.name} refused a write: {reason} ({os.strerror(ReplayRefused.parse(body).err)})")


class _Clock:
    now = 0


def _buffer_offset(data: bytes, offset: int) -> tuple[int, int] | None:
    """(buffer index, offset in its data) of byte ``offset`` of an encoded record."""
    pos = HEADER_SIZE
    for index in range(HEADER.unpack_from(data)[H.nbufs]):
        length = BUFFER_LAYOUT.unpack(data, pos).len
        pos += BUFFER_LAYOUT.size
        if pos <= offset < pos + length:
            return index, offset - pos
        pos += (length + 7) & ~7
    return None
