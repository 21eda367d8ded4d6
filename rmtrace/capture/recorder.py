"""The recorder: run a command tree under the capture shim and write its trace.

One loop: reap exited children, read every ring (new rings are found as
their threads start), release in time order the records no ring can still
publish an older one than (the watermark, rmtrace.capture.merge) into the
``TraceWriter`` (which numbers them), flush now and then so a live reader
sees them.  It stops when the tree has exited, on Ctrl-C (after
giving the tree a moment to exit on its own) or after ``--duration``.  Then
it reads everything that is left, marks each call still in flight
(MARK IN_FLIGHT, with the enter's pid, tid and call id), reports losses
(MARK LOST) and why it stopped (MARK STOP), and closes the trace; only then
does it end a tree that is still running (SIGTERM, a grace period, SIGKILL),
so a wedged command is recorded whole before anything is done to it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from rmtrace import __version__
from rmtrace.capture import ctab
from rmtrace.capture.host import DRIVER_VERSION_FILE, clocksource, host_metadata
from rmtrace.capture.merge import CallTracker, TimeMerger, Watermark
from rmtrace.capture.process import Tree, become_subreaper, descendants, exit_code, launch, terminate
from rmtrace.capture.progress import Progress
from rmtrace.capture.ring import Ring, check_machine, well_formed
from rmtrace.capture.session import Session, alive, sweep_stale_sessions
from rmtrace.capture.shm import READ_COUNTERS, RING_COUNTERS
from rmtrace.errors import RmtraceError
from rmtrace.kmod_shim import interposer_path
from rmtrace.record import (
    HEADER,
    Buffer,
    H,
    MarkOp,
    Phase,
    Record,
    RecordFlag,
    Role,
    Source,
    SysOp,
    When,
    enum_name,
)
from rmtrace.trace import TraceWriter

if TYPE_CHECKING:  # importing the decoders costs a recorder most of its start-up: types only
    from rmtrace.decoders.profiles.model import DriverProfile

SHIM_ENV = ("LD_PRELOAD", "RMTRACE_SESSION_DIR", "RMTRACE_EXEC_CALL")
NVIDIA_SYS_OPS = frozenset((SysOp.OPEN, SysOp.CLOSE, SysOp.DUP, SysOp.MMAP, SysOp.MUNMAP))
POLL_S = 0.01
"""How often an idle recorder looks at the rings (a busy one looks every 2 ms)."""
LOSS_COUNTERS = ("lost_full", "lost_nested", "lost_noring", "trunc_big", "malformed")
"""Counters that mean the trace misses something (lost_stopped counts calls after the stop)."""


class Feed(Protocol):
    """A record stream merged with the rings' in time order (the kernel shim's
    ``rmtrace.capture.kmod.KmodFeed``): read like a ring, named in the metadata and the STOP mark."""

    name: str

    def drain(self) -> Iterable[bytes]:
        """The records that arrived since the last call, each the record format's bytes."""

    def meta(self) -> dict[str, Any]:
        """What the trace's metadata says of the stream, under its name."""

    def closing_marks(self, time_ns: int) -> list[bytes]:
        """Records to write before the STOP mark (its losses)."""

    def summary(self) -> dict[str, Any]:
        """What the STOP mark says of the stream, under its name."""


