"""The reference host-service model: guest UVM and RM on one side, the host sema service on the other.

``HostModel.submit`` takes one message of one guest client and either
answers at once or parks the client's call until something it waits for
happens (a lock is released, the host completes work, a timer fires).  A
message the model has no business with is answered as bare metal answered
it (the recording is the oracle); the model decides what it models:

* RM object lifecycle (objects.py), with RM's own error codes;
* the guest UVM global lock, taken by UVM_REGISTER_GPU while it retains the
  GPU (the first retain runs the *registration exchange* with the host:
  UVM's internal channel is registered, published and its first work must
  complete) and by the release of the last GPU user (the *unregister
  exchange*: the channel's final work, then its unregistration);
* a client channel going live at the host when the guest asks for its work
  submit token (registration, publications, first work awaited);
* channel teardown on RM_FREE or when an fd closes: unregister, drain hold,
  and the guest's trailing hint that the host refuses (rc -22);
* a new client session (the first RM client while none is alive, or a GSP
  boot handshake), handed to the host, whose policy decides what it resets.

Time is a clock the caller owns (virtual in tests and in-process replays:
waits cost nothing and timers fire exactly), so a wedge is found instantly.
docs/host-service-model.md describes the model in full.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterator
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any

from rmtrace.decoders.sema import ResetReason
from rmtrace.replayer.messages import Kind, Message
from rmtrace.replayer.model.host import Completion, Emit, HostChannel, SemaHost
from rmtrace.replayer.model.objects import NV_OK, Category, RmObject, RmObjects
from rmtrace.replayer.model.policy import Policy

from rmtrace.semantics import LOCKS, UvmRole
from rmtrace.semantics.locks import UVM_LOCKS

ILLEGAL_ACTION = "NV_ERR_ILLEGAL_ACTION"

UVM_CLIENT = 0xC1E00000
"""UVM's own RM client in the guest kernel (it allocates UVM's internal channels)."""
UVM_CHANNEL = 0xCAF000D4
"""Handle of UVM's internal CE channel; every retain of the GPU gets the same one."""
UVM_RING_VA = 0xFFF0020000
UVM_USERD_VA = 0xFFF0030000
UVM_RING_SIZE = 0x8000
USERD_SIZE = 0x200
"""UVM's internal channel is placed at the same addresses on every retain (a fresh VA space)."""

