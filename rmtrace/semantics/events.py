"""The event vocabulary: what a call does, as small frozen values (docs/events.md).

One call (an ioctl's enter and exit, a GSP request and its response, a host message, a
process event) means a few of these.  Each says *when* it holds (``applies``): a lock is
taken as soon as the call starts, an object exists only once its allocation succeeded,
and a host message is a fact whatever its rc (the rc is in the event).  The interpreter
(``rmtrace.semantics.interpret``) yields the events of a call whatever its outcome, so a
replayer can send the call again; ``CallMeaning.effective()`` keeps those the recording
says took effect, which is what the session fold applies.

Alongside the events, a call's :class:`Ref`\\ s say which values it defines that later calls
reuse (an RM handle, an fd, a UVM VA space, a mapping, a GPU VA, a work-submit token) and
which it uses.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from rmtrace.decoders.roles import Category
from rmtrace.decoders.sema import DrainReason, ResetReason
from rmtrace.semantics.locks import LockKind as LockKind  # defined beside its rules: the call table needs it without the events


class Applies(enum.Enum):
    """When an event holds, given what the recording saw of its call."""

    ALWAYS = "always"
    """From the call's first record on: a lock taken on entry, a host report, a process event."""
    ON_RETURN = "on return"
    """Once the call returned, whatever it returned (a lock released)."""
    ON_SUCCESS = "on success"
    """Only when the call returned success (an object allocated)."""


class Device(enum.Enum):
    """Which device node an open names."""

    NONE = "none"            # not an NVIDIA node
    CONTROL = "control"      # /dev/nvidiactl
    GPU = "gpu"              # /dev/nvidia<N>
    UVM = "uvm"              # /dev/nvidia-uvm
    UVM_TOOLS = "uvm_tools"  # /dev/nvidia-uvm-tools
    OTHER = "other"          # another /dev/nvidia* node (modeset, caps, ...)

    @property
    def nvidia(self) -> bool:
        """An NVIDIA node: opening one makes a process a GPU client."""
        return self is not Device.NONE


class Publication(enum.Enum):
    RING = "ring"
    USERD = "userd"


class Completion(enum.Enum):
    """How the host completed a channel's work."""

    RELEASE = "release"  # a GR semaphore release (the gr_rel counter)
    FAKED = "faked"      # faked after a drain bound expired (the faked counter)


class RefKind(enum.Enum):
    """What kind of value a :class:`Ref` is."""

    HANDLE = "handle"            # an RM object handle; scope: its RM client
    FD = "fd"                    # a file descriptor of the process
    VA_SPACE = "va_space"        # the UVM VA space of a UVM fd (value: the fd)
    CPU_MAPPING = "cpu_mapping"  # a CPU address RM_MAP_MEMORY or mmap handed out
    GPU_VA = "gpu_va"            # a GPU virtual address RM_MAP_MEMORY_DMA handed out
    TOKEN = "token"              # a channel's work-submit token (scope: its RM client)
    UVM_CHANNEL = "uvm_channel"  # a channel registered with UVM (value: its handle; scope: its RM client)


class Ref(NamedTuple):
    """A value one call defines and later calls of the same process use."""

    kind: RefKind
    value: int
    scope: int = 0


# Every event is ``@dataclass(frozen=True, slots=True, repr=False, eq=False)`` and shares the one
# __repr__/__eq__/__hash__ of Event below, which behave as dataclass's generated ones do.  On
# CPython 3.11 dataclass compiles each generated method apart (six per frozen class), which made
# this module's 47 classes cost ~50 ms of every command's start; sharing three of them halves it.


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Event:
    """Base of every event; ``applies`` says when it holds (see :class:`Applies`)."""

    applies: ClassVar[Applies] = Applies.ON_SUCCESS

    def _values(self, names: tuple[str, ...]) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in names)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shown(type(self)).repr)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event) or other.__class__ is not self.__class__:
            return NotImplemented
        names = _shown(type(self)).compare
        return self._values(names) == other._values(names)

    def __hash__(self) -> int:
        return hash(self._values(_shown(type(self)).hash))


