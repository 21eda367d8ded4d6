"""What the session model knows about: processes, clients, RM objects, channels, ranks, calls.

Plain value classes; the fold (``rmtrace.session.fold``) creates and updates
them, and everything downstream (wedges, diff, stats, TUI, replayer) reads them.
Entities that change over time also have an *entity id* (``chan/c1/ch0``,
``rank/2``, ``client/c2``, ``host``) under which the timeline keeps their
transitions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rmtrace.semantics import Category, LockKind


class Named(str, enum.Enum):
    """An enum whose members are their (string) values wherever text is wanted: in JSON, in an
    f-string, as a key of a table that says how a state looks."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class LaneState(Named):
    """The state vocabulary of lanes (timeline segments)."""

    ALLOCATED = "allocated"
    BOUND = "bound"
    SCHEDULED = "scheduled"
    REGISTERED = "registered"
    PUBLISHED = "published"
    WAITING = "waiting"
    COMPLETED = "completed"
    LATCH_ARMED = "latch_armed"
    LATCH_FIRED = "latch_fired"
    STALE = "stale"
    DRAIN_HELD = "drain_held"
    WEDGED = "wedged"
    IN_FLIGHT = "in_flight"
    FREED = "freed"
    RUNNING = "running"
    EXITED = "exited"
    QUIET = "quiet"
    IDLE = "idle"
    """A rank with neither latch nor drain state (drawn without a symbol)."""


class FreedBy(Named):
    """How an RM object went."""

    RM_FREE = "RM_FREE"  # its own RM_FREE or an ancestor's
    EXIT = "exit"        # the kernel freed it when its process exited


STATES = tuple(s for s in LaneState if s is not LaneState.IDLE)
"""The states lanes are drawn with a symbol for."""

STATE_SYMBOLS: dict[str, str] = {
    LaneState.ALLOCATED: "a", LaneState.BOUND: "b", LaneState.SCHEDULED: "s", LaneState.REGISTERED: "r",
    LaneState.PUBLISHED: "p", LaneState.WAITING: "w", LaneState.COMPLETED: "c", LaneState.LATCH_ARMED: "^",
    LaneState.LATCH_FIRED: "!", LaneState.STALE: "x", LaneState.DRAIN_HELD: "d", LaneState.WEDGED: "#",
    LaneState.IN_FLIGHT: ">", LaneState.FREED: ".", LaneState.RUNNING: "=", LaneState.EXITED: "_",
    LaneState.QUIET: "-",
}
"""One character per state, so a lane reads without colour."""


@dataclass(slots=True)
class Process:
    pid: int
    ppid: int | None = None
    argv: tuple[str, ...] = ()
    first_ns: int = 0
    last_ns: int = 0
    exit_status: int | None = None
    threads: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Client:
    """A guest process using the GPU: its RM clients, UVM VA space and channels."""

    id: str
    pid: int
    h_client: int | None = None
    first_ns: int = 0
    last_ns: int = 0
    first_seq: int = 0
    last_seq: int = 0
    gsp_session: int | None = None
    label: str = ""
    rm_clients: list[int] = field(default_factory=list)
    uvm_gpus: set[bytes] = field(default_factory=set)

    @property
    def entity(self) -> str:
        return f"client/{self.id}"


def stable_name(base: str, class_name: str, order: int) -> str:
    """An RM object's stable name: its parent's (``base``, "" for none), its class and its place among
    its client's objects of that base and class (``NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0``).  Handles
    change from run to run; this names the same object in two traces of the same program."""
    return f"{base}/{class_name}#{order}" if base else f"{class_name}#{order}"


@dataclass(slots=True)
class RmObject:
    client_id: str
    handle: int
    parent: int | None
    cls: int
    class_name: str
    stable_name: str
    alloc_seq: int
    alloc_ns: int
    free_seq: int | None = None
    free_ns: int | None = None
    status: str = "NV_OK"
    h_client: int = 0
    freed_by: FreedBy | None = None
    category: Category = Category.OTHER
    """What its class makes (from the class number: rmtrace.decoders.roles)."""


@dataclass(slots=True)
class Channel:
    id: str
    client_id: str
    handle: int
    h_client: int
    class_name: str
    stable_name: str
    engine: str | None = None
    engine_type: int | None = None
    rank: int | None = None
    token: int | None = None
    tsg: int | None = None
    ring_va: int | None = None
    uvm_registered: bool = False

    @property
    def entity(self) -> str:
        return f"chan/{self.id}"


@dataclass(slots=True)
class Rank:
    """A copy-engine instance the host service tracks: its one-shot latch and drain hold."""

    id: str
    index: int
    latch_armed: bool | None = None
    latch_generation: int = 0
    drain_held: bool = False
    last_channel: int | None = None
    last_channel_id: str | None = None
    fired_ns: int | None = None
    """When its latch last fired."""
    held_ns: int | None = None
    """When its current drain hold began (None: not held)."""

    @property
    def entity(self) -> str:
        return f"rank/{self.index}"


@dataclass(slots=True)
class CallInfo:
    """One call (enter+exit), request/response exchange or single message, as the model saw it."""

    pid: int
    tid: int
    call_id: int
    client_id: str | None
    source: int
    op: int
    name: str
    detail: str | None
    status: int | None
    status_name: str | None
    ok: bool | None
    enter_seq: int
    exit_seq: int | None
    t_enter: int
    t_exit: int | None
    in_flight: bool
    handles: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    locks: tuple[LockKind, ...] = ()
    """Locks the call holds while it is in flight (rmtrace.semantics.locks)."""

    @property
    def full_name(self) -> str:
        return f"{self.name}({self.detail})" if self.detail else self.name

    @property
    def latency_ns(self) -> int | None:
        return None if self.t_exit is None else self.t_exit - self.t_enter


@dataclass(slots=True)
class GspExchange:
    function: str
    sequence: int | None
    request_seq: int
    response_seq: int | None
    t_request: int
    t_response: int | None
    result: int | None
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Transition:
    t_ns: int
    seq: int
    entity: str
    attr: str
    value: Any


@dataclass(frozen=True, slots=True)
class Segment:
    t0: int
    t1: int
    state: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Lane:
    entity: str
    kind: str
    group: str
    label: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class State:
    """Every entity's attributes and the host counters at one moment."""

    t_ns: int
    entities: dict[str, dict[str, Any]]
    counters: dict[str, int]

    def of(self, entity: str) -> dict[str, Any]:
        return self.entities.get(entity, {})
