"""Schedules: in what order a replay lets its clients' messages go.

A :class:`Schedule` is data -- a :class:`Mode` and a seed -- so a failing run
is reproduced by its name alone (``chaos:17``).  Each mode is a small policy
the runner asks two things: which ready *lane* goes next (a lane is one
client's stream of messages; a client has one lane per stream), and how long
to wait before its message (the recorded think time, or chaos's).

* ``recorded``: the recording's own interleaving: a message goes only after
  every message that started before it in the recording has gone;
* ``sequential``: client after client; the next starts when the previous one
  finished or the watchdog declared it wedged (a wedged process keeps what it
  holds, as it does in a VM);
* ``concurrent``: every client at once, one message each in turn;
* ``simultaneous``: clients one at a time, each with its streams at once;
* ``chaos``: every client at once in a random order with random delays, rr's
  chaos mode: lanes get random priorities that are reshuffled now and then,
  so clients starve each other for stretches; reproducible from the seed.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rmtrace.errors import RmtraceError

MS = 1_000_000


class Mode(enum.Enum):
    RECORDED = "recorded"
    SEQUENTIAL = "sequential"
    CONCURRENT = "concurrent"
    SIMULTANEOUS = "simultaneous"
    CHAOS = "chaos"


@dataclass(frozen=True)
class Schedule:
    mode: Mode
    seed: int = 0

    def __str__(self) -> str:
        return f"{self.mode.value}:{self.seed}" if self.mode is Mode.CHAOS else self.mode.value

    @classmethod
    def parse(cls, text: str, seed: int | None = None) -> Schedule:
        """``sequential``, ``chaos``, ``chaos:17`` (a seed in the name wins over ``seed``)."""
        name, _, tail = text.partition(":")
        try:
            mode = Mode(name.strip().lower())
        except ValueError:
            raise RmtraceError(f"unknown schedule {text!r} (one of: {', '.join(m.value for m in Mode)})") from None
        if tail:
            try:
                seed = int(tail, 0)
            except ValueError:
                raise RmtraceError(f"schedule {text!r}: the seed must be a number") from None
        return cls(mode, seed or 0)


class Policy:
    """Round robin over the ready lanes of every started client, recorded think times.

    ``pick(ready, open_lanes)`` chooses among the lanes whose next message
    may go (``ready``), knowing every lane with messages left (``open_lanes``);
    None means nobody may go yet.
    """

    one_client_at_a_time = False

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._turn = 0

    def pick(self, ready: Sequence[Any], open_lanes: Sequence[Any]) -> Any:
        self._turn += 1
        return ready[self._turn % len(ready)]

    def think(self, lane: Any, msg: Any) -> int:
        return msg.think_ns


class Sequential(Policy):
    one_client_at_a_time = True

    def pick(self, ready: Sequence[Any], open_lanes: Sequence[Any]) -> Any:
        return ready[0] if len(ready) == 1 else super().pick(ready, open_lanes)


class Recorded(Policy):
    """Only the lane holding the earliest message not yet sent (in recorded order) may go."""

    def pick(self, ready: Sequence[Any], open_lanes: Sequence[Any]) -> Any:
        floor = min(lane.rank() for lane in open_lanes)
        return next((lane for lane in ready if lane.rank() == floor), None)


class Chaos(Policy):
    """Random lane priorities, reshuffled now and then; random think times and occasional long stalls."""

    RESHUFFLE = 0.05
    STALL = 0.03
    STALL_MAX_NS = 60 * MS

    def __init__(self, schedule: Schedule) -> None:
        super().__init__(schedule)
        self.rng = random.Random(schedule.seed)
        self.priority: dict[Any, float] = {}

    def pick(self, ready: Sequence[Any], open_lanes: Sequence[Any]) -> Any:
        for lane in ready:
            if lane.key not in self.priority or self.rng.random() < self.RESHUFFLE:
                self.priority[lane.key] = self.rng.random()
        return max(ready, key=lambda lane: self.priority[lane.key])

    def think(self, lane: Any, msg: Any) -> int:
        if self.rng.random() < self.STALL:
            return self.rng.randrange(self.STALL_MAX_NS)
        return int(msg.think_ns * self.rng.uniform(0.0, 2.0))


POLICIES: dict[Mode, type[Policy]] = {
    Mode.RECORDED: Recorded,
    Mode.SEQUENTIAL: Sequential,
    Mode.CONCURRENT: Policy,
    Mode.SIMULTANEOUS: Sequential,
    Mode.CHAOS: Chaos,
}


def policy_for(schedule: Schedule) -> Policy:
    return POLICIES[schedule.mode](schedule)