@dataclass
class RecordOptions:
    """What ``record_command`` runs and how it records it."""

    command: Sequence[str]
    output: str
    duration_s: float | None = None
    lossy: bool = False
    ring_size: int = ctab.DEFAULT_RING_SIZE
    lag_s: float = 0.03
    """How long records of a feed wait to be merged in time order: a feed keeps no ``writing`` stamp
    (rings do: their records are merged by each ring's floor, rmtrace.capture.merge)."""
    stall_s: float = 1.0
    """How long the merge waits for a ring inside one record (its thread descheduled between the
    record's time and its publication) before it writes the others (docs/capture.md)."""
    flush_after_s: float = 0.03
    """The longest a record waits in the writer before its chunk is finished and on the disk.

    With the 10 ms poll this bounds what a recorder killed at any moment (SIGKILL, OOM, a VM
    reset) loses: the records of its last ~55 ms (docs/capture.md, *When the recorder dies*)."""
    grace_s: float = 2.0
    """Between SIGTERM and SIGKILL when ending a tree still running at the stop."""
    interrupt_grace_s: float = 1.0
    """After Ctrl-C, how long the tree may take to exit on its own before recording stops."""
    tsc: bool = True
    """Time records by the TSC, extrapolated from CLOCK_MONOTONIC (kmod_shim/shim.h, shim_now), where the
    kernel's clocksource is the TSC; False: always by clock_gettime."""
    progress: bool | None = None
    """Show the live progress line: None means when stderr is a terminal."""
    feeds: Sequence[Feed] = ()
    """More record streams merged in time order, each read like a ring (``drain()``) and named in the
    metadata and the STOP mark: the kernel shim's ``rmtrace.capture.kmod.KmodFeed``."""


@dataclass
class RecordResult:
    """How a recording ended and what it wrote."""

    exit_status: int
    stop_reason: str
    records: int = 0
    bytes: int = 0
    processes: int = 0
    in_flight: int = 0
    losses: dict[str, int] = field(default_factory=dict)
    nvidia_seen: bool = False
    terminated: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def select_capture_profile(driver_version: str | None) -> tuple[DriverProfile, str | None]:
    """The driver profile whose tables the shim uses: the running driver's (or its nearest);
    with no NVIDIA driver loaded, the newest shipped profile."""
    from rmtrace.decoders.profiles import available_profiles, load_profile, select_profile

    if driver_version is None:
        newest = available_profiles()[-1]
        return load_profile(newest), (f"no NVIDIA driver loaded (no {DRIVER_VERSION_FILE}); "
                                      f"UVM sizes and control pointers come from profile {newest}, the newest")
    return select_profile(driver_version)


def capture_table(driver_version: str | None, ring_size: int, lossy: bool) -> tuple[ctab.CaptureTable, str, str | None]:
    """The capture table for this driver, its profile's version and the warning choosing it gave:
    from the user's cache when this rmtrace made it before (loading a profile is most of a
    recorder's start-up), else from the profile, then cached."""
    key = ctab.cache_key(driver_version)
    hit = ctab.cached(key)
    if hit is None:
        profile, warning = select_capture_profile(driver_version)
        hit = ctab.table_from_profile(profile), profile.version, warning
        ctab.store(key, *hit)
    table, version, warning = hit
    return table._replace(ring_size=ctab.check_ring_size(ring_size), lossy=lossy), version, warning


