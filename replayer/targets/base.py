"""The one interface every replay target implements.

A target is where a replay's messages go: the embedded host-service model,
any service behind a Unix socket, the recording itself, and later the kernel
host service (``/dev/rmtrace-replay``) and the real NVIDIA driver.  The
runner drives it with five calls and nothing else, so a new target plugs in
without touching plans or schedules (docs/replay-protocol.md, "Targets"):

* ``open(info, sink)``: start; ``sink(bytes)`` takes every record the target
  itself produces (host sema/GSP records), in the record format, as they happen;
* ``submit(ticket, client, msg)``: send one message; return its
  :class:`~rmtrace.replayer.messages.Outcome` when it is answered at once,
  None when the answer comes later through ``wait``.  Several clients have
  messages outstanding at the same time;
* ``wait(deadline_ns)``: the answers that arrive by ``deadline_ns`` on the
  target's clock, returning as soon as there is at least one (an empty list
  at the deadline);
* ``idle(ns)``: let time pass with no guest activity (a recorded think time);
  answers that arrive meanwhile are returned;
* ``close()``: stop.

``now()`` is the target's clock: virtual for the model (a wait costs nothing
and a wedge is found at once), CLOCK_MONOTONIC for real services.
``explain(ticket)`` says why an unanswered message waits, when the target
knows; ``skip(ticket, client, msg)`` says why a target does not send a
message at all (the real driver's safety table), or None; ``answers`` names the parts of an outcome it produces, so that what
it cannot know is never counted as a divergence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from rmtrace.replayer.messages import Message, Outcome

from rmtrace.errors import RmtraceError

Ticket = Hashable
Sink = Callable[[bytes], None]
Reply = tuple[Ticket, Outcome]

CLOCK_NAMES = ("virtual", "real")
"""A service's clocks: ``virtual`` moves only when the runner lets time pass (deterministic, equal
message by message to ``--against model``); ``real`` is CLOCK_MONOTONIC with the service's own timers."""


def clock_spec(arg: str, kind: str) -> tuple[str, str]:
    """``PATH[,clock=virtual|real]`` -> (path, clock); virtual unless asked otherwise."""
    path, *options = arg.split(",")
    clock = CLOCK_NAMES[0]
    for option in options:
        key, _, value = option.partition("=")
        if key != "clock" or value not in CLOCK_NAMES:
            raise RmtraceError(f"--against {kind}: unknown option {option!r} (clock=virtual or clock=real)")
        clock = value
    return path, clock


@dataclass(frozen=True)
class RunInfo:
    """What a target learns when a replay starts."""

    meta: dict[str, Any]
    """The recorded trace's metadata (driver version, GPUs, command)."""
    schedule: str
    seed: int | None
    clients: tuple[tuple[str, int, str], ...] = field(default_factory=tuple)
    """(client id, pid, label) of every client in the plan."""


class Target(ABC):
    """Where a replay's messages go; see the module docstring."""

    name: str = "?"
    answers: frozenset[str] = frozenset({"status"})
    """Outcome parts this target produces: status, ret, err, fields."""

    @abstractmethod
    def open(self, info: RunInfo, sink: Sink | None) -> None: ...

    @abstractmethod
    def submit(self, ticket: Ticket, client: Any, msg: Message) -> Outcome | None: ...

    @abstractmethod
    def wait(self, deadline_ns: int) -> list[Reply]: ...

    @abstractmethod
    def idle(self, ns: int) -> list[Reply]: ...

    @abstractmethod
    def now(self) -> int: ...

    def explain(self, ticket: Ticket) -> list[str]:
        return []

    def skip(self, ticket: Ticket, client: Any, msg: Message) -> str | None:
        """Why this target leaves ``msg`` out (never sent, never compared), or None to send it."""
        return None

    def counters(self) -> dict[str, int]:
        """The host counters at this point, where the target has them."""
        return {}

    def report(self) -> list[str]:
        """Lines the replay prints after its table (what the target did beyond the verdicts)."""
        return []

    def close(self) -> None:  # noqa: B027 (a default that does nothing, on purpose)
        """Stop; a target with resources releases them here."""
