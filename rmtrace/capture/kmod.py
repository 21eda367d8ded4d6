"""The kernel shim's side of ``rmtrace record``: draining /dev/rmtrace (``--backend kmod[:PATH]``).

rmtrace.ko (kmod_shim/kmod/) keeps per-CPU rings of records in the one
record format; /dev/rmtrace reads them as a byte stream, oldest first.
``KmodSource`` reads that stream from the device or, for a guest, from
the host end of a virtio-serial port that kmod_shim/guest/rmt_relay feeds
(a Unix socket), and yields whole records.  On the device itself it also
sets the probes whose driver-specific facts (UVM params sizes, the GSP
queue element's place in MESSAGE_QUEUE_INFO) come from the trace's driver
profile.

Two ways to record: ``drain_to_trace`` (``record --backend kmod`` with no
command: the kernel alone, until --duration, Ctrl-C or the module
detaches) and ``KmodFeed``, one more stream of the preload recorder
(``record --backend kmod -- CMD``), merged with the shim's records in time
order.  A module that detaches (docs/kernel-shim.md) ends its stream with
a MARK STOP record of its own, which ends the kernel side of a recording.

Clocks: the module stamps records with CLOCK_MONOTONIC.  On the device the
recorder shares that clock; through a guest's port the guest's clock is its
own, so ``KmodSource.offset_ns`` estimates host minus guest as the smallest
(arrival - stamp) seen so far, the one-way bound a record cannot beat.

The ioctl structs and constants mirror kmod_shim/rmtrace_kmod.h (checked
against its DWARF by tests/kernel/test_kmod_abi.py).
"""

from __future__ import annotations

import enum
import errno
import fcntl
import json
import os
import select
import socket
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from construct import Array, Bytes, Int8ul, Int16ul, Int32sl, Int32ul, Int64ul, Struct

