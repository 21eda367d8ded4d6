"""The trace a replay writes: what was sent, what came back, the target's own records, verdicts.

It is an ordinary trace (backend ``replay``), so ``show``, ``wedges``,
``diff`` and the TUI read a replay as they read a recording: each client's
requests and replies carry the client's replay pid and the target's clock,
flagged REPLAY; the target's sema records sit between them in time order;
calls still unanswered at the end get MARK IN_FLIGHT records (what a
recording stopped mid-call has); each client ends with a MARK VERDICT whose
JSON says green, diverged or wedged, where and why; a MARK STOP closes it.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from typing import Any

from rmtrace import __version__
from rmtrace.errors import RmtraceError
from rmtrace.record import (
    RECORD,
    Buffer,
    MarkOp,
    Phase,
    Record,
    RecordFlag,
    Role,
    Source,
    SysOp,
    When,
)
from rmtrace.trace import TraceWriter

_TIME, _PID, _TID, _FLAGS = RECORD["time_ns"], RECORD["pid"], RECORD["tid"], RECORD["flags"]


def stamp(data: bytes, time_ns: int, pid: int, tid: int, flags: int = int(RecordFlag.REPLAY)) -> bytes:
    """The same record with a new time, pid and tid, flagged as produced by a replay (and ``flags``)."""
    out = bytearray(data)
    _TIME.put(out, time_ns)
    _PID.put(out, pid)
    _TID.put(out, tid)
    _FLAGS.put(out, _FLAGS.get(out) | flags)
    return bytes(out)


def exec_record(time_ns: int, pid: int, argv: tuple[str, ...]) -> bytes:
    """A SYS EXEC record for a replayed or reduced client (flagged synthetic: the replayer wrote it)."""
    bufs = (Buffer(Role.PATH, When.ONCE, argv[0].encode() + b"\0"),
            Buffer(Role.TEXT, When.ONCE, b"\0".join(a.encode() for a in argv) + b"\0"))
    return Record(Source.SYS, Phase.EVENT, op=SysOp.EXEC, time_ns=time_ns, pid=pid, tid=pid,
                  flags=RecordFlag.REPLAY | RecordFlag.SYNTHETIC, buffers=bufs).encode()


RECORDING_FACTS = ("host", "kernel", "start_time", "backend", "command")
"""What a recording's metadata says about where and how it was recorded."""


def provenance(source_meta: dict[str, Any], source_path: str, made_by: str) -> dict[str, Any]:
    """A derived trace's ``made`` metadata: by what, on which host, when, from which file, and the
    recording it goes back to (a replay copies its source's metadata, which says the recording's host
    and kernel, not its own)."""
    earlier = source_meta.get("made")
    recording = earlier["recording"] if earlier else {k: source_meta.get(k) for k in RECORDING_FACTS}
    return {"by": made_by, "rmtrace_version": __version__, "host": platform.node(), "kernel": platform.release(),
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "from": source_path,
            "recording": recording}


class ReplayWriter:
    """Writes a replay's trace as the runner goes."""

    def __init__(self, path: str, meta: dict[str, Any]) -> None:
        self.path = path
        try:
            self._writer = TraceWriter(path, {**meta, "backend": "replay", "rmtrace_version": __version__})
        except OSError as exc:
            raise RmtraceError(f"cannot write the replay's trace to {path}: {exc.strerror or exc}") from None

    def raw(self, data: bytes) -> None:
        """A record the target produced, already stamped."""
        self._writer.write_encoded(data)

    def message(self, data: bytes, time_ns: int, pid: int, tid: int) -> None:
        self._writer.write_encoded(stamp(data, time_ns, pid, tid))

    def exec(self, time_ns: int, pid: int, argv: tuple[str, ...]) -> None:
        """The process a client is, as a recording starts it (so labels carry its program)."""
        self._writer.write_encoded(exec_record(time_ns, pid, argv))

    def mark(self, op: MarkOp, time_ns: int, text: Any = None, pid: int = 0, tid: int = 0, call_id: int = 0) -> None:
        bufs = () if text is None else (Buffer(Role.TEXT, When.ONCE, json.dumps(text, sort_keys=True).encode()),)
        self._writer.write(Record(Source.MARK, Phase.EVENT, op=op, time_ns=time_ns, pid=pid, tid=tid or pid,
                                  call_id=call_id, flags=RecordFlag.REPLAY, buffers=bufs))

    def close(self) -> None:
        self._writer.close()

    def discard(self) -> None:
        """Close and remove the trace: a replay whose target never opened leaves no output behind."""
        self._writer.close()
        os.unlink(self.path)