class _Shown(NamedTuple):
    """The fields of an event class that dataclass's generated methods would read, each in field order."""

    repr: tuple[str, ...]
    compare: tuple[str, ...]
    hash: tuple[str, ...]


_SHOWN: dict[type, _Shown] = {}


def _shown(cls: type) -> _Shown:
    """``_Shown`` of ``cls``, from its dataclass fields (``repr``, ``compare``, ``hash``: a field's own
    choices, as dataclass makes them), found once per class."""
    found = _SHOWN.get(cls)
    if found is None:
        fields = dataclasses.fields(cls)
        found = _SHOWN[cls] = _Shown(tuple(f.name for f in fields if f.repr), tuple(f.name for f in fields if f.compare),
                                     tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    return found


# --------------------------------------------------------------------------- processes and files (SYS)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class FdOpened(Event):
    fd: int
    path: str
    device: Device


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class FdClosed(Event):
    fd: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class FdDuplicated(Event):
    fd: int
    old: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class MemoryMapped(Event):
    """mmap of a device fd: ``addr`` is where the mapping landed."""

    fd: int
    addr: int
    length: int
    offset: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class MemoryUnmapped(Event):
    addr: int
    length: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ProcessForked(Event):
    child: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ProcessExecuted(Event):
    applies: ClassVar[Applies] = Applies.ALWAYS
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ProcessExited(Event):
    """The process ended; the kernel frees what it left behind (its RM clients, its VA spaces)."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    status: int


# --------------------------------------------------------------------------- RM objects and channels


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ObjectAllocated(Event):
    """An RM object exists: RM_ALLOC, RM_ALLOC_MEMORY, GSP_RM_ALLOC.  A root client (category
    ROOT) is its own client: ``h_client == handle`` and ``parent`` is None."""

    category: Category
    h_client: int
    handle: int
    parent: int | None
    class_id: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ChannelAllocated(Event):
    """The object just allocated is a GPFIFO channel; its alloc params as recorded (None: absent)."""

    h_client: int
    handle: int
    parent: int | None
    engine_type: int | None
    ring_va: int | None
    ring_entries: int | None
    userd_va: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ChannelGroupAllocated(Event):
    """The object just allocated is a channel group (TSG); its channels run on its engine."""

    h_client: int
    handle: int
    engine_type: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ObjectDuplicated(Event):
    """RM_DUP_OBJECT: ``handle`` under ``parent`` now names ``src_client``'s ``src_handle``."""

    h_client: int
    handle: int
    parent: int | None
    src_client: int
    src_handle: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ObjectFreed(Event):
    """RM_FREE (GSP FREE): the object and everything under it are gone."""

    h_client: int
    handle: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ControlIssued(Event):
    """An RM control on an object (which must exist); what it does, if anything, follows."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    h_client: int
    handle: int
    cmd: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class WorkTokenIssued(Event):
    """The channel's work-submit token: from here on the host sees its work."""

    h_client: int
    channel: int
    token: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ChannelBound(Event):
    """A channel (or every channel of a TSG) bound to an engine."""

    h_client: int
    handle: int
    engine_type: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ChannelScheduled(Event):
    """A channel (or a TSG's channels) enabled or disabled for scheduling."""

    h_client: int
    handle: int
    enabled: bool


# --------------------------------------------------------------------------- UVM


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class UvmInitialized(Event):
    """A UVM VA space for the fd."""

    fd: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class VaSpaceUsed(Event):
    """A UVM call that needs its fd's VA space (UVM refuses it on an uninitialized fd)."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    fd: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class UvmRegistered(Event):
    """A GPU registered in the fd's VA space (UVM retains it: the first retain runs the
    registration exchange with the host)."""

    fd: int
    gpu: bytes
    h_client: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class UvmUnregistered(Event):
    fd: int
    gpu: bytes


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class UvmChannelRegistered(Event):
    h_client: int
    channel: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class UvmChannelUnregistered(Event):
    h_client: int
    channel: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class LockTaken(Event):
    """The call holds ``lock`` from its start; a later taker waits until it returns."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    lock: LockKind


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class LockReleased(Event):
    applies: ClassVar[Applies] = Applies.ON_RETURN
    lock: LockKind


