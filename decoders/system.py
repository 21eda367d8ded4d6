"""System records (source SYS): what a traced process did to its files and itself.

The ops are rmtrace's own (``SysOp``, kmod_shim/rmtrace_record.h), so this
table does not depend on the driver profile.  Each entry names which buffers
carry what: PATH (a file name), TEXT (exec's argv, NUL separated), ARG (a
``struct rmt_sys_mmap``).  ``ret`` is the call's result (the new fd of open
and dup, the child pid of fork, the exit status of exit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rmtrace.decoders.base import Decoded, DecodedBuffer, Level, Op, bind_source
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import Phase, Record, Role, Source, SysMmap, SysOp


@dataclass(frozen=True)
class SysCall(Op):
    """One system operation: its name and how its buffers and result read."""

    name: str
    op: int
    args: tuple[tuple[str, str], ...] = ()  # (shown name, record header field) of arguments
    result: str | None = "ret"              # the header field holding the result; None: no result

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        rec = next((r for r in records if r.phase == Phase.EXIT), records[-1])
        out = Decoded(Source.SYS, self.op, self.name, level=level)
        for shown, header in self.args:
            out.args[shown] = getattr(records[0], header)
        for buf in (b for r in records for b in r.buffers):
            BUFFER_READERS.get(buf.role, _raw)(out, buf)
        if self.result is not None and rec.phase != Phase.ENTER:
            value = getattr(rec, self.result)
            failed = rec.ret < 0 or rec.err != 0
            out.status = -1 if failed else value
            out.status_name = f"-1 {errno_text(rec.err)}" if failed and rec.err else str(out.status)
            out.ok = not failed
            out.errno = rec.err or None
        if level < Level.FULL:
            out.buffers.clear()
        return out


def errno_text(err: int) -> str:
    from rmtrace.decoders.ioctl import errno_name
    return errno_name(err)


def _path(out: Decoded, buf: Any) -> None:
    text = buf.data.split(b"\0", 1)[0].decode("utf-8", "replace")
    out.args.setdefault("path", text)
    out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, value=text, title="path"))


def _argv(out: Decoded, buf: Any) -> None:
    argv = [a.decode("utf-8", "replace") for a in buf.data.rstrip(b"\0").split(b"\0")] if buf.data else []
    out.args["argv"] = argv
    out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, value=argv, title="argv"))


def _mmap(out: Decoded, buf: Any) -> None:
    try:
        value = SysMmap.parse(buf.data)
    except Exception as exc:  # noqa: BLE001 -- a short buffer stays raw, with the reason
        out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, note=f"not an rmt_sys_mmap: {exc}"))
        out.known = False
        return
    out.args.update((k, v) for k, v in value.items() if not k.startswith("_"))
    out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, value=value, title="rmt_sys_mmap"))


def _raw(out: Decoded, buf: Any) -> None:
    out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data))


BUFFER_READERS: dict[int, Callable[[Decoded, Any], None]] = {Role.PATH: _path, Role.TEXT: _argv, Role.ARG: _mmap}

SYS_PREFIX = "SYS_"
"""System ops are named like every other source's, with their source's prefix (SYS_OPEN, as UVM_INITIALIZE)."""

SYS_OPS: dict[int, Op] = {op: SysCall(SYS_PREFIX + op.name, op, **how) for op, how in (
    (SysOp.OPEN, {"result": "fd"}),
    (SysOp.CLOSE, {"args": (("fd", "fd"),)}),
    (SysOp.DUP, {"args": (("oldfd", "ret"),), "result": "fd"}),
    (SysOp.MMAP, {"args": (("fd", "fd"),)}),
    (SysOp.MUNMAP, {}),
    (SysOp.FORK, {}),
    (SysOp.EXEC, {"result": None}),
    (SysOp.EXIT, {"args": (("status", "ret"),), "result": None}),
)}
"""The system ops, as kmod_shim/rmtrace_record.h describes each one's header fields."""


def sys_table(profile: DriverProfile) -> dict[int, Op]:
    return dict(SYS_OPS)


bind_source(Source.SYS, sys_table)