from rmtrace.errors import RmtraceError
from rmtrace.record import (
    HEADER,
    HEADER_SIZE,
    RECORD,
    RECORD_MAGIC,
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

if TYPE_CHECKING:  # for the types only: the decoders import this module (decoders/kcall.py), so a run-time import is a cycle
    from rmtrace.decoders.profiles.model import DriverProfile

DEVICE = "/dev/rmtrace"
KMOD_VERSION = 1
KCALL_BASE = 0x4B000000
PROBE_NAME_MAX = 64
PROBE_MAX_CAPS = 6
PROBE_MAX_DEREF = 3
PROBE_MAX_TABLE = 160
PROBES_MAX = 32


class KCall(enum.IntEnum):
    """enum rmt_kcall: the calls UVM makes into RM, recorded as UVM records with op KCALL_BASE + number."""

    REGISTER_GPU = 1
    UNREGISTER_GPU = 2
    RETAIN_CHANNEL = 3
    RELEASE_CHANNEL = 4
    GET_GPU_INFO = 5


@dataclass(frozen=True)
class KernelCall:
    """One probed nvUvmInterface* function, as rmtrace_probe.c's default list records it."""

    symbol: str
    args: tuple[str, ...]
    """Its parameters, in the order of the ARG buffer's u64 registers."""
    returns_status: bool
    """It returns an NV_STATUS (the EXIT's ret); otherwise void."""


KCALLS = {
    KCall.REGISTER_GPU: KernelCall("nvUvmInterfaceRegisterGpu", ("pUuid", "platformInfo"), True),
    KCall.UNREGISTER_GPU: KernelCall("nvUvmInterfaceUnregisterGpu", ("pUuid",), False),
    KCall.RETAIN_CHANNEL: KernelCall("nvUvmInterfaceRetainChannel",
                                     ("vaSpace", "hClient", "hChannel", "retainedChannel", "channelInstanceInfo"), True),
    KCall.RELEASE_CHANNEL: KernelCall("nvUvmInterfaceReleaseChannel", ("retainedChannel",), False),
    KCall.GET_GPU_INFO: KernelCall("nvUvmInterfaceGetGpuInfo", ("pUuid", "pGpuClientInfo", "pGpuInfo"), True),
}


class ProbeKind(enum.IntEnum):
    """enum rmt_probe_kind"""

    CALL = 1
    SEND = 2
    RECV = 3


class ProbeFlag(enum.IntFlag):
    """enum rmt_probe_flag"""

    VOID = 1 << 0
    OK_ONLY = 1 << 1
    ARGS = 1 << 2


class ValueKind(enum.IntEnum):
    """enum rmt_value_kind"""

    NONE = 0
    CONST = 1
    ARG = 2
    TABLE = 3


class Space(enum.IntEnum):
    """enum rmt_space"""

    KERNEL = 1
    USER = 2


class CaptureWhen(enum.IntFlag):
    """enum rmt_capture_when"""

    BEFORE = 1 << 0
    AFTER = 1 << 1


GSP_ELEMENT_OFFSET = {"535": 48, "550": 48, "570": 48, "575": 48, "580": 48, "590": 48, "595": 80}
"""Offset of pCmdQueueElement in RM's MESSAGE_QUEUE_INFO (message_queue_priv.h) per driver branch: 595 put the
queue's element sizes before it.  The profiles do not carry that struct yet (docs/kernel-shim.md); everything
else the GSP probes read (the element's prefix, the RPC header's length and function) comes from the profile."""

KmodStats = Struct(
    "version" / Int32ul, "cpus" / Int32ul, "sources" / Int32ul, "probes" / Int32ul, "ring_size" / Int64ul,
    "records" / Int64ul, "bytes" / Int64ul, "drops_full" / Int64ul, "drops_big" / Int64ul, "drops_ctx" / Int64ul,
    "consumed" / Int64ul,
)
Value = Struct("kind" / Int8ul, "arg" / Int8ul, "nderef" / Int8ul, "width" / Int8ul, "space" / Int8ul,
               "shift" / Int8ul, "reserved" / Int16ul, "off" / Array(PROBE_MAX_DEREF + 1, Int32sl),
               "mask" / Int64ul, "constant" / Int64ul)
Capture = Struct("role" / Int16ul, "when" / Int8ul, "space" / Int8ul, "slot" / Int32ul, "only_op" / Int32ul,
                 "max" / Int32ul, "addr" / Value, "len" / Value)
ProbeEntry = Struct("key" / Int32ul, "value" / Int32ul)
ProbeSpec = Struct(
    "symbol" / Bytes(PROBE_NAME_MAX), "source" / Int16ul, "kind" / Int8ul, "ncaps" / Int8ul, "flags" / Int32ul,
    "nargs" / Int8ul, "reserved0" / Bytes(3), "fd" / Int32sl, "op" / Value, "cap" / Array(PROBE_MAX_CAPS, Capture),
    "ntable" / Int32ul, "reserved1" / Int32ul, "table" / Array(PROBE_MAX_TABLE, ProbeEntry),
)
ProbeInfo = Struct("index" / Int32ul, "state" / Int32sl, "symbol" / Bytes(PROBE_NAME_MAX), "hits" / Int64ul,
                   "missed" / Int64ul)
MIRRORS = {"rmt_kmod_stats": KmodStats, "rmt_value": Value, "rmt_capture": Capture, "rmt_probe_entry": ProbeEntry,
           "rmt_probe_spec": ProbeSpec, "rmt_probe_info": ProbeInfo}

IOC_MAGIC = 0xB7
IOC_WRITE, IOC_READ = 1, 2


def ioc(direction: int, nr: int, size: int) -> int:
    """Linux's _IOC(dir, RMT_IOC_MAGIC, nr, size): the number of one of the module's ioctls."""
    return (direction << 30) | (size << 16) | (IOC_MAGIC << 8) | nr


IOC_STATS = ioc(IOC_READ, 1, KmodStats.sizeof())
IOC_ADD_PROBE = ioc(IOC_WRITE, 3, ProbeSpec.sizeof())
IOC_PROBE_INFO = ioc(IOC_READ | IOC_WRITE, 5, ProbeInfo.sizeof())

_TOTAL_LEN = RECORD["total_len"]
_TIME = RECORD["time_ns"]
RECORD_MAGIC_BYTES = RECORD_MAGIC.to_bytes(RECORD["magic"].codec.size, "little")


def _value(kind: ValueKind = ValueKind.NONE, arg: int = 0, nderef: int = 0, width: int = 0,
           space: Space | int = 0, shift: int = 0, off: tuple[int, ...] = (), mask: int = 0,
           constant: int = 0) -> dict[str, Any]:
    return {"kind": kind, "arg": arg, "nderef": nderef, "width": width, "space": space, "shift": shift,
            "reserved": 0, "off": list(off) + [0] * (PROBE_MAX_DEREF + 1 - len(off)), "mask": mask,
            "constant": constant}


def _capture(role: Role, when: CaptureWhen, space: Space, addr: dict[str, Any], length: dict[str, Any],
             most: int) -> dict[str, Any]:
    return {"role": role, "when": when, "space": space, "slot": 0, "only_op": 0xFFFFFFFF, "max": most,
            "addr": addr, "len": length}


def _spec(symbol: str, source: Source, caps: list[dict[str, Any]], *, op: dict[str, Any],
          kind: ProbeKind = ProbeKind.CALL, flags: int = 0, fd: int = -1,
          table: list[dict[str, int]] | None = None) -> bytes:
    empty = _capture(Role.ARG, CaptureWhen.BEFORE, Space.KERNEL, _value(), _value(), 0)
    table = table or []
    return ProbeSpec.build({
        "symbol": symbol.encode().ljust(PROBE_NAME_MAX, b"\0"), "source": source, "kind": kind,
        "ncaps": len(caps), "flags": flags, "nargs": 0, "reserved0": bytes(3), "fd": fd, "op": op,
        "cap": caps + [empty] * (PROBE_MAX_CAPS - len(caps)), "ntable": len(table), "reserved1": 0,
        "table": table + [{"key": 0, "value": 0}] * (PROBE_MAX_TABLE - len(table)),
    })


def uvm_probe(profile: DriverProfile) -> bytes:
    """uvm_ioctl's spec with the profile's params sizes (UVM requests are raw numbers, not _IOC-encoded)."""
    table = [{"key": nr, "value": cmd.size} for nr, cmd in sorted(profile.uvm.items()) if cmd.size][:PROBE_MAX_TABLE]
    caps = [_capture(Role.ARG, CaptureWhen.BEFORE | CaptureWhen.AFTER, Space.USER, _value(ValueKind.ARG, arg=2),
                     _value(ValueKind.TABLE), 65536)]
    return _spec("uvm_ioctl", Source.UVM, caps, op=_value(ValueKind.ARG, arg=1, mask=0xFFFFFFFF), table=table)


def gsp_probes(profile: DriverProfile) -> list[bytes]:
    """The GSP message queue's send and receive: the queue element at the branch's offset in
    MESSAGE_QUEUE_INFO, its prefix (ARG) and RPC (PAYLOAD, rpc.length bytes, op rpc.function)
    at the profile's offsets."""
    off = GSP_ELEMENT_OFFSET.get(str(profile.branch))
    header = profile.layouts.get("rpc_message_header_v")
    prefix = profile.constants.get("msgq_prefix_size")
    if off is None or header is None or prefix is None:
        return []
    length, function = header.field("length"), header.field("function")

    def element(at: int, width: int = 0) -> dict[str, Any]:
        return _value(ValueKind.ARG, nderef=1, width=width, space=Space.KERNEL, off=(off, at))

    caps = [_capture(Role.ARG, CaptureWhen.AFTER, Space.KERNEL, element(0), _value(ValueKind.CONST, constant=prefix),
                     prefix),
            _capture(Role.PAYLOAD, CaptureWhen.AFTER, Space.KERNEL, element(prefix),
                     element(prefix + length.offset, length.size), 65536 - prefix)]
    return [_spec(name, Source.GSP, caps, kind=kind, flags=ProbeFlag.OK_ONLY, fd=0,
                  op=element(prefix + function.offset, function.size))
            for name, kind in (("GspMsgQueueSendCommand", ProbeKind.SEND), ("GspMsgQueueReceiveStatus", ProbeKind.RECV))]


def default_probes(profile: DriverProfile) -> list[bytes]:
    """The probes whose facts come from the profile (the module's own defaults cover the rest)."""
    return [uvm_probe(profile), *gsp_probes(profile)]


def is_shim_duplicate(header: tuple) -> bool:
    """A kernel record of an RM or UVM ioctl, a call the preload shim records too (with its fds and buffers)."""
    source = header[H.source]
    return source == Source.RM or (source == Source.UVM and header[H.op] < KCALL_BASE)


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
            try:
                self.sock.connect(path)
            except OSError as exc:
                self.sock.close()
                raise RmtraceError(f"cannot reach the guest's trace port at {path}: {exc.strerror}") from None
            self.sock.setblocking(False)
        else:
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                why = " (root only)" if exc.errno in (errno.EPERM, errno.EACCES) else \
                    " (rmtrace.ko has detached: unload it and load it again)" if exc.errno == errno.ENODEV else ""
                raise RmtraceError(f"cannot open {path}: {exc.strerror}{why}") from None
        self.buf = bytearray()
        self.ended: str | None = None
        """Why the stream ended: "detached" (the module's STOP record, ``end`` holds its JSON) or "closed"."""
        self.end: dict[str, Any] = {}
        self.malformed = 0
        self.offset_ns: int | None = 0 if self.local else None
        """Host CLOCK_MONOTONIC minus the module's (0 on the device; estimated for a guest's port)."""

    @property
    def local(self) -> bool:
        """The device itself (its probes can be set, its clock is ours), not a relayed stream."""
        return self.sock is None

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else self.fd

    def configure(self, probes: list[bytes]) -> list[str]:
        """Add the probes (each replaces the module's probe of the same symbol); those that could not attach."""
        missing = []
        for spec in probes:
            try:
                fcntl.ioctl(self.fd, IOC_ADD_PROBE, spec)
            except OSError:
                missing.append(ProbeSpec.parse(spec).symbol.split(b"\0", 1)[0].decode())
        return missing

    def probes(self) -> dict[str, str]:
        """The module's probes by symbol: attached, or why not (RMT_IOC_PROBE_INFO; empty through a port)."""
        found = {}
        for index in range(PROBES_MAX if self.local else 0):
            raw = bytearray(ProbeInfo.build({"index": index, "state": 0, "symbol": bytes(PROBE_NAME_MAX), "hits": 0,
                                             "missed": 0}))
            fcntl.ioctl(self.fd, IOC_PROBE_INFO, raw)
            info = ProbeInfo.parse(bytes(raw))
            symbol = info.symbol.split(b"\0", 1)[0].decode()
            if symbol:
                found[symbol] = "attached" if info.state == 1 else f"missing ({os.strerror(-info.state)})"
        return found

    def stats(self) -> dict[str, int]:
        """The module's counters: RMT_IOC_STATS on the device, its STOP record's through a port."""
        if not self.local:
            return {k: v for k, v in self.end.items() if isinstance(v, int)}
        raw = bytearray(KmodStats.sizeof())
        fcntl.ioctl(self.fd, IOC_STATS, raw)
        return {k: v for k, v in KmodStats.parse(bytes(raw)).items() if not k.startswith("_")}

    def now_ns(self) -> int:
        """Now on the module's clock (as far as it is known)."""
        return time.monotonic_ns() - (self.offset_ns or 0)

    def read(self, timeout_s: float) -> Iterator[bytes]:
        """Whole records that arrive within ``timeout_s`` (each one's raw bytes); the module's own
        STOP record ends the stream instead of being yielded."""
        if not self.ended and select.select([self], [], [], max(timeout_s, 0.0))[0]:
            try:
                chunk = self.sock.recv(1 << 20) if self.sock is not None else os.read(self.fd, 1 << 20)
            except BlockingIOError:
                chunk = b""
            except OSError:  # the guest's port went away (qemu ended, the connection was reset)
                chunk, self.ended = b"", "closed"
            else:
                if not chunk:
                    self.ended = "closed"
            self.buf += chunk
        arrived = time.monotonic_ns()
        while len(self.buf) >= HEADER_SIZE and self.ended != "detached":
            total = _TOTAL_LEN.get(self.buf)
            if self.buf[:len(RECORD_MAGIC_BYTES)] != RECORD_MAGIC_BYTES or total < HEADER_SIZE or total % 8:
                self.malformed += 1
                del self.buf[:8]  # resynchronise on the next 8-byte boundary
                continue
            if len(self.buf) < total:
                return
            raw = bytes(self.buf[:total])
            del self.buf[:total]
            if not self.local:
                seen = arrived - _TIME.get(raw)
                self.offset_ns = seen if self.offset_ns is None else min(self.offset_ns, seen)
            if self._is_end(raw):
                continue
            yield raw

    def _is_end(self, raw: bytes) -> bool:
        header = HEADER.unpack_from(raw)
        if header[H.source] != Source.MARK or header[H.op] != MarkOp.STOP or not header[H.flags] & RecordFlag.SYNTHETIC:
            return False
        text = decode_record(raw).buffer(Role.TEXT)
        try:
            self.end = json.loads(text.data) if text is not None else {}
        except ValueError:
            self.end = {}
        self.ended = "detached"
        return True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        elif self.fd >= 0:
            os.close(self.fd)


def _mark(op: MarkOp, body: dict[str, Any], time_ns: int, pid: int = 0, tid: int = 0, call_id: int = 0) -> bytes:
    return Record(Source.MARK, Phase.EVENT, op=op, time_ns=time_ns, pid=pid, tid=tid, call_id=call_id,
                  flags=RecordFlag.SYNTHETIC, buffers=(Buffer(Role.TEXT, When.ONCE, json.dumps(body).encode()),)).encode()


def _open(path: str, profile: DriverProfile | None) -> tuple[KmodSource, list[str]]:
    """The source, with the profile's probes set on a local device; warnings about probes that did not attach."""
    source = KmodSource(path)
    warnings: list[str] = []
    if source.local:
        version = source.stats()["version"]
        if version != KMOD_VERSION:
            source.close()
            raise RmtraceError(f"{path}: rmtrace.ko speaks version {version}, this rmtrace {KMOD_VERSION}")
    if source.local and profile is not None:
        try:
            missing = source.configure(default_probes(profile))
        except OSError as exc:
            source.close()
            raise RmtraceError(f"{path}: cannot set the probes: {exc.strerror}") from None
        warnings += [f"probe {name} not attached yet (no such symbol: it attaches when a module defines it)"
                     for name in missing]
    return source, warnings


def _lost(source: KmodSource, stats: dict[str, int]) -> dict[str, int]:
    lost = {k: v for k, v in stats.items() if k.startswith("drops") and v}
    return {**lost, "malformed": source.malformed} if lost or source.malformed else {}


class KmodFeed:
    """The kernel shim as one more stream of the preload recorder (``RecordOptions.feeds``): records of
    the module's rings, their times on the recorder's clock, without the ioctls the shim records itself."""

    name = "kmod"

    def __init__(self, path: str = DEVICE, profile: DriverProfile | None = None) -> None:
        self.source, self.warnings = _open(path, profile)
        self.skipped = 0

    def drain(self) -> Iterator[bytes]:
        source = self.source
        for raw in source.read(0):
            header = HEADER.unpack_from(raw)
            if source.local and is_shim_duplicate(header):
                self.skipped += 1  # the shim has this call, with its fd and buffers as the process saw them
                continue
            offset = source.offset_ns or 0
            yield _TIME.replaced(raw, header[H.time_ns] + offset) if offset else raw

    def meta(self) -> dict[str, Any]:
        return {"path": self.source.path, "local": self.source.local, "warnings": self.warnings,
                "probes": self.source.probes()}

    def closing_marks(self, time_ns: int) -> list[bytes]:
        """A LOST mark when the module dropped records."""
        lost = _lost(self.source, self.source.stats())
        return [_mark(MarkOp.LOST, {"kmod": lost}, time_ns)] if lost else []

    def summary(self) -> dict[str, Any]:
        """What the STOP mark says of the kernel side."""
        return {"ended": self.source.ended, "end": self.source.end, "shim_duplicates_skipped": self.skipped,
                "clock_offset_ns": self.source.offset_ns}

    def close(self) -> None:
        self.source.close()


def drain_to_trace(path: str, output: str, meta: dict[str, Any], *, duration_s: float | None = None,
                   stop: Callable[[], bool] | None = None, lag_s: float = 0.25,
                   profile: DriverProfile | None = None) -> tuple[int, str]:
    """Record what /dev/rmtrace (or a guest's drained port) gives until ``duration_s``, ``stop()`` or the
    stream's end (the module detached); records in time order, calls still open marked IN_FLIGHT, drops
    in a LOST mark.  Returns the number of records written and why it stopped."""
    from rmtrace.capture.merge import CallTracker, TimeMerger
    from rmtrace.trace import TraceWriter

    source, warnings = _open(path, profile)
    merger, calls = TimeMerger(int(lag_s * 1e9)), CallTracker()
    written = 0
    start = time.monotonic()
    reason = "interrupted"
    try:
        writer = TraceWriter(output, {**meta, "backend": "kmod", "kmod": {"path": path, "warnings": warnings,
                                                                          "probes": source.probes()}})
    except OSError as exc:
        source.close()
        raise RmtraceError(f"cannot write {output}: {exc.strerror}") from None
    with writer:
        def release(records: list[Any]) -> None:
            nonlocal written
            for raw, header in records:
                calls.saw(writer.write_encoded(raw), header)
                written += 1
        while True:
            if source.ended:
                reason = source.ended
                break
            if duration_s is not None and time.monotonic() - start >= duration_s:
                reason = "duration"
                break
            if stop is not None and stop():
                break
            for raw in source.read(0.05):
                header = HEADER.unpack_from(raw)
                merger.push(header[H.time_ns], (raw, header))
            release(merger.release(source.now_ns()))
        release(merger.release())
        end = source.now_ns()
        stats = source.stats()
        marks = [_mark(MarkOp.IN_FLIGHT, {"since_ns": call.time_ns, "op": call.op, "enter_seq": call.seq}, end,
                       call.pid, call.tid, call.call_id) for call in calls.in_flight()]
        lost = _lost(source, stats)
        if lost:
            marks.append(_mark(MarkOp.LOST, lost, end))
        marks.append(_mark(MarkOp.STOP, {"reason": reason, "records": written, "kmod": stats,
                                         "late_records": merger.late}, end))
        for raw in marks:
            writer.write_encoded(raw)
    source.close()
    return written, reason
