"""The kernel shim's side of ``rmtrace record``: draining /dev/rmtrace (``--backend kmod[:PATH]``).

rmtrace.ko (kmod_shim/kmod/) keeps per-CPU rings of records in the one
record format; /dev/rmtrace reads them as a byte stream, oldest first.
``KmodSource`` reads that stream from the device or, for a guest, from
the host end of a virtio-serial port that kmod_shim/guest/rmt_relay feeds
(a Unix socket), and yields whole records.  On the device itself it also
sets what the module records: the sources (without RM and UVM ioctls when
the preload shim records the same calls) and the probes, whose
driver-specific facts (UVM params sizes, the GSP queue element's place in
MESSAGE_QUEUE_INFO) come from the trace's driver profile.  The ioctl
structs mirror kmod_shim/rmtrace_kmod.h (checked by DWARF in
tests/kernel/test_kmod_abi.py).
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import stat
from collections.abc import Iterator
from typing import Any

from construct import Array, Bytes, Int8ul, Int16ul, Int32sl, Int32ul, Int64ul, Struct

from rmtrace.errors import RmtraceError
from rmtrace.record import HEADER_SIZE, RECORD_MAGIC, Source

DEVICE = "/dev/rmtrace"
SOURCES_ALL = 0x7E
KCALL_BASE = 0x4B000000
KCALLS = {1: "nvUvmInterfaceRegisterGpu", 2: "nvUvmInterfaceUnregisterGpu", 3: "nvUvmInterfaceRetainChannel",
          4: "nvUvmInterfaceReleaseChannel", 5: "nvUvmInterfaceGetGpuInfo"}
"""enum rmt_kcall: the calls UVM makes into RM, recorded as UVM records with op KCALL_BASE + number."""
RECORD_MAGIC_BYTES = RECORD_MAGIC.to_bytes(4, "little")
GSP_ELEMENT_OFFSET = {"535": 48, "550": 48, "570": 48, "575": 48, "580": 48, "590": 48, "595": 80}
"""Offset of pCmdQueueElement in RM's MESSAGE_QUEUE_INFO (message_queue_priv.h) per driver branch: 595 put the
queue's element sizes before it.  RM-internal, so not in the profiles' public layouts."""

KmodStats = Struct(
    "version" / Int32ul, "cpus" / Int32ul, "sources" / Int32ul, "probes" / Int32ul, "ring_size" / Int64ul,
    "records" / Int64ul, "bytes" / Int64ul, "drops_full" / Int64ul, "drops_big" / Int64ul, "drops_ctx" / Int64ul,
    "consumed" / Int64ul,
)
Value = Struct("kind" / Int8ul, "arg" / Int8ul, "nderef" / Int8ul, "width" / Int8ul, "space" / Int8ul,
               "shift" / Int8ul, "reserved" / Int16ul, "off" / Array(4, Int32sl), "mask" / Int64ul,
               "constant" / Int64ul)
Capture = Struct("role" / Int16ul, "when" / Int8ul, "space" / Int8ul, "slot" / Int32ul, "only_op" / Int32ul,
                 "max" / Int32ul, "addr" / Value, "len" / Value)
ProbeEntry = Struct("key" / Int32ul, "value" / Int32ul)
ProbeSpec = Struct(
    "symbol" / Bytes(64), "source" / Int16ul, "kind" / Int8ul, "ncaps" / Int8ul, "flags" / Int32ul,
    "nargs" / Int8ul, "reserved0" / Bytes(3), "fd" / Int32sl, "op" / Value, "cap" / Array(6, Capture),
    "ntable" / Int32ul, "reserved1" / Int32ul, "table" / Array(160, ProbeEntry),
)
ProbeInfo = Struct("index" / Int32ul, "state" / Int32sl, "symbol" / Bytes(64), "hits" / Int64ul, "missed" / Int64ul)
MIRRORS = {"rmt_kmod_stats": KmodStats, "rmt_value": Value, "rmt_capture": Capture, "rmt_probe_entry": ProbeEntry,
           "rmt_probe_spec": ProbeSpec, "rmt_probe_info": ProbeInfo}


def _ioc(direction: int, nr: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (0xB7 << 8) | nr


IOC_STATS = _ioc(2, 1, KmodStats.sizeof())
IOC_SET_SOURCES = _ioc(1, 2, 4)
IOC_ADD_PROBE = _ioc(1, 3, ProbeSpec.sizeof())
IOC_CLEAR_PROBES = _ioc(0, 4, 0)
IOC_PROBE_INFO = _ioc(3, 5, ProbeInfo.sizeof())
MAX_PROBES = 32
VAL_CONST, VAL_ARG, VAL_TABLE = 1, 2, 3
SPACE_KERNEL, SPACE_USER = 1, 2


def _value(kind: int = 0, arg: int = 0, nderef: int = 0, width: int = 0, space: int = 0, shift: int = 0,
           off: tuple[int, ...] = (), mask: int = 0, constant: int = 0) -> dict[str, Any]:
    return {"kind": kind, "arg": arg, "nderef": nderef, "width": width, "space": space, "shift": shift,
            "reserved": 0, "off": list(off) + [0] * (4 - len(off)), "mask": mask, "constant": constant}


def uvm_probe(profile: Any) -> bytes:
    """uvm_ioctl's spec with the profile's params sizes (UVM requests are raw numbers, not _IOC-encoded)."""
    table = [{"key": nr, "value": cmd.size} for nr, cmd in sorted(profile.uvm.items()) if cmd.size][:160]
    caps = [{"role": 1, "when": 3, "space": SPACE_USER, "slot": 0, "only_op": 0xFFFFFFFF, "max": 65536,
             "addr": _value(VAL_ARG, arg=2), "len": _value(VAL_TABLE)}]
    return _spec("uvm_ioctl", Source.UVM, caps, op=_value(VAL_ARG, arg=1, mask=0xFFFFFFFF), table=table)


def gsp_probes(branch: str) -> list[bytes]:
    """The GSP message queue's send and receive, the message found at the branch's element offset."""
    off = GSP_ELEMENT_OFFSET.get(branch.split(".")[0])
    if off is None:
        return []

    def element(at: int, width: int = 0) -> dict[str, Any]:
        return _value(VAL_ARG, nderef=1, width=width, space=SPACE_KERNEL, off=(off, at))

    caps = [{"role": 1, "when": 2, "space": SPACE_KERNEL, "slot": 0, "only_op": 0xFFFFFFFF, "max": 48,
             "addr": element(0), "len": _value(VAL_CONST, constant=48)},
            {"role": 8, "when": 2, "space": SPACE_KERNEL, "slot": 0, "only_op": 0xFFFFFFFF, "max": 65488,
             "addr": element(48), "len": element(56, 4)}]
    return [_spec(name, Source.GSP, caps, kind=kind, flags=2, fd=0, op=element(60, 4))
            for name, kind in (("GspMsgQueueSendCommand", 2), ("GspMsgQueueReceiveStatus", 3))]


def _spec(symbol: str, source: int, caps: list[dict[str, Any]], *, kind: int = 1, flags: int = 0, fd: int = -1,
          op: dict[str, Any], table: list[dict[str, int]] | None = None) -> bytes:
    empty = {"role": 1, "when": 1, "space": 1, "slot": 0, "only_op": 0, "max": 0, "addr": _value(), "len": _value()}
    table = table or []
    return ProbeSpec.build({
        "symbol": symbol.encode().ljust(64, b"\0"), "source": int(source), "kind": kind, "ncaps": len(caps),
        "flags": flags, "nargs": 0, "reserved0": b"\0\0\0", "fd": fd, "op": op,
        "cap": caps + [empty] * (6 - len(caps)), "ntable": len(table), "reserved1": 0,
        "table": table + [{"key": 0, "value": 0}] * (160 - len(table)),
    })


class KmodSource:
    """Records from /dev/rmtrace, or from a guest's relayed port (a Unix socket)."""

    def __init__(self, path: str = DEVICE) -> None:
        self.path = path
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise RmtraceError(f"cannot open {path}: {exc.strerror} (load rmtrace.ko: docs/kernel-shim.md)") from None
        self.sock: socket.socket | None = None
        self.fd = -1
        if stat.S_ISSOCK(mode):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
            self.sock.setblocking(False)
        else:
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                raise RmtraceError(f"cannot open {path}: {exc.strerror} (root only)") from None
        self.buf = bytearray()
        self.ended = False
        self.malformed = 0

    @property
    def local(self) -> bool:
        """The device itself (its sources and probes can be set), not a relayed stream."""
        return self.sock is None

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else self.fd

    def configure(self, sources: int, probes: list[bytes]) -> list[str]:
        """Set the sources and replace the probes; the probes that could not attach, by name."""
        fcntl.ioctl(self.fd, IOC_SET_SOURCES, sources.to_bytes(4, "little"))
        if not probes:
            return []
        fcntl.ioctl(self.fd, IOC_CLEAR_PROBES)
        missing = []
        for spec in probes:
            try:
                fcntl.ioctl(self.fd, IOC_ADD_PROBE, spec)
            except OSError:
                missing.append(ProbeSpec.parse(spec).symbol.split(b"\0", 1)[0].decode())
        return missing

    def stats(self) -> dict[str, int]:
        if not self.local:
            return {}
        raw = bytearray(KmodStats.sizeof())
        fcntl.ioctl(self.fd, IOC_STATS, raw)
        return {k: v for k, v in KmodStats.parse(bytes(raw)).items() if not k.startswith("_")}

    def read(self, timeout_s: float) -> Iterator[bytes]:
        """Whole records that arrive within ``timeout_s`` (each one's raw bytes)."""
        if not self.ended and select.select([self], [], [], max(timeout_s, 0.0))[0]:
            try:
                chunk = self.sock.recv(1 << 20) if self.sock is not None else os.read(self.fd, 1 << 20)
            except BlockingIOError:
                chunk = b""
            else:
                if not chunk and self.sock is not None:
                    self.ended = True
            self.buf += chunk
        while len(self.buf) >= HEADER_SIZE:
            total = int.from_bytes(self.buf[8:12], "little")
            if self.buf[:4] != RECORD_MAGIC_BYTES or total < HEADER_SIZE or total % 8:
                self.malformed += 1
                del self.buf[:8]  # resynchronise on the next 8-byte boundary
                continue
            if len(self.buf) < total:
                return
            yield bytes(self.buf[:total])
            del self.buf[:total]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        elif self.fd >= 0:
            os.close(self.fd)