# --------------------------------------------------------------------------- GSP


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class GspRequest(Event):
    """An RPC sent to GSP (its RM call, if it carries one, comes as the RM events)."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    function: int
    sequence: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class GspReply(Event):
    """GSP answered the RPC ``function`` with ``result`` (an NV_STATUS)."""

    applies: ClassVar[Applies] = Applies.ON_RETURN
    function: int
    sequence: int | None
    result: int | None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class GspEvent(Event):
    """A message GSP sent on its own (an event on the status queue)."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    function: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class GspSessionStarted(Event):
    """The boot handshake finished (GSP_INIT_DONE): a new GSP client session begins with it."""

    applies: ClassVar[Applies] = Applies.ALWAYS


# --------------------------------------------------------------------------- the host service (SEMA)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class HostEvent(Event):
    """A host semaphore-service message: a fact whatever its rc."""

    applies: ClassVar[Applies] = Applies.ALWAYS


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class HostChannelRegistered(HostEvent):
    h_client: int
    channel: int
    ring_va: int
    userd_va: int
    rank: int | None
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class HostChannelUnregistered(HostEvent):
    h_client: int
    channel: int
    rank: int | None
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Published(HostEvent):
    """The guest published a ring or USERD address (rc 0: accepted; pub_calls counts them)."""

    channel: int
    rank: int | None
    what: Publication
    va: int
    size: int
    pub_calls: int
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class SemaHint(HostEvent):
    """The guest hinted new work on a channel; rc -22: the host refused it (a stale channel)."""

    channel: int
    rank: int | None
    value: int
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class WorkCompleted(HostEvent):
    """The host completed the channel's work (released its semaphore, or faked it)."""

    channel: int
    rank: int | None
    value: int
    counter: int
    how: Completion
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class SemaAcquire(HostEvent):
    """The guest waits for a semaphore value."""

    channel: int
    rank: int | None
    value: int
    rc: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class LatchArmed(HostEvent):
    """A rank's one-shot latch armed: its next completion can fire."""

    rank: int | None
    channel: int
    generation: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class LatchFired(HostEvent):
    """A rank's one-shot latch fired: it completes nothing more until re-armed."""

    rank: int | None
    channel: int
    generation: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class DrainHeld(HostEvent):
    """The host holds the rank's completions while a torn-down channel drains."""

    rank: int | None
    channel: int
    held: int
    reason: DrainReason | int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class DrainReleased(HostEvent):
    rank: int | None
    channel: int
    held: int
    reason: DrainReason | int
    held_ns: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class HostSessionReset(HostEvent):
    old_session: int
    new_session: int
    h_client: int
    reason: ResetReason | int
    channels_dropped: int
    latches_rearmed: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class HostCounters(HostEvent):
    """A snapshot of the host's counters, by name (pub_calls, gr_rel, faked, drain_held, ...)."""

    values: tuple[tuple[str, int], ...]


# --------------------------------------------------------------------------- the recorder and replays (MARK)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class RecordingStopped(Event):
    """Why the recording (or a replay) ended: MARK_STOP's JSON."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    info: Mapping[str, Any]


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class RecordsLost(Event):
    """The recorder lost records (a full ring in lossy mode): MARK_LOST's JSON."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    info: Mapping[str, Any]


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class CallInFlightAtStop(Event):
    """The recorder says this call was still in flight when the recording stopped."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    pid: int
    tid: int
    call_id: int


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class ReplayVerdict(Event):
    """A replay's verdict on one client (MARK_VERDICT's JSON)."""

    applies: ClassVar[Applies] = Applies.ALWAYS
    info: Mapping[str, Any]
