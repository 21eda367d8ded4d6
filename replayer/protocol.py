"""The replay protocol over a Unix socket: records in the record format, both ways.

docs/replay-protocol.md is the specification; this module holds what both
ends share: the framing (a byte stream of back-to-back records, each carrying
its own length), the hello/bye control records, how a request is stamped and
how an answer is matched to it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

from rmtrace.errors import RecordError, RmtraceError
from rmtrace.record import (
    HEADER_SIZE,
    RECORD,
    Buffer,
    MarkOp,
    Phase,
    Record,
    RecordFlag,
    RecordHeader,
    Role,
    Source,
    When,
    decode_record,
    field_offset,
    record_length,
)

PROTOCOL = 1
HELLO_KEY = "rmtrace_replay"
EVENT_CALL_ID = 1 << 62
"""Events carry no call id in a recording; a request for one gets EVENT_CALL_ID + its index."""
ANSWER_PHASES: dict[int, Phase] = {Phase.ENTER: Phase.EXIT, Phase.EVENT: Phase.EXIT, Phase.SEND: Phase.RECV}
_CALL_ID = field_offset(RecordHeader, "call_id")
MAX_RECORD = 64 << 20
_TOTAL_LEN = RECORD["total_len"]


def whole_records(buf: bytearray, peer: str) -> Iterator[Record]:
    """Every whole record at the front of ``buf``, taken off it as it is yielded; a partial one stays for the
    next read.  Bytes that are not records are an error naming ``peer``."""
    while len(buf) >= HEADER_SIZE:
        try:
            total = _TOTAL_LEN.get(buf)
            if total > MAX_RECORD:
                raise RecordError(f"a record of {total} bytes")
            if len(buf) < total:
                return
            record_length(memoryview(buf), 0)
            record = decode_record(bytes(buf[:total]))
        except RecordError as exc:
            raise RmtraceError(f"{peer} sent bytes that are not records: {exc}") from None
        del buf[:total]
        yield record


def control(op: MarkOp, body: dict[str, Any]) -> bytes:
    """A hello, hello-reply or bye record."""
    text = json.dumps({HELLO_KEY: PROTOCOL, **body}, sort_keys=True, default=str).encode()
    return Record(Source.MARK, Phase.EVENT, op=op, flags=RecordFlag.REPLAY,
                  buffers=(Buffer(Role.TEXT, When.ONCE, text),)).encode()


def control_body(record: Record) -> dict[str, Any] | None:
    """The JSON of a protocol control record, None for any other record."""
    if record.source != Source.MARK:
        return None
    buf = record.buffer(Role.TEXT)
    if buf is None:
        return None
    try:
        body = json.loads(buf.data)
    except ValueError:
        return None
    return body if isinstance(body, dict) and HELLO_KEY in body else None


def with_call_id(data: bytes, call_id: int) -> bytes:
    out = bytearray(data)
    out[_CALL_ID:_CALL_ID + 8] = call_id.to_bytes(8, "little")
    return bytes(out)


def answer_key(record: Record) -> tuple[int, int, int] | None:
    """(source, pid, call id) an answer record answers, None when it is not an answer."""
    if record.phase not in (Phase.EXIT, Phase.RECV) or record.flags & RecordFlag.SYNTHETIC:
        return None
    return record.source, record.pid, record.call_id


def request_key(record: Record) -> tuple[int, int, int]:
    return record.source, record.pid, record.call_id


class Stream:
    """Records off a socket, reassembled across reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.closed = False

    def send(self, *records: bytes) -> None:
        try:
            self.sock.sendall(b"".join(records))
        except OSError as exc:
            raise RmtraceError(f"the replay service went away: {exc.strerror or exc}") from None

    def read_available(self) -> None:
        """Take whatever the socket holds now (it must be readable)."""
        try:
            chunk = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            raise RmtraceError(f"reading from the replay service: {exc.strerror or exc}") from None
        if not chunk:
            self.closed = True
        self.buf += chunk

    def records(self) -> Iterator[Record]:
        """Every whole record received so far."""
        return whole_records(self.buf, "the replay peer")
