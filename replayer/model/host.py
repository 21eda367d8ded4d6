"""The host side: one vGPU's semaphore/GR service (sema context, channels, ranks, latches).

What it holds, after the-problem.md:

* **channels** registered by the guest, each with a ring address from which
  the host derives its CE **rank** (:func:`rank_of`);
* **publications**: the ring and USERD addresses the guest published, each
  owned by the channel that published it.  When that channel goes away the
  publication stays behind, *stale*, until something clears it;
* per rank a **one-shot latch**: an accepted publication arms it, a
  completion fires it, and a spent latch completes nothing until re-armed;
* **drain holds**: tearing a channel down holds completions on its rank for
  channels registered after the hold began, until the torn-down channel's
  last work drains (which never happens when the guest's final hint arrives
  after the unregister and is refused with rc -22);
* the counters pub_calls, gr_rel, faked, drain_held (and a few more).

A guest completion waits in :class:`Completion` until every condition holds
(:meth:`SemaHost.blockers` lists the ones that do not, in plain words, which
is the wedge chain).  The :class:`~replayer.model.policy.Policy` decides
what a new client session resets.  Everything the host does is reported
through ``emit(op, body, pid, tid)`` in the sema-service schema (``SemaOp``, the
decoders' own definitions: the records it becomes read back as the events the session fold
applies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders.sema import NO_RANK, DrainReason, ResetReason, SemaOp
from rmtrace.replayer.model.policy import Policy

EINVAL = 22
EEXIST = 17
RANK_SHIFT = 16
"""The host derives a rank from bits 16 and up of the ring address (see rank_of)."""

HOLDS_NAMED = 3
"""Drain holds a blocker sentence names one by one; the rest are counted."""

PUBLISH_OPS = {"RING": SemaOp.PUBLISH_RING, "USERD": SemaOp.PUBLISH_USERD}
"""What the guest publishes, and the op that says so."""

COUNTERS = ("pub_calls", "gr_rel", "faked", "drain_held", "hints", "hint_errors",
            "latch_fired", "latch_armed", "channels", "sessions")
"""Host counters in the order of the sema schema's COUNTERS message."""

Emit = Callable[[SemaOp, dict, int, int], None]


def rank_of(ring_va: int, ranks: int) -> int:
    """The CE rank a channel's work lands on, derived from its ring address."""
    return (ring_va >> RANK_SHIFT) % ranks


def _hx(v: int) -> str:
    return f"{v:#x}"


@dataclass(eq=False)
class HostChannel:
    """A channel as the host knows it."""

    key: tuple
    """(scope, hClient, hChannel): unique per guest client instance (scope: the replayed process)."""
    client: int
    handle: int
    ring_va: int
    userd_va: int
    rank: int
    order: int
    """Registration order (a drain hold's barrier compares against it)."""
    owner: str
    """Who owns it, in words (e.g. "c2 pid 1447"), for chains."""
    pid: int = 0
    live: bool = True
    ring_ok: bool = False
    """Its ring publication was accepted (the host can see its work)."""


@dataclass(eq=False)
class DrainHold:
    rank: int
    channel: HostChannel
    since: int
    barrier: int
    """Completions of channels registered after this order number are held."""
    active: bool = True


@dataclass(eq=False)
class Rank:
    index: int
    armed: bool = False
    generation: int = 0
    fired_by: HostChannel | None = None
    holds: list[DrainHold] = field(default_factory=list)


@dataclass(eq=False)
class Completion:
    """Work the guest waits for on a channel; done once the host releases (or fakes) it."""

    channel: HostChannel
    value: int
    since: int
    done: bool = False
    on_done: Callable[[Completion], None] | None = None


