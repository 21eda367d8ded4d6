"""What a replay sends and gets back: messages, expectations, outcomes.

A :class:`Message` is one call (or event) of one client, cut from a trace by
the plan: the request record's bytes as recorded, what the recording says
came back (the oracle: bare metal's answer), and the few facts the host
model needs, precomputed once at plan time so that submitting a message is
a table lookup and a handful of dict operations (bench/replay.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rmtrace.semantics import Category, LockKind, Ref


class Kind(enum.IntEnum):
    """What a message means to the host model; everything else it answers as bare metal did."""

    PASS = 0
    RM_CLIENT = 1          # RM_ALLOC of a root client (NV01_ROOT*)
    RM_ALLOC = 2
    RM_FREE = 3
    RM_CONTROL = 4
    WORK_TOKEN = 5         # RM_CONTROL *_GPFIFO_GET_WORK_SUBMIT_TOKEN: the channel goes live at the host
    UVM_INITIALIZE = 6
    UVM_CALL = 7           # any other UVM ioctl: needs an initialized fd
    UVM_REGISTER_GPU = 8
    UVM_UNREGISTER_GPU = 9
    SYS_OPEN = 10
    SYS_CLOSE = 11
    SYS_EXIT = 12
    GSP_INIT = 13          # the GSP boot handshake of a GSP-level client


@dataclass(frozen=True, slots=True)
class Expect:
    """What the recording says came back for a message."""

    response: bool | None
    """True: a reply; False: an event, nothing to answer; None: in flight when the recording stopped."""
    status: int | None = None
    status_name: str | None = None
    ret: int = 0
    err: int = 0
    fields: tuple[tuple[str, Any], ...] = ()
    """Output fields that matter (name, value), compared where the target answers them."""


@dataclass(slots=True, eq=False)
class Message:
    """One call or event of a client, ready to submit."""

    index: int
    """Position in its client's stream, 0-based (printed 1-based as "message N")."""
    kind: Kind
    name: str
    seq: int
    """Sequence number of the request in the recording."""
    request: bytes
    reply: bytes | None
    expect: Expect
    lane: int = 0
    deps: tuple[int, ...] = ()
    """Indices (in the same client) of the messages whose handles or files it uses."""
    think_ns: int = 0
    """Recorded gap between the previous message of its lane ending and this one starting."""
    dur_ns: int = 0
    """Recorded duration of the call."""
    pid: int = 0
    tid: int = 0
    call_id: int = 0
    fd: int = -1
    h_client: int = 0
    h_parent: int = 0
    h_object: int = 0
    category: Category = Category.OTHER
    ring_va: int = 0
    userd_va: int = 0
    ring_size: int = 0
    gpu: bytes = b""
    """The GPU a UVM registration or unregistration names (its UUID)."""
    uses: tuple[Ref, ...] = ()
    """Values this message needs defined (handles, files, VA spaces) -- for deps and reduction."""
    defines: tuple[Ref, ...] = ()
    """Values this message defines."""
    locks: tuple[LockKind, ...] = ()
    """Locks the call holds while it is in flight (rmtrace.semantics.locks)."""


@dataclass(slots=True)
class Outcome:
    """What a target gave back for one message (a message with no answer has no Outcome)."""

    status: int | None = None
    """None where the target does not answer a status (or for an event)."""
    ret: int | None = None
    err: int | None = None
    fields: dict[str, Any] | None = None
    """Output fields the target answers; None: none."""
    record: bytes | None = None
    """The reply record, as the output trace keeps it."""


@dataclass(slots=True)
class Difference:
    what: str
    expected: Any
    got: Any

    def __str__(self) -> str:
        return f"{self.what} {self.got}, expected {self.expected}"


def compare(expect: Expect, outcome: Outcome, status_name: Any = None) -> list[Difference]:
    """Where ``outcome`` differs from ``expect``, comparing only what the target answered.

    ``status_name(code) -> str`` names statuses in the differences.
    """
    diffs: list[Difference] = []
    name = status_name or (lambda code: code)
    if not expect.response:  # an event, or a call the recording never saw answered: any answer will do
        return diffs
    if outcome.status is not None and expect.status is not None and outcome.status != expect.status:
        diffs.append(Difference("status", name(expect.status), name(outcome.status)))
    if outcome.ret is not None and outcome.ret != expect.ret:
        diffs.append(Difference("return value", expect.ret, outcome.ret))
    if outcome.err is not None and outcome.err != expect.err:
        diffs.append(Difference("errno", expect.err, outcome.err))
    if outcome.fields is not None:
        for key, want in expect.fields:
            if key in outcome.fields and outcome.fields[key] != want:
                diffs.append(Difference(key, want, outcome.fields[key]))
    return diffs