def child_environment(shim: str, session_dir: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The traced command's environment: the shim first in LD_PRELOAD, the session named."""
    env = dict(os.environ if base is None else base)
    env.pop("RMTRACE_EXEC_CALL", None)
    preload = env.get("LD_PRELOAD", "").strip()
    env["LD_PRELOAD"] = f"{shim}:{preload}" if preload else shim
    env["RMTRACE_SESSION_DIR"] = session_dir
    return env


def utc_iso(epoch_ns: int) -> str:
    """ISO 8601 UTC time with microseconds, as ``datetime.isoformat`` writes it (``datetime`` itself is a
    few ms of every recorder's start-up)."""
    seconds, ns = divmod(epoch_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ns // 1000:06d}+00:00"


def _mark(op: int, text: dict, *, time_ns: int | None = None, pid: int | None = None, tid: int = 0,
          call_id: int = 0) -> bytes:
    """A recorder-written MARK record (flag SYNTHETIC) carrying JSON text."""
    blob = json.dumps(text, sort_keys=True).encode()
    return Record(Source.MARK, Phase.EVENT, op, time_ns=time_ns or time.monotonic_ns(), pid=pid or os.getpid(),
                  tid=tid or threading.get_native_id(), call_id=call_id, flags=RecordFlag.SYNTHETIC,
                  buffers=(Buffer(Role.TEXT, When.ONCE, blob),)).encode()


class Recorder:
    def __init__(self, options: RecordOptions, profile: DriverProfile | None = None,
                 profile_warning: str | None = None) -> None:
        if not options.command:
            raise RmtraceError("no command to record (give it after --)")
        self.opt = options
        self._profile = profile
        self._profile_warning = profile_warning
        self._rings: list[Ring] = []
        self._retired: dict[str, int] = {name: 0 for name in RING_COUNTERS + READ_COUNTERS}
        self._broken: list[dict] = []
        self._merger = TimeMerger()
        self._watermark = Watermark(int(options.stall_s * 1e9))
        self._calls = CallTracker()
        self._pids: set[int] = set()
        self._signal: str | None = None
        self.result = RecordResult(exit_status=0, stop_reason="")
        self._malformed = 0

    # ------------------------------------------------------------ setup

    def _metadata(self, host: dict, profile: str, table: ctab.CaptureTable, shim: str) -> dict:
        meta = dict(host)
        meta.update({
            "command": list(self.opt.command),
            "backend": "+".join(["preload", *(feed.name for feed in self.opt.feeds)]),
            **{feed.name: feed.meta() for feed in self.opt.feeds},
            "start_time": utc_iso(time.time_ns()),
            "start_monotonic_ns": time.monotonic_ns(),
            "profile": profile,
            "profile_warning": self._profile_warning,
            "capture": {"ring_size": table.ring_size, "lossy": table.lossy, "max_buffer": table.max_buffer,
                        "merge": "watermark", "stall_ms": int(self.opt.stall_s * 1000),
                        "clock": "tsc" if table.tsc else "clock_gettime",
                        "flush_ms": int(self.opt.flush_after_s * 1000),
                        "shim": shim},
            "recorder": {"pid": os.getpid(), "rmtrace": __version__},
        })
        if os.environ.get("RMTRACE_TEST_DEVICE_DIR"):
            meta["test_device_dir"] = os.environ["RMTRACE_TEST_DEVICE_DIR"]
        return meta

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signal = signal.Signals(signum).name

    # ------------------------------------------------------------ reading rings

    def _drain(self, ring: Ring | Feed) -> int:
        got = 0
        for raw in ring.drain():
            header = well_formed(raw)
            if header is None:
                self._malformed += 1
                continue
            self._merger.push(header[H.time_ns], (raw, header))
            got += 1
        return got

    def _read_rings(self, session: Session, now_ns: int) -> tuple[int, int]:
        """Drain every ring (now_ns read before): the records read, and the watermark, the time at or
        below which every ring has published all it ever will (rmtrace.capture.merge)."""
        self._rings.extend(session.new_rings())
        low = self._watermark.idle_floor(now_ns)
        got = 0
        for ring in self._rings:
            writing = ring.writing  # before the drain, so the drain has what was published by then
            got += self._drain(ring)
            if writing and not alive(ring.pid):
                got += self._drain(ring)  # killed in a record: what it published before it died, and no more
                continue
            floor = self._watermark.floor(ring.path, writing, now_ns)
            if floor is not None:
                low = min(low, floor)
        for feed in self.opt.feeds:
            got += self._drain(feed)
            low = min(low, now_ns - int(self.opt.lag_s * 1e9))
        return got, low

    def _retire_rings(self, session: Session, everything: bool = False) -> None:
        """Forget rings that can get nothing new: thread exited, process gone, or broken."""
        keep = []
        for ring in self._rings:
            if not (everything or ring.broken or ring.closed or not alive(ring.pid)):
                keep.append(ring)
                continue
            self._drain(ring)
            for name, value in ring.counters().items():
                self._retired[name] += value
            if ring.broken:
                self._broken.append({"pid": ring.pid, "tid": ring.tid, "reason": ring.broken})
            self._watermark.forget(ring.path)
            session.remove_ring(ring)
        self._rings = keep

    def _write(self, writer: TraceWriter, records: list[tuple[bytes, tuple]]) -> None:
        res = self.result
        for raw, h in records:
            seq = writer.write_encoded(raw)
            self._calls.saw(seq, h)
            self._pids.add(h[H.pid])
            res.records += 1
            res.bytes += len(raw)
            source = h[H.source]
            if source in (Source.RM, Source.UVM) or (source == Source.SYS and h[H.op] in NVIDIA_SYS_OPS):
                res.nvidia_seen = True

    def _synthetic_exits(self, reaped: list) -> None:
        """Processes we reaped that a signal killed wrote no EXIT themselves: write it for them."""
        for r in reaped:
            if os.WIFSIGNALED(r.status):
                raw = Record(Source.SYS, Phase.EVENT, SysOp.EXIT, time_ns=r.time_ns, pid=r.pid, tid=r.pid,
                             ret=-os.WTERMSIG(r.status), flags=RecordFlag.SYNTHETIC).encode()
                self._merger.push(r.time_ns, (raw, HEADER.unpack_from(raw)))

    # ------------------------------------------------------------ the loop

    def run(self) -> RecordResult:
        check_machine()
        shim = interposer_path()
        host = host_metadata()
        if self._profile is not None:
            version, warning = self._profile.version, self._profile_warning
            table = ctab.table_from_profile(self._profile, ring_size=self.opt.ring_size, lossy=self.opt.lossy)
        else:
            table, version, warning = capture_table(host["driver_version"], self.opt.ring_size, self.opt.lossy)
        table = table._replace(tsc=self.opt.tsc and clocksource() == "tsc")
        self._profile_warning = warning
        if warning:
            self.result.warnings.append(f"driver profile: {warning}")
        stale = sweep_stale_sessions()
        if stale:
            self.result.warnings.append(f"removed {len(stale)} capture session folder{'s' if len(stale) != 1 else ''} "
                                        f"left in {os.path.dirname(stale[0])} by recorders that died")
        session = Session(ctab.encode(table))
        old_handlers = {}
        try:
            try:
                writer = TraceWriter(self.opt.output, self._metadata(host, version, table, shim), durable=True)
            except OSError as exc:
                raise RmtraceError(f"cannot write {self.opt.output}: {exc.strerror}") from None
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                old_handlers[sig] = signal.signal(sig, self._on_signal)
            become_subreaper()
            try:
                tree = Tree(launch(list(self.opt.command), child_environment(shim, session.dir)))
            except RmtraceError:
                writer.close()
                os.unlink(self.opt.output)
                raise
            self._loop(session, writer, tree)
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            session.cleanup()
        return self.result

    def _loop(self, session: Session, writer: TraceWriter, tree: Tree) -> None:
        progress = Progress(enabled=self.opt.progress)
        start = time.monotonic()
        interrupt_deadline = None
        next_retire = start
        while True:
            now_ns = time.monotonic_ns()  # first: whatever is reaped or drained after it is not older
            self._synthetic_exits(tree.reap())
            got, watermark = self._read_rings(session, now_ns)
            self._write(writer, self._merger.release(watermark))
            now = time.monotonic()
            if tree.exited:
                reason = "exited"
                break
            if self.opt.duration_s is not None and now - start >= self.opt.duration_s:
                reason = "duration"
                break
            if self._signal:
                interrupt_deadline = interrupt_deadline or now + self.opt.interrupt_grace_s
                if now >= interrupt_deadline:
                    reason = "interrupted"
                    break
            if writer.pending_age() >= self.opt.flush_after_s:
                writer.flush()  # on the disk within ~85 ms of its time: what a killed recorder can lose
            if now >= next_retire:
                self._retire_rings(session)
                next_retire = now + 1.0
            progress.update(self.result.records, self.result.bytes, len(self._pids), now - start)
            tree.wait(0.002 if got else POLL_S)
        progress.update(self.result.records, self.result.bytes, len(self._pids), time.monotonic() - start, force=True)
        progress.finish()
        self._finish(session, writer, tree, reason, start)

    def _finish(self, session: Session, writer: TraceWriter, tree: Tree, reason: str, start: float) -> None:
        res = self.result
        res.stop_reason = reason
        running = reason != "exited"
        self._read_rings(session, time.monotonic_ns())
        if running:
            session.stop()  # shims stop writing; nothing waits on a full ring any more
        self._synthetic_exits(tree.reap())
        self._read_rings(session, time.monotonic_ns())
        self._retire_rings(session, everything=True)
        self._write(writer, self._merger.release())
        live = set(descendants(os.getpid())) if running else set()
        self._write(writer, [(raw, HEADER.unpack_from(raw)) for raw in self._closing_marks(session, reason, live, start, tree)])
        writer.close()
        if running:
            res.terminated = terminate(tree, self.opt.grace_s)
        status = tree.root_status
        res.exit_status = exit_code(status) if status is not None else 128 + signal.SIGKILL
        res.processes = len(self._pids - {os.getpid()})
        if not res.nvidia_seen:
            res.warnings.append(nothing_captured(res.processes))
        lost = {k: v for k, v in res.losses.items() if k in LOSS_COUNTERS and v}
        if lost:
            res.warnings.append("the trace misses records: " + ", ".join(f"{k} {v}" for k, v in lost.items())
                                + (" (--lossy)" if self.opt.lossy else ""))

    def _closing_marks(self, session: Session, reason: str, live: set[int], start: float, tree: Tree) -> list[bytes]:
        res = self.result
        marks = []
        in_flight = self._calls.in_flight()
        for call in in_flight:
            marks.append(_mark(MarkOp.IN_FLIGHT, {
                "source": enum_name(Source, call.source), "op": call.op, "fd": call.fd, "enter_seq": call.seq,
                "since_ns": call.time_ns, "process_alive": call.pid in live,
                "uncertain": "its ring dropped records (--lossy)" if self.opt.lossy and self._retired["lost_full"]
                else None,
            }, pid=call.pid, tid=call.tid, call_id=call.call_id))
        res.in_flight = len(in_flight)
        res.losses = {name: self._retired[name] for name in RING_COUNTERS}
        res.losses.update(lost_noring=session.lost_noring, malformed=self._malformed, late_records=self._merger.late,
                          ring_stalls=self._watermark.stalls, unmatched_exits=self._calls.unmatched_exits)
        if self.opt.lossy or any(res.losses[k] for k in LOSS_COUNTERS):
            marks.append(_mark(MarkOp.LOST, dict(res.losses, lossy=self.opt.lossy)))
        marks += [mark for feed in self.opt.feeds for mark in feed.closing_marks(time.monotonic_ns())]
        marks.append(_mark(MarkOp.STOP, {
            "reason": reason, "signal": self._signal, "elapsed_s": round(time.monotonic() - start, 6),
            "exit_status": exit_code(tree.root_status) if tree.root_status is not None else None,
            "records": res.records + len(marks) + 1, "in_flight": len(in_flight),
            "processes": len(self._pids - {os.getpid()}), "images": session.images,
            "terminating": sorted(live), "broken_rings": self._broken,
            "ring_waits": self._retired["waits"], "ring_wait_ns": self._retired["wait_ns"],
            "buffer_reads": {name.removeprefix("read_"): self._retired[name] for name in READ_COUNTERS},
            "late_records": self._merger.late, "ring_stalls": self._watermark.stalls,
            **{feed.name: feed.summary() for feed in self.opt.feeds},
        }))
        return marks


def nothing_captured(processes: int) -> str:
    """The message for a recording with no NVIDIA traffic, saying why."""
    if processes:
        return (f"nothing was captured: no traced process opened a /dev/nvidia* device "
                f"({processes} process{'es' if processes != 1 else ''} ran under the capture shim)")
    return ("nothing was captured: no process loaded the capture shim (a statically linked or set-uid "
            "program ignores LD_PRELOAD)")


def record_command(options: RecordOptions, profile: DriverProfile | None = None,
                   profile_warning: str | None = None) -> RecordResult:
    """Record ``options.command`` into ``options.output``; see ``Recorder``."""
    return Recorder(options, profile, profile_warning).run()