class SemaHost:
    """One vGPU's semaphore/GR service; see the module docstring."""

    def __init__(self, policy: Policy, clock: Any, emit: Emit | None = None,
                 timer: Callable[[int, Callable[[], None]], None] | None = None) -> None:
        self.policy = policy
        self.clock = clock
        self._emit = emit
        self._timer = timer
        self.session = 0
        self.ranks = [Rank(i) for i in range(policy.ranks)]
        self.channels: dict[tuple, HostChannel] = {}
        self.publications: dict[tuple, HostChannel] = {}
        self.waiting: list[Completion] = []
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._reported: list[int] = []
        self._order = 0

    # -- reporting

    def emit(self, op: SemaOp, body: dict, pid: int = 0, tid: int = 0) -> None:
        if self._emit is not None:
            self._emit(op, body, pid, tid)

    def emit_counters(self) -> None:
        """A COUNTERS snapshot, when a counter moved since the last one."""
        values = [self.counters[name] for name in COUNTERS]
        if values != self._reported:
            self._reported = values
            self.emit(SemaOp.COUNTERS, {"reserved": 0, "value": values})

    # -- sessions

    def new_session(self, reason: ResetReason, client: int = 0, pid: int = 0) -> None:
        """A new guest client session appeared; what it resets is the policy's business."""
        p = self.policy
        if not p.reset_on_new_session:
            return
        old = self.session
        self.session += 1
        self.counters["sessions"] += 1
        dropped = self._drop_stale() if p.clear_stale_on_session else 0
        rearmed = sum(self._arm(rank, None, pid) for rank in self.ranks if not rank.armed) if p.rearm_on_session else 0
        self.emit(SemaOp.SESSION_RESET, {"old_session": old, "new_session": self.session, "client": client,
                                    "reason": reason, "channels_dropped": dropped, "latches_rearmed": rearmed}, pid)
        if p.drain_bound_ns is not None:
            for rank in self.ranks:
                for hold in list(rank.holds):
                    self._bound(hold)
        self.emit_counters()
        self._retry()

    # -- channels

    def register(self, key: tuple, client: int, handle: int, ring_va: int, userd_va: int,
                 owner: str, pid: int = 0) -> HostChannel:
        p = self.policy
        if p.clear_stale_on_register:
            self._drop_stale()
        self._order += 1
        rank = rank_of(ring_va, p.ranks)
        ch = HostChannel(key, client, handle, ring_va, userd_va, rank, self._order, owner, pid)
        self.channels[key] = ch
        self.counters["channels"] += 1
        self.emit(SemaOp.REGISTER_CHANNEL, {"client": client, "channel": handle, "ring_va": ring_va,
                                       "userd_va": userd_va, "rank": rank, "rc": 0}, pid)
        r = self.ranks[rank]
        if not r.armed and (r.generation == 0 or p.rearm_on_register):
            self._arm(r, ch, pid)
        return ch

    def unregister(self, ch: HostChannel) -> None:
        """The guest drops a channel: it goes, its publications stay (stale), a drain hold starts."""
        if not ch.live:
            return
        ch.live = False
        del self.channels[ch.key]
        self.counters["channels"] -= 1
        self.emit(SemaOp.UNREGISTER_CHANNEL, {"client": ch.client, "channel": ch.handle, "ring_va": ch.ring_va,
                                         "userd_va": ch.userd_va, "rank": ch.rank, "rc": 0}, ch.pid)
        hold = DrainHold(ch.rank, ch, self.clock.now, self._order)
        self.ranks[ch.rank].holds.append(hold)
        self.counters["drain_held"] += 1
        self.emit(SemaOp.DRAIN_HOLD, {"rank": ch.rank, "channel": ch.handle, "held": self.counters["drain_held"],
                                 "reason": DrainReason.CHANNEL_TEARDOWN, "held_ns": 0}, ch.pid)
        if self.policy.drain_bound_ns is not None and self._timer is not None:
            self._timer(hold.since + self.policy.drain_bound_ns, lambda: self._bound(hold))

    def publish(self, ch: HostChannel, kind: str, va: int, size: int) -> int:
        """PUBLISH_RING / PUBLISH_USERD; returns rc (0 accepted, -EEXIST taken by another channel)."""
        key = self._publication(ch, kind, va)
        owner = self.publications.get(key)
        if owner is not None and owner is not ch:
            rc = -EEXIST  # taken: by a live channel (a collision) or by a gone one (stale)
        else:
            rc = 0
            self.publications[key] = ch
            self.counters["pub_calls"] += 1
        self.emit(PUBLISH_OPS[kind], {"channel": ch.handle, "rank": ch.rank, "va": va, "size": size,
                                      "pub_calls": self.counters["pub_calls"], "rc": rc, "reserved": 0}, ch.pid)
        if rc == 0 and kind == "RING":
            ch.ring_ok = True
            rank = self.ranks[ch.rank]
            if not rank.armed:
                self._arm(rank, ch, ch.pid)
            self._retry()
        return rc

    # -- work

    def hint(self, ch: HostChannel, value: int) -> Completion | None:
        """COMPLETION_HINT: the guest's work on ``ch``.  None (rc -22) when ``ch`` is not live."""
        self.counters["hints"] += 1
        if not ch.live or self.channels.get(ch.key) is not ch:
            self.counters["hint_errors"] += 1
            self.emit(SemaOp.COMPLETION_HINT, {"channel": ch.handle, "rank": NO_RANK, "value": value,
                                          "rc": -EINVAL, "reserved": 0}, ch.pid)
            return None
        self.emit(SemaOp.COMPLETION_HINT, {"channel": ch.handle, "rank": ch.rank, "value": value, "rc": 0,
                                      "reserved": 0}, ch.pid)
        c = Completion(ch, value, self.clock.now)
        if not self._try(c):
            self.waiting.append(c)
        return c

    def blockers(self, c: Completion) -> list[str]:
        """Why ``c`` has not completed, one plain sentence each (empty when it could)."""
        ch = c.channel
        out = []
        if not ch.live:
            out.append(f"channel {_hx(ch.handle)} is no longer registered with the host")
        if not ch.ring_ok:
            owner = self.publications.get(self._publication(ch, "RING", ch.ring_va))
            whose = (f"channel {_hx(owner.handle)} of {owner.owner}" + (" (gone: stale)" if not owner.live else "")
                     if owner is not None else "nobody")
            out.append(f"its ring {_hx(ch.ring_va)} is not published for it: the host keeps that "
                       f"publication for {whose}")
        rank = self.ranks[ch.rank]
        if not rank.armed:
            by = f" by channel {_hx(rank.fired_by.handle)} of {rank.fired_by.owner}" if rank.fired_by else ""
            out.append(f"the one-shot latch of rank {ch.rank} is spent (fired{by}) and nothing re-armed it")
        holds = [hold for hold in rank.holds if hold.active and ch.order > hold.barrier]
        if holds:
            gone = ", ".join(f"{_hx(h.channel.handle)} of {h.channel.owner}" for h in holds[:HOLDS_NAMED])
            more = f" and {len(holds) - HOLDS_NAMED} more" if len(holds) > HOLDS_NAMED else ""
            out.append(f"rank {ch.rank} is drain-held by the teardown of {len(holds)} channel"
                       f"{'s' if len(holds) > 1 else ''} ({gone}{more}), whose last work the host refused "
                       f"(hint rc -22), so the drain never ends")
        return out

    # -- internals

    def _arm(self, rank: Rank, ch: HostChannel | None, pid: int) -> int:
        rank.armed = True
        rank.generation += 1
        self.counters["latch_armed"] += 1
        self.emit(SemaOp.LATCH_ARM, {"rank": rank.index, "channel": ch.handle if ch else 0,
                                "generation": rank.generation, "armed": 1}, pid)
        return 1

    def _try(self, c: Completion) -> bool:
        ch = c.channel
        rank = self.ranks[ch.rank]
        if not (ch.live and ch.ring_ok):
            return False
        for hold in rank.holds:
            if ch.order > hold.barrier:
                return False
        if not rank.armed:
            if not self.policy.rearm_on_queued_work:
                return False
            self._arm(rank, ch, ch.pid)
        rank.armed = False
        rank.fired_by = ch
        self.counters["latch_fired"] += 1
        self.emit(SemaOp.LATCH_FIRE, {"rank": rank.index, "channel": ch.handle, "generation": rank.generation,
                                 "armed": 0}, ch.pid)
        self.counters["gr_rel"] += 1
        self.emit(SemaOp.RELEASE, {"channel": ch.handle, "rank": ch.rank, "sema_va": ch.ring_va, "value": c.value,
                              "counter": self.counters["gr_rel"], "rc": 0, "reserved": 0}, ch.pid)
        self._finish(c)
        return True

    def _finish(self, c: Completion) -> None:
        c.done = True
        if c.on_done is not None:
            c.on_done(c)

    def _retry(self) -> None:
        if not self.waiting:
            return
        still = []
        for c in self.waiting:
            if not self._try(c):
                still.append(c)
        self.waiting = still

    def _bound(self, hold: DrainHold) -> None:
        """The drain bound expired: end the hold, fake the completion it waited for."""
        if not hold.active:
            return
        hold.active = False
        self.ranks[hold.rank].holds.remove(hold)
        ch = hold.channel
        self.counters["drain_held"] -= 1
        self.emit(SemaOp.DRAIN_RELEASE, {"rank": hold.rank, "channel": ch.handle, "held": self.counters["drain_held"],
                                    "reason": DrainReason.TIMEOUT, "held_ns": self.clock.now - hold.since}, ch.pid)
        self.counters["faked"] += 1
        self.emit(SemaOp.FAKED_COMPLETION, {"channel": ch.handle, "rank": hold.rank, "sema_va": ch.ring_va, "value": 0,
                                       "counter": self.counters["faked"], "rc": 0, "reserved": 0}, ch.pid)
        self._retry()

    def _publication(self, ch: HostChannel, kind: str, va: int) -> tuple:
        """Where a publication is kept: by address, or by (guest client, address) when isolated per client."""
        return (ch.key[:-1], kind, va) if self.policy.publications_per_client else (kind, va)

    def _drop_stale(self) -> int:
        stale = [key for key, owner in self.publications.items() if not owner.live]
        for key in stale:
            del self.publications[key]
        return len(stale)