UVM_OBJECTS: tuple[tuple[int, int, int, dict], ...] = (
    (0, UVM_CLIENT, 0x0041, {}),                     # NV01_ROOT_CLIENT
    (UVM_CLIENT, UVM_CLIENT + 1, 0x0080, {}),        # NV01_DEVICE_0
    (UVM_CLIENT + 1, UVM_CLIENT + 2, 0x2080, {}),    # NV20_SUBDEVICE_0
    (UVM_CLIENT + 1, UVM_CLIENT + 3, 0xA06C, {}),    # KEPLER_CHANNEL_GROUP_A
    (UVM_CLIENT + 3, UVM_CHANNEL, 0xC86F,            # HOPPER_CHANNEL_GPFIFO_A
     {"gpFifoOffset": UVM_RING_VA, "gpFifoEntries": UVM_RING_SIZE // 8}),
    (UVM_CHANNEL, UVM_CLIENT + 5, 0xC8B5, {}),       # HOPPER_DMA_COPY_A
)
"""What the registration exchange allocates through RPCs to the host: UVM's RM session, device, channel
group, its CE channel and copy object (classes of the H200 the captures come from); the unregister
exchange frees them with the session."""

RELEASE_LOCKS = UVM_LOCKS[UvmRole.UNREGISTER_GPU]
"""What releasing a GPU takes, however the release comes."""

STAGES = {
    "registration exchange": "uvm_gpu_retain_by_uuid -> add_gpu",
    "unregister exchange": "uvm_gpu_release_locked -> nvUvmInterfaceUnregisterGpu",
    "channel bring-up": "first work on a new channel",
}
"""The stages of a call that wait on the host, and what runs in each (a chain names the stage)."""
REGISTRATION, UNREGISTRATION, BRING_UP = (f"{stage} ({what})" for stage, what in STAGES.items())


class VirtualClock:
    """Time that moves only when told to: waits are free and deterministic."""

    __slots__ = ("now",)

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def advance(self, t: int) -> None:
        if t > self.now:
            self.now = t


class WallClock:
    """CLOCK_MONOTONIC, for a model serving real clients (rmtrace model serve)."""

    @property
    def now(self) -> int:
        return time.monotonic_ns()

    def advance(self, t: int) -> None:
        """Real time advances by itself."""


@dataclass(eq=False)
class Lock:
    name: str
    holder: Task | None = None
    waiters: deque = field(default_factory=deque)


@dataclass(eq=False)
class Task:
    """One guest call in progress inside the model."""

    ticket: Hashable
    owner: str
    pid: int
    tid: int
    msg: Message
    gen: Generator | None = None
    wait: Any = None
    stage: str = ""
    status: str | None = None


@dataclass(eq=False)
class VaSpace:
    gpus: set = field(default_factory=set)


@dataclass(eq=False)
class Gpu:
    uuid: bytes
    refs: int = 0
    channel: HostChannel | None = None
    state: ChannelState | None = None


@dataclass(eq=False)
class ChannelState:
    """What the model keeps on an RM channel object."""

    ring_va: int
    userd_va: int
    ring_size: int
    host: HostChannel | None = None
    work: int = 0


class HostModel:
    """One vGPU: its guest UVM/RM state and its host semaphore service."""

    def __init__(self, policy: Policy, clock: Any | None = None, emit: Emit | None = None, rpc: Any = None) -> None:
        """``emit(op, body, pid, tid)`` reports the host's sema traffic; ``rpc`` (with ``alloc`` and
        ``free``) reports the RPCs of the exchanges; either may be None (nothing reported)."""
        self.policy = policy
        self.rpc = rpc
        self.clock = clock if clock is not None else VirtualClock()
        self.host = SemaHost(policy, self.clock, emit, self._add_timer)
        self.objects = RmObjects()
        self.locks = {kind: Lock(rule.name) for kind, rule in LOCKS.items()}
        """The guest's locks, by the semantic layer's rules: a message takes those its call holds."""
        self.va_spaces: dict[tuple[int, int], VaSpace] = {}
        self.gpus: dict[bytes, Gpu] = {}
        self.files: set[tuple[int, int]] = set()
        self.parked: dict[Hashable, Task] = {}
        self._handshake_session = False
        """A GSP boot handshake opened a session no RM client has joined yet."""
        self.finished: list[tuple[Hashable, str | None]] = []
        self._ready: deque[Task] = deque()
        self._timers: list = []
        self._timer_seq = itertools.count()
        self._handlers: list[Callable[[Task], Any]] = [self._pass] * (max(Kind) + 1)
        for kind, handler in {
            Kind.RM_CLIENT: self._rm_client, Kind.RM_ALLOC: self._rm_alloc, Kind.RM_FREE: self._rm_free,
            Kind.RM_CONTROL: self._rm_control, Kind.WORK_TOKEN: self._work_token,
            Kind.UVM_INITIALIZE: self._uvm_initialize, Kind.UVM_CALL: self._uvm_call,
            Kind.UVM_REGISTER_GPU: self._uvm_register_gpu, Kind.UVM_UNREGISTER_GPU: self._uvm_unregister_gpu,
            Kind.SYS_OPEN: self._sys_open, Kind.SYS_CLOSE: self._sys_close, Kind.SYS_EXIT: self._sys_exit,
            Kind.GSP_INIT: self._gsp_init,
        }.items():
            self._handlers[kind] = handler

    # ------------------------------------------------------------------ the interface targets use

    def submit(self, ticket: Hashable, owner: str, pid: int, tid: int, msg: Message) -> tuple[bool, str | None]:
        """Handle one message.  (True, status) when answered now -- status None means "as bare
        metal answered" -- or (False, None) when the call is parked; it shows up in
        ``finished`` once it completes."""
        task = Task(ticket, owner, pid, tid, msg)
        result = self._handlers[msg.kind](task)
        if type(result) is not GeneratorType:
            return True, result
        task.gen = result
        done = self._step(task, None)
        self._drain_ready()
        if done:
            return True, task.status
        self.parked[ticket] = task
        return False, None

    def next_timer(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def run_until(self, t: int) -> None:
        """Fire every timer due by ``t`` (the clock moves to each), then move the clock to ``t``."""
        while self._timers and self._timers[0][0] <= t:
            due, _n, fn = heapq.heappop(self._timers)
            self.clock.advance(due)
            fn()
            self._drain_ready()
        self.clock.advance(t)

    def take_finished(self) -> list[tuple[Hashable, str | None]]:
        done, self.finished = self.finished, []
        return done

    def explain(self, ticket: Hashable) -> list[str]:
        """Why a parked call waits, as a chain of plain sentences (empty when it is not parked)."""
        task = self.parked.get(ticket)
        return self._why(task, set()) if task is not None else []

    def counters(self) -> dict[str, int]:
        return dict(self.host.counters)

    def close(self) -> None:
        """The replay ended: report the host's final counters."""
        self.host.emit_counters()

    # ------------------------------------------------------------------ driving parked calls

    def _add_timer(self, t: int, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (t, next(self._timer_seq), fn))

    def _step(self, task: Task, value: Any) -> bool:
        """Run ``task`` until it waits or ends; True when it ended."""
        gen = task.gen
        assert gen is not None, "only a task that parks has a generator to step"
        while True:
            try:
                wait = gen.send(value)
            except StopIteration as stop:
                task.status = stop.value
                task.wait = None
                return True
            value = None
            if isinstance(wait, Lock):
                if wait.holder is None:
                    wait.holder = task
                    continue
                wait.waiters.append(task)
            elif wait.done:
                continue
            else:
                wait.on_done = lambda _c, t=task: self._ready.append(t)
            task.wait = wait
            return False

    def _drain_ready(self) -> None:
        while self._ready:
            task = self._ready.popleft()
            task.wait = None
            if self._step(task, None):
                self.parked.pop(task.ticket, None)
                self.finished.append((task.ticket, task.status))

    def _unlock(self, lock: Lock) -> None:
        if lock.waiters:
            lock.holder = lock.waiters.popleft()
            self._ready.append(lock.holder)
        else:
            lock.holder = None

    def _why(self, task: Task, seen: set) -> list[str]:
        seen.add(task.ticket)
        where = f"{task.owner} is blocked in {task.msg.name} (message {task.msg.index + 1})"
        wait = task.wait
        if isinstance(wait, Lock):
            holder = wait.holder
            assert holder is not None, "a task waits on a lock only while someone holds it"
            held = (f"{where} waiting for the {wait.name}, held by {holder.owner} in {holder.msg.name} "
                    f"(message {holder.msg.index + 1})")
            if holder.wait is None or holder.ticket in seen:
                return [held]
            if holder.owner != task.owner:
                # another client's wedge has an entry of its own: name it, never repeat its chain per waiter
                return [f"{held}, which is blocked itself: see its own chain"]
            return [held] + self._why(holder, seen)
        if isinstance(wait, Completion):
            ch = wait.channel
            lock = "".join(f" holding the {held.name}" for held in self.locks.values() if held.holder is task)
            lines = [f"{where}{lock}, in its {task.stage}: waiting for the host to complete work on "
                     f"channel {ch.handle:#x} (rank {ch.rank})"]
            return lines + [f"  - {reason}" for reason in self.host.blockers(wait)]
        return [f"{where}"]

    # ------------------------------------------------------------------ handlers: RM

    @staticmethod
    def _pass(task: Task) -> None:
        return None

    @staticmethod
    def _recorded_ok(msg: Message) -> bool:
        """Bare metal succeeded (or the recording stopped before it answered)."""
        return msg.expect.status in (0, None)

    def _rm_client(self, task: Task) -> str | None:
        msg = task.msg
        if not self._recorded_ok(msg):
            return None
        first = not self.objects.clients
        status, _client = self.objects.alloc_client(task.pid, msg.h_client, msg.fd)
        if status != NV_OK:
            return status
        if first and not self._handshake_session:
            self.host.new_session(ResetReason.NEW_CLIENT, msg.h_client, task.pid)
        self._handshake_session = False
        return None

    def _rm_alloc(self, task: Task) -> str | None:
        msg = task.msg
        if not self._recorded_ok(msg):
            return None
        extra = ChannelState(msg.ring_va, msg.userd_va, msg.ring_size) if msg.category == Category.CHANNEL else None
        status, _obj = self.objects.alloc(task.pid, msg.h_client, msg.h_parent, msg.h_object, msg.category, extra)
        return None if status == NV_OK else status

    def _rm_free(self, task: Task) -> str | None:
        msg = task.msg
        if not self._recorded_ok(msg):
            return None
        status, freed = self.objects.free(task.pid, msg.h_client, msg.h_object)
        self._teardown(task, freed)
        return None if status == NV_OK else status

    def _rm_control(self, task: Task) -> str | None:
        msg = task.msg
        status, _obj = self.objects.control(task.pid, msg.h_client, msg.h_object)
        return None if status == NV_OK else status

    def _work_token(self, task: Task) -> Any:
        msg = task.msg
        status, obj = self.objects.control(task.pid, msg.h_client, msg.h_object)
        if status != NV_OK or obj is None:
            return status
        if obj.category != Category.CHANNEL or obj.extra.host is not None or not self._recorded_ok(msg):
            return None
        return self._bring_up(task, obj)

    def _bring_up(self, task: Task, obj: RmObject) -> Iterator:
        """The channel goes live at the host and its first work must complete."""
        task.stage = BRING_UP
        state: ChannelState = obj.extra
        msg = task.msg
        ch = self.host.register((task.pid, msg.h_client, obj.handle), msg.h_client, obj.handle, state.ring_va,
                                state.userd_va, task.owner, task.pid)
        state.host = ch
        yield from self._work(ch, state)
        return None

    def _work(self, ch: HostChannel, state: Any) -> Iterator:
        """Publish the ring and USERD, hint the work, wait for its completion."""
        self.host.publish(ch, "RING", ch.ring_va, state.ring_size)
        self.host.publish(ch, "USERD", ch.userd_va, USERD_SIZE)
        state.work += 1
        completion = self.host.hint(ch, state.work)
        self.host.emit_counters()
        if completion is not None and not completion.done:
            yield completion
            self.host.emit_counters()

    def _teardown(self, task: Task, freed: list[RmObject]) -> None:
        """Channels among ``freed`` leave the host: unregister, then the guest's trailing hint."""
        for obj in freed:
            if obj.category == Category.CHANNEL and obj.extra.host is not None:
                self._drop_channel(obj.extra)
        if freed:
            self.host.emit_counters()

    def _drop_channel(self, state: Any) -> None:
        ch = state.host
        self.host.unregister(ch)
        state.work += 1
        self.host.hint(ch, state.work)  # arrives after the unregister: refused with rc -22

    # ------------------------------------------------------------------ handlers: UVM

    def _uvm_initialize(self, task: Task) -> None:
        self.va_spaces.setdefault((task.pid, task.msg.fd), VaSpace())
        return None

    def _uvm_call(self, task: Task) -> str | None:
        return None if (task.pid, task.msg.fd) in self.va_spaces else ILLEGAL_ACTION

    def _uvm_register_gpu(self, task: Task) -> Any:
        va = self.va_spaces.get((task.pid, task.msg.fd))
        if va is None:
            return ILLEGAL_ACTION
        if not self._recorded_ok(task.msg):
            return None
        return self._retain(task, va, task.msg.gpu)

    def _retain(self, task: Task, va: VaSpace, uuid: bytes) -> Iterator:
        locks = [self.locks[kind] for kind in task.msg.locks]
        for lock in locks:
            yield lock
        gpu = self.gpus.get(uuid)
        if gpu is None:
            gpu = self.gpus[uuid] = Gpu(uuid)
        if gpu.refs == 0:
            yield from self._add_gpu(task, gpu)
        gpu.refs += 1
        va.gpus.add(uuid)
        for lock in reversed(locks):
            self._unlock(lock)
        return None

    def _add_gpu(self, task: Task, gpu: Gpu) -> Iterator:
        task.stage = REGISTRATION
        if self.rpc is not None:
            for h_parent, h_object, cls, params in UVM_OBJECTS:
                self.rpc.alloc(task.pid, UVM_CLIENT, h_parent, h_object, cls, **params)
        ch = self.host.register(("uvm", gpu.uuid), UVM_CLIENT, UVM_CHANNEL, UVM_RING_VA, UVM_USERD_VA,
                                f"UVM (retained for {task.owner})", task.pid)
        gpu.channel = ch
        gpu.state = ChannelState(UVM_RING_VA, UVM_USERD_VA, UVM_RING_SIZE, ch)
        yield from self._work(ch, gpu.state)

    def _uvm_unregister_gpu(self, task: Task) -> Any:
        va = self.va_spaces.get((task.pid, task.msg.fd))
        if va is None:
            return ILLEGAL_ACTION
        if task.msg.gpu not in va.gpus or not self._recorded_ok(task.msg):
            return None
        va.gpus.discard(task.msg.gpu)
        return self._release(task, task.msg.gpu)

    def _release(self, task: Task, uuid: bytes) -> Iterator:
        """uvm_gpu_release: the global lock is held across the last user's unregister exchange (the
        locks UVM_UNREGISTER_GPU takes, whether the release comes from it or from closing the fd)."""
        locks = [self.locks[kind] for kind in RELEASE_LOCKS]
        for lock in locks:
            yield lock
        gpu = self.gpus[uuid]
        gpu.refs -= 1
        if gpu.refs == 0 and gpu.channel is not None:  # the first retain registered UVM's channel
            task.stage = UNREGISTRATION
            yield from self._work(gpu.channel, gpu.state)
            self._drop_channel(gpu.state)
            if self.rpc is not None:
                self.rpc.free(task.pid, UVM_CLIENT, UVM_CLIENT, UVM_CLIENT)
            gpu.channel = gpu.state = None
            self.host.emit_counters()
        for lock in reversed(locks):
            self._unlock(lock)
        return None

    # ------------------------------------------------------------------ handlers: files, processes, GSP

    def _sys_open(self, task: Task) -> None:
        self.files.add((task.pid, task.msg.fd))
        return None

    def _sys_close(self, task: Task) -> Any:
        return self._close(task, task.msg.fd)

    def _close(self, task: Task, fd: int) -> Any:
        """Closing a UVM fd destroys its VA space (releasing its GPUs); closing an RM fd frees its clients."""
        self.files.discard((task.pid, fd))
        va = self.va_spaces.pop((task.pid, fd), None)
        for client in self.objects.clients_on_fd(task.pid, fd):
            self._teardown(task, self.objects.free_client(task.pid, client))
        if va is None or not va.gpus:
            return None
        return self._destroy_va_space(task, va)

    def _destroy_va_space(self, task: Task, va: VaSpace) -> Iterator:
        for uuid in sorted(va.gpus):
            yield from self._release(task, uuid)
        va.gpus.clear()
        return None

    def _sys_exit(self, task: Task) -> Any:
        fds = sorted({fd for (pid, fd) in self.files if pid == task.pid}
                     | {fd for (pid, fd) in self.va_spaces if pid == task.pid}
                     | {c.fd for (pid, _h), c in self.objects.clients.items() if pid == task.pid})
        return self._exit(task, fds)

    def _exit(self, task: Task, fds: list[int]) -> Iterator:
        for fd in fds:
            step = self._close(task, fd)
            if type(step) is GeneratorType:
                yield from step
        return None

    def _gsp_init(self, task: Task) -> None:
        self.host.new_session(ResetReason.GSP_INIT, 0, task.pid)
        self._handshake_session = True  # the RM client that follows belongs to this session
        return None

