"""``--against nvidia``: each recorded client re-issues its RM and UVM calls against the real driver.

Each replayed client is a process of its own (``executor.py``, started at
its first message), with a thread per recorded thread, so sequential,
concurrent and simultaneous schedules run as real, separate RM clients.  What
a process is sent was decided here: the compiled action of the message
(``compile.py``: safe or skipped, buffers, pointers, the fields to remap),
with its fields rewritten from this client's maps (``remap.py``) -- handles
RM assigned, fds, addresses, values the driver handed out, GPU UUIDs and ids.
An answer is written back in the recording's terms (the same maps, the other
way), so that the replay's trace, ``diff`` and the comparison with the
recording see only what really differs; the maps themselves are in the
per-client table (``client_tables``).

Every object a client process holds is freed at its recorded exit or when
the replay ends, stops with an error or is interrupted: the target sends the
process a teardown (UVM fds closed, RM clients still alive freed, every fd
closed) and kills it if it does not finish in time.  A killed process is
cleaned up by the kernel as a crashed CUDA program is: closing its fds makes
RM free its clients and UVM destroy its address space.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import time
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from rmtrace.decoders.profiles.safety import replay_tables
from rmtrace.replayer.messages import Message, Outcome
from rmtrace.replayer.plan import Plan
from rmtrace.replayer.targets.base import Reply, RunInfo, Sink, Target
from rmtrace.replayer.targets.nvidia.compile import (
    MAP_FIXED,
    RM_FREE,
    Action,
    Compiler,
    Ioctl,
    Program,
    Site,
    ioctl_request,
    uuid_bytes,
)
from rmtrace.replayer.targets.nvidia.process import ClientProcess
from rmtrace.replayer.targets.nvidia.remap import AddressMap, Remap

from rmtrace.capture.host import gpus as current_gpus
from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, MarkOp, Phase, Record, RecordFlag, Role, Source, When, decode_record

DEVICE_DIR_ENV = "RMTRACE_TEST_DEVICE_DIR"
"""Where the device nodes are (the capture shim's test variable; /dev when unset)."""
TEARDOWN_TIMEOUT_S = 10.0
DEATH = (-1, errno.ESRCH)
"""The answer to a call whose process died under it: ret -1, ESRCH."""


@dataclass
class ClientStats:
    """What one replayed client did: the per-client table."""

    id: str
    label: str
    calls: int
    """RM and UVM calls in its stream."""
    pid: int = 0
    replayed: int = 0
    driver_ns: int = 0
    """Time inside the driver (ioctl calls alone, as the client process timed them)."""
    recorded_ns: int = 0
    """The recorded time inside the driver of the same calls."""
    skipped: list[tuple[int, str, str, bool]] = field(default_factory=list)
    """(message number, name, reason, an RM or UVM call)."""
    unsafe_sent: list[tuple[int, str, str]] = field(default_factory=list)
    freed: list[tuple[int, int, int]] = field(default_factory=list)
    """RM clients the teardown freed: (handle, ioctl return, NV status)."""
    ended: str = ""
    maps: dict[str, Any] = field(default_factory=dict)
    times: list[tuple[int, int, int]] = field(default_factory=list)
    """(message index, ns inside the driver, recorded ns) of each replayed call."""

    @property
    def share(self) -> float:
        """RM and UVM calls replayed rather than skipped, in percent."""
        skipped = sum(1 for s in self.skipped if s[3])
        return 100.0 * (self.calls - skipped) / self.calls if self.calls else 100.0

    def to_json(self) -> dict[str, Any]:
        return {"client": self.id, "label": self.label, "replay_pid": self.pid, "rm_uvm_calls": self.calls,
                "replayed": self.replayed, "skipped": len(self.skipped), "replayed_share_pct": round(self.share, 2),
                "driver_ns": self.driver_ns, "recorded_driver_ns": self.recorded_ns,
                "driver_ratio": round(self.driver_ns / self.recorded_ns, 4) if self.recorded_ns else None,
                "skips": [{"message": n, "name": name, "reason": why} for n, name, why, _rm in self.skipped],
                "unsafe_sent": [{"message": n, "name": name, "reason": why} for n, name, why in self.unsafe_sent],
                "teardown_freed": [{"client": f"{h:#x}", "ret": r, "status": s} for h, r, s in self.freed],
                "ended": self.ended, "maps": self.maps}


class _Run:
    """One replayed client: its process, its maps, what is in flight."""

    def __init__(self, client: Any, program: Program, stats: ClientStats) -> None:
        self.client = client
        self.program = program
        self.stats = stats
        self.proc: ClientProcess | None = None
        self.handles: Remap[int] = Remap()
        self.fds: Remap[int] = Remap()
        self.cookies: Remap[int] = Remap()
        self.gpuids: Remap[int] = Remap()
        self.addresses = AddressMap()
        self.failed: dict[Any, tuple[int, str]] = {}
        """Keys defined by a message that diverged: its number and name."""
        self.files: dict[int, int] = {}
        """Real fd -> the open file it is (dup shares it)."""
        self.file_refs: dict[int, int] = {}
        self.roots: dict[int, int] = {}
        """RM clients alive: real handle -> the open file they were allocated through."""
        self.dead = ""
        self.finished = False


class NvidiaTarget(Target):
    """The real driver (see the module docstring)."""

    answers = frozenset({"status", "ret", "err", "fields"})

    def __init__(self, plan: Plan, *, allow_unsafe: bool = False, gpus: list[dict[str, str]] | None = None) -> None:
        self.plan = plan
        self.semantics = plan.semantics
        self.tables = replay_tables(plan.semantics.profile)
        self.compiler = Compiler(plan.semantics, self.tables, allow_unsafe=allow_unsafe)
        self.allow_unsafe = allow_unsafe
        self.name = "nvidia (unsafe calls allowed)" if allow_unsafe else "nvidia"
        self.device_dir = os.environ.get(DEVICE_DIR_ENV) or "/dev"
        free = plan.semantics.profile.escapes.get(RM_FREE)
        self.free_request = ioctl_request(free.nr, free.size or 0) if free is not None else 0
        """RM_FREE (its argument NVOS00, by the profile) as the teardown issues it for each root client left."""
        self.uuids: Remap[bytes] = Remap()
        self._recorded_gpus = list(plan.meta.get("gpus") or [])
        self._gpus_now = gpus
        self._programs: dict[int, Program] = {}
        self.runs: dict[str, _Run] = {}
        self._pending: dict[tuple[int, int], tuple[_Run, Hashable, Message, Action]] = {}
        self._sel = selectors.DefaultSelector()
        self._ready: list[Reply] = []
        self._sink: Sink | None = None

    # ------------------------------------------------------------------ Target

    def open(self, info: RunInfo, sink: Sink | None) -> None:
        control = os.path.join(self.device_dir, "nvidiactl")
        if not os.path.exists(control):  # else every client "diverges" at its first open, and an oracle judges nothing
            raise RmtraceError(f"{self.name}: no NVIDIA driver on this machine ({control} is absent); "
                               "replay against nvidia where the driver is loaded")
        self._sink = sink
        now = {g.get("bus"): g for g in (self._gpus_now if self._gpus_now is not None else current_gpus())}
        for g in self._recorded_gpus:
            then, here = uuid_bytes(g.get("gpu_uuid", "")), uuid_bytes(now.get(g.get("bus"), {}).get("gpu_uuid", ""))
            if then and here:  # same bus address: the board that stands there now
                self.uuids.learn(then, here)

    def now(self) -> int:
        return time.monotonic_ns()

    def program(self, messages: list[Message]) -> Program:
        found = self._programs.get(id(messages))
        if found is None:
            found = self._programs[id(messages)] = self.compiler.compile(messages)
        return found

    def skip(self, ticket: Hashable, client: Any, msg: Message) -> str | None:
        run = self._run(client)
        action = run.program.actions[msg.index]
        reason = action.reason if action.kind == "skip" else None
        if reason is None:
            cause = next((run.failed[k] for k in action.uses if k in run.failed), None)
            if cause is not None:
                reason = f"depends on message {cause[0] + 1} ({cause[1]}), which diverged"
            elif run.dead:
                reason = f"its replaying process {run.dead}"
        if reason is not None:
            source = decode_record(msg.request).source
            run.stats.skipped.append((msg.index + 1, msg.name, reason, source in (Source.RM, Source.UVM)))
            for key in action.defines:
                run.failed.setdefault(key, (msg.index, msg.name))
        return reason

    def submit(self, ticket: Hashable, client: Any, msg: Message) -> Outcome | None:
        run = self._run(client)
        action = run.program.actions[msg.index]
        if action.kind == "none":
            return Outcome()
        proc = self._start(run)
        tid = client.tid(msg)
        kind = action.kind
        if kind == "open":
            op = proc.send(tid, "open", os.path.join(self.device_dir, action.path))
        elif kind == "close":
            op = proc.send(tid, "close", run.fds.forward(action.fd))
        elif kind == "dup":
            op = proc.send(tid, "dup", run.fds.forward(action.old_fd))
        elif kind == "mmap":
            addr, length, prot, flags, offset = action.mmap
            real = run.addresses.forward(addr) if addr else 0
            if self._is_uvm(run, action.fd):
                offset = run.addresses.forward(offset)  # UVM maps at offset == address
            op = proc.send(tid, "mmap", real, length, prot, flags, run.fds.forward(action.fd), offset)
        elif kind == "munmap":
            op = proc.send(tid, "munmap", run.addresses.forward(action.mmap[0]), action.mmap[1])
        elif kind == "exit":
            op = proc.send(tid, "teardown", self._frees(run), self.free_request)
        else:
            call = action.ioctl
            bufs = [bytearray(b) for b in call.bufs]
            for s in call.sites:
                self._forward(run, s.role, bufs[s.buf], s.offset, s.size)
            drop = [(run.addresses.forward(a), n) for a, n in call.drop]
            op = proc.send(tid, "ioctl", run.fds.forward(call.fd), call.request, [bytes(b) for b in bufs],
                           call.links, call.after, drop)
            if action.unsafe:
                run.stats.unsafe_sent.append((msg.index + 1, msg.name, action.unsafe))
        self._pending[(proc.pid, op)] = (run, ticket, msg, action)
        return None

    def wait(self, deadline_ns: int) -> list[Reply]:
        while not self._ready:
            left = (deadline_ns - self.now()) / 1e9
            if left <= 0 or not self._sel.get_map():
                break
            for key, _events in self._sel.select(left):
                self._take(*key.data)
        return self._flush()

    def idle(self, ns: int) -> list[Reply]:
        for key, _events in self._sel.select(0) if self._sel.get_map() else ():
            self._take(*key.data)
        return self._flush()

    def close(self) -> None:
        """Tear every client process down, whatever state the replay ended in (Ctrl-C held off meanwhile)."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            live = [(r, r.proc) for r in self.runs.values() if r.proc is not None and not r.proc.closed
                    and not r.finished]
            teardowns = {(p.pid, p.send(0, "teardown", self._frees(r), self.free_request)) for r, p in live}
            until = time.monotonic() + TEARDOWN_TIMEOUT_S
            while any(not p.closed for _r, p in live) and time.monotonic() < until:
                for key, _events in self._sel.select(min(0.2, max(0.0, until - time.monotonic()))):
                    run, proc = key.data
                    for answer in proc.read():
                        if (proc.pid, answer[0]) in teardowns:
                            run.stats.freed.extend(tuple(f) for f in answer[5] or ())
                    if proc.closed:
                        self._sel.unregister(proc.out)
            for run in self.runs.values():
                proc = run.proc
                if proc is not None:
                    if not proc.wait(1.0) and not run.stats.ended:
                        run.stats.ended = "killed at the end of the replay (it did not finish its teardown in time)"
                    proc.kill()
                    run.stats.ended = run.stats.ended or proc.died() or "ended"
                self._record_maps(run)
                if self._sink is not None:  # the per-client table travels in the replay's own trace
                    self._sink(self._table_record(run))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            self._sel.close()

    # ------------------------------------------------------------------ per client

    def _run(self, client: Any) -> _Run:
        run = self.runs.get(client.id)
        if run is None:
            program = self.program(client.messages)
            calls = sum(1 for m in client.messages if decode_record(m.request).source in (Source.RM, Source.UVM))
            run = self.runs[client.id] = _Run(client, program, ClientStats(client.id, client.label, calls))
        return run

    def _start(self, run: _Run) -> ClientProcess:
        proc = run.proc
        if proc is None:
            proc = run.proc = ClientProcess(run.client.label)
            run.stats.pid = proc.pid
            self._sel.register(proc.out, selectors.EVENT_READ, (run, proc))
            if run.program.reservations:
                op = proc.send(0, "reserve", run.program.reservations)
                answer = self._sync(run, proc, op)
                for (base, length, _rw), got in zip(run.program.reservations, answer[5]):
                    if not got:
                        raise RmtraceError(f"{run.client.label}: could not reserve {length:#x} bytes for the "
                                           f"recorded range at {base:#x}")
                    run.addresses.learn(base, length, got)
        return proc

    def _sync(self, run: _Run, proc: ClientProcess, op: int) -> tuple:
        """Wait for one answer of ``run``'s process, queueing the others."""
        until = time.monotonic() + TEARDOWN_TIMEOUT_S
        while time.monotonic() < until:
            for answer in proc.read():
                if answer[0] == op:
                    return answer
                self._answered(run, proc, answer)
            if proc.closed:
                break
            time.sleep(0.001)
        raise RmtraceError(f"the process replaying {run.client.label} did not answer ({proc.died() or 'stuck'})")

    @staticmethod
    def _frees(run: _Run) -> list[tuple[int, int]]:
        """(an fd of the file each was allocated through, handle) of the RM clients still alive."""
        fd_of: dict[int, int] = {}
        for fd, file in run.files.items():
            fd_of.setdefault(file, fd)
        return [(fd_of[file], handle) for handle, file in run.roots.items() if file in fd_of]

    @staticmethod
    def _is_uvm(run: _Run, fd: int) -> bool:
        opener = next((a for a in run.program.actions if a.kind == "open" and a.fd == fd), None)
        return opener is not None and opener.path.startswith("nvidia-uvm")

    # ------------------------------------------------------------------ answers

    def _take(self, run: _Run, proc: ClientProcess) -> None:
        for answer in proc.read():
            self._answered(run, proc, answer)
        if proc.closed:
            self._sel.unregister(proc.out)
            if not run.finished:
                proc.wait(1.0)
                run.dead = run.stats.ended = proc.died() or "ended"
            for key in [k for k, v in self._pending.items() if v[0] is run]:
                _r, ticket, msg, _a = self._pending.pop(key)
                self._ready.append((ticket, Outcome(ret=DEATH[0], err=DEATH[1])))

    def _answered(self, run: _Run, proc: ClientProcess, answer: tuple) -> None:
        entry = self._pending.pop((proc.pid, answer[0]), None)
        if entry is None:
            return
        _run, ticket, msg, action = entry
        ret, err, _start, took, extra = answer[1:6]
        if action.kind == "ioctl":
            outcome = self._ioctl_outcome(run, msg, action, ret, err, extra)
            run.stats.replayed += 1
            run.stats.driver_ns += took
            run.stats.recorded_ns += msg.dur_ns
            run.stats.times.append((msg.index, took, msg.dur_ns))
        else:
            outcome = self._sys_outcome(run, msg, action, ret, err, extra)
        self._ready.append((ticket, outcome))

    def _sys_outcome(self, run: _Run, msg: Message, action: Action, ret: int, err: int, extra: Any) -> Outcome:
        kind = action.kind
        if kind == "exit":
            run.finished = True
            run.stats.freed.extend(tuple(f) for f in extra or ())
            run.roots.clear()
            return Outcome()
        if ret < 0:
            for key in action.defines:
                run.failed[key] = (msg.index, msg.name)
            if kind in ("open", "dup"):
                return Outcome(ret=ret, err=err)
        for key in action.defines:  # defined anew: what failed under that key before is history
            run.failed.pop(key, None)
        if kind in ("open", "dup"):
            run.fds.learn(action.fd, ret)
            if kind == "open":
                run.files[ret] = len(run.file_refs)
                run.file_refs[run.files[ret]] = 1
            else:
                real_old = run.fds.forward(action.old_fd)
                run.files[ret] = run.files.get(real_old, -1)
                run.file_refs[run.files[ret]] = run.file_refs.get(run.files[ret], 0) + 1
            return Outcome()
        if kind == "close" and ret == 0:
            self._closed(run, run.fds.forward(action.fd))
        recorded = ret
        if kind == "mmap" and ret > 0:
            addr, length, _prot, flags, _offset = action.mmap
            if not flags & MAP_FIXED and action.defines:
                run.addresses.learn(action.defines[0][1], length, ret)
            recorded = run.addresses.back(ret)
        reply = decode_record(msg.reply) if msg.reply is not None else None
        record = replace(reply, ret=recorded, err=err, flags=reply.flags | RecordFlag.REPLAY).encode() if reply else None
        return Outcome(ret=recorded, err=err, record=record)

    @staticmethod
    def _closed(run: _Run, real_fd: int) -> None:
        """The last close of an open file frees the RM clients allocated through it (as RM does)."""
        file = run.files.pop(real_fd, None)
        if file is None:
            return
        run.file_refs[file] -= 1
        if run.file_refs[file] <= 0:
            for handle in [h for h, f in run.roots.items() if f == file]:
                del run.roots[handle]

    def _ioctl_outcome(self, run: _Run, msg: Message, action: Action, ret: int, err: int, back: Any) -> Outcome:
        call = action.ioctl
        if not isinstance(back, list) or msg.reply is None:
            # the process could not issue it (a closed fd): say so, change nothing (an ioctl is compiled
            # only from a call the recording saw return, so a reply is always there)
            return Outcome(ret=ret, err=err)
        template = decode_record(msg.reply)
        data = {i: bytearray(b) for i, b in zip(call.after, back)}
        recorded = dict(zip(call.after, call.recorded_after))
        for s in call.sites:
            if s.buf in data:
                self._back(run, s, data[s.buf], recorded[s.buf])
        for buf, offset, raw in call.restore:
            if buf in data:
                data[buf][offset:offset + len(raw)] = raw
        by_key = {call.keys[i]: bytes(d) for i, d in data.items()}
        buffers = tuple(replace(b, data=by_key[(b.role, b.slot)]) if b.when == When.AFTER and (b.role, b.slot) in by_key
                        else b for b in template.buffers)
        answer = replace(template, ret=ret, err=err, flags=template.flags | RecordFlag.REPLAY, buffers=buffers).encode()
        status, ret_, err_, fields = self.semantics.reply_status(msg.request, answer)
        expect = msg.expect
        if (status, ret_, err_) != (expect.status, expect.ret, expect.err):
            for key in action.defines:
                run.failed[key] = (msg.index, msg.name)
        else:
            for key in action.defines:
                run.failed.pop(key, None)
            self._learn_lifetimes(run, msg, call, data)
        return Outcome(status, ret_, err_, fields, record=answer)

    def _learn_lifetimes(self, run: _Run, msg: Message, call: Ioctl, data: dict[int, bytearray]) -> None:
        """Track RM clients alive (allocated, freed) for the teardown."""
        record = decode_record(msg.request)
        if record.source != Source.RM:
            return
        real_fd = run.fds.forward(call.fd)
        for s in call.sites:
            if s.role == "handle-new" and call.root:
                handle = run.handles.forward(int.from_bytes(data[s.buf][s.offset:s.offset + s.size], "little"))
                if handle and real_fd in run.files:
                    run.roots[handle] = run.files[real_fd]
            elif s.role == "handle-free" and record.op == RM_FREE:
                handle = run.handles.forward(int.from_bytes(call.bufs[s.buf][s.offset:s.offset + s.size], "little"))
                run.roots.pop(handle, None)

    # ------------------------------------------------------------------ remapping one field

    @staticmethod
    def _maps(run: _Run, role: str) -> Remap[int] | AddressMap:
        """The map of a role whose fields are numbers (the UUID roles have the target's ``uuids``)."""
        maps: dict[str, Remap[int] | AddressMap] = {
            "handle": run.handles, "handle-new": run.handles, "handle-free": run.handles, "fd": run.fds,
            "va": run.addresses, "gva": run.addresses, "cookie": run.cookies, "cookie-out": run.cookies,
            "gpuid": run.gpuids, "gpuid-out": run.gpuids}
        return maps[role]

    @staticmethod
    def _handed_out(run: _Run, role: str) -> Remap[int] | None:
        """The map a value the driver hands out in ``role`` is learnt into (None: the role passes values in)."""
        return {"handle-new": run.handles, "cookie-out": run.cookies, "gpuid-out": run.gpuids}.get(role)

    def _forward(self, run: _Run, role: str, buf: bytearray, offset: int, size: int) -> None:
        raw = bytes(buf[offset:offset + size])
        if role in ("uuid", "uuid-out"):
            if role == "uuid":
                buf[offset:offset + size] = self.uuids.forward(raw)
            return
        value = int.from_bytes(raw, "little")
        new = self._maps(run, role).forward(value)
        if new != value:
            buf[offset:offset + size] = new.to_bytes(size, "little", signed=new < 0)

    def _back(self, run: _Run, site: Site, buf: bytearray, recorded: bytes) -> None:
        """One field of an answer in the recording's terms; what the driver handed out is learnt on the way."""
        o, n, role = site.offset, site.size, site.role
        got, then = bytes(buf[o:o + n]), bytes(recorded[o:o + n])
        if role == "uuid-out":  # a board's identity: learnt (the first 16 bytes), shown as the driver gave it
            if len(got) >= 16 and len(then) >= 16 and any(then[:16]) and any(got[:16]):
                self.uuids.learn(then[:16], got[:16])
            return
        if role == "uuid":
            buf[o:o + n] = self.uuids.back(got)
            return
        value, was = int.from_bytes(got, "little"), int.from_bytes(then, "little") if len(then) == n else 0
        handed_out = self._handed_out(run, role)
        if handed_out is not None and value and was:
            handed_out.learn(was, value)
        old = self._maps(run, role).back(value)
        if old != value:
            buf[o:o + n] = old.to_bytes(n, "little", signed=old < 0)

    def _record_maps(self, run: _Run) -> None:
        run.stats.maps = {
            "handles": {f"{k:#x}": f"{v:#x}" for k, v in run.handles.changed().items()},
            "fds": {str(k): v for k, v in run.fds.changed().items()},
            "cookies": {f"{k:#x}": f"{v:#x}" for k, v in run.cookies.changed().items()},
            "gpu_ids": {f"{k:#x}": f"{v:#x}" for k, v in run.gpuids.changed().items()},
            "gpu_uuids": {k.hex(): v.hex() for k, v in self.uuids.changed().items()},
            "addresses_moved": [{"recorded": f"{s:#x}", "length": f"{n:#x}", "real": f"{r:#x}"}
                                for s, n, r in run.addresses.moved()],
            "reserved_ranges": len(run.program.reservations),
        }

    @staticmethod
    def _table_record(run: _Run) -> bytes:
        body = json.dumps({"rmtrace_replay_nvidia": 1, "client_table": run.stats.to_json()}, sort_keys=True)
        return Record(Source.MARK, Phase.EVENT, op=MarkOp.NOTE, time_ns=time.monotonic_ns(), pid=run.client.pid,
                      tid=run.client.pid, flags=RecordFlag.REPLAY,
                      buffers=(Buffer(Role.TEXT, When.ONCE, body.encode()),)).encode()

    def _flush(self) -> list[Reply]:
        out, self._ready = self._ready, []
        return out

    # ------------------------------------------------------------------ results

    def client_tables(self) -> list[ClientStats]:
        return [r.stats for r in self.runs.values()]

    def report(self) -> list[str]:
        """Per client: the share replayed, the time inside the driver against the recorded, the skips, the end."""
        lines = []
        status = self.semantics.status_name
        for st in self.client_tables():
            ratio = f" ({st.driver_ns / st.recorded_ns:.2f}x)" if st.recorded_ns else ""
            lines.append(f"{self.name}: {st.label}: replayed {st.calls - sum(s[3] for s in st.skipped)} of {st.calls} "
                         f"RM/UVM calls ({st.share:.1f} %); time inside the driver {st.driver_ns / 1e6:.2f} ms, "
                         f"recorded {st.recorded_ns / 1e6:.2f} ms{ratio}; process {st.ended or 'not started'}")
            reasons: dict[str, int] = {}
            for _n, _name, why, _rm in st.skipped:
                reasons[why] = reasons.get(why, 0) + 1
            lines.extend(f"    skipped {n}x: {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
            lines.extend(f"    sent although unsafe: message {n} {name}: {why}" for n, name, why in st.unsafe_sent)
            lines.extend(f"    teardown freed RM client {h:#x}: {status(s) if r == 0 else f'ioctl {r}'}"
                         for h, r, s in st.freed)
        return lines


__all__ = ["NvidiaTarget", "ClientStats"]