def default_probes(profile: Any) -> list[bytes]:
    """The probes whose facts come from the profile (the module's defaults cover the rest)."""
    branch = str(getattr(profile, "branch", "") or getattr(profile, "version", "")).split(".")[0]
    return [uvm_probe(profile), *gsp_probes(branch)]


def drain_to_trace(path: str, output: str, meta: dict[str, Any], *, duration_s: float | None = None,
                   stop: Any = None, lag_s: float = 0.25, profile: Any = None, with_shim: bool = False) -> int:
    """Record what /dev/rmtrace (or a guest's drained port) gives until ``duration_s``, ``stop()`` or the
    stream's end; records in time order, calls still open marked IN_FLIGHT, drops in a LOST mark.
    Returns the number of records written."""
    import json
    import time

    from rmtrace.capture.merge import CallTracker, TimeMerger
    from rmtrace.record import HEADER, Buffer, MarkOp, Phase, Record, RecordFlag, Role, When
    from rmtrace.trace import TraceWriter

    source = KmodSource(path)
    warnings: list[str] = []
    if source.local and profile is not None:
        # with the preload shim recording the same process's ioctls, the kernel keeps to what only it sees
        sources = SOURCES_ALL & ~((1 << Source.RM) | (1 << Source.UVM)) if with_shim else SOURCES_ALL
        missing = source.configure(sources, default_probes(profile))
        warnings += [f"probe {name} not attached (no such symbol)" for name in missing]
    merger, calls = TimeMerger(int(lag_s * 1e9)), CallTracker()
    written = 0
    start = time.monotonic()
    with TraceWriter(output, {**meta, "backend": "kmod", "kmod": {"path": path, "warnings": warnings}}) as writer:
        def release(records: list[Any]) -> None:
            nonlocal written
            for raw, header in records:
                calls.saw(writer.write_encoded(raw), header)
                written += 1
        while not source.ended and (duration_s is None or time.monotonic() - start < duration_s) \
                and not (stop and stop()):
            for raw in source.read(0.05):
                header = HEADER.unpack_from(raw)
                merger.push(header[8], (raw, header))
            release(merger.release(time.monotonic_ns()))
        release(merger.release())
        marks = []
        for call in calls.in_flight():
            marks.append((MarkOp.IN_FLIGHT, {"since_ns": call.time_ns, "op": call.op, "enter_seq": call.seq},
                          call.pid, call.tid, call.call_id))
        stats = source.stats()
        lost = {k: v for k, v in stats.items() if k.startswith("drops") and v}
        if lost or source.malformed:
            marks.append((MarkOp.LOST, {**lost, "malformed": source.malformed}, 0, 0, 0))
        marks.append((MarkOp.STOP, {"reason": "ended" if source.ended else "stopped", "records": written,
                                    "kmod": stats}, 0, 0, 0))
        for op, body, pid, tid, call_id in marks:
            writer.write(Record(Source.MARK, Phase.EVENT, op=op, time_ns=time.monotonic_ns(), pid=pid, tid=tid,
                                call_id=call_id, flags=RecordFlag.SYNTHETIC,
                                buffers=(Buffer(Role.TEXT, When.ONCE, json.dumps(body).encode()),)))
    source.close()
    return written
