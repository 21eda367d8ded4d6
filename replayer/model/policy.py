"""How the host service behaves when a new client appears: the fix as data.

A :class:`Policy` is the set of behaviours that distinguish the unfixed host
service from the fixed one (docs/host-service-model.md explains each).  The
model consults these flags at exactly the points the-problem.md names, so a
preset is a hypothesis about the service that a replay can test: ``legacy``
reproduces the second-client wedge, ``fixed`` is the fix plan of the
problem report, and ``rearm-only`` is the reverted m146/m147 experiment
(re-arm latches on registration and session reset, nothing else), which the
model shows to be insufficient, as it was on the real host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rmtrace.errors import RmtraceError

MS = 1_000_000


@dataclass(frozen=True)
class Policy:
    """Behaviour switches of the modelled host service."""

    name: str
    summary: str
    reset_on_new_session: bool
    """Notice a new client session (GSP boot handshake, first RM client after a teardown)."""
    rearm_on_session: bool
    """At a new session, re-arm every spent one-shot rank latch."""
    rearm_on_register: bool
    """When a channel registers, re-arm its rank's latch if spent."""
    clear_stale_on_session: bool
    """At a new session, drop ring/USERD publications whose channel is gone."""
    clear_stale_on_register: bool
    """When a channel registers, drop publications whose channel is gone."""
    publications_per_client: bool
    """Key publications by (client, address) instead of by address alone (per-client isolation)."""
    rearm_on_queued_work: bool
    """A spent latch re-arms when work is queued on its rank (a one-shot latch never swallows work)."""
    drain_bound_ns: int | None
    """A drain hold ends after this long, degrading to a faked completion; None: held until drained."""
    ranks: int = 4
    """CE ranks per vGPU; a channel's rank comes from its ring address (see host.rank_of)."""


PRESETS: dict[str, Policy] = {
    "fixed": Policy(
        name="fixed",
        summary="per-session reset: re-arm latches, clear stale publications, bound drain holds; "
                "publications isolated per client; a latch with queued work re-arms",
        reset_on_new_session=True, rearm_on_session=True, rearm_on_register=True,
        clear_stale_on_session=True, clear_stale_on_register=True, publications_per_client=True,
        rearm_on_queued_work=True, drain_bound_ns=20 * MS,
    ),
    "legacy": Policy(
        name="legacy",
        summary="the unfixed service: per-client state survives a new client; drain holds unbounded",
        reset_on_new_session=False, rearm_on_session=False, rearm_on_register=False,
        clear_stale_on_session=False, clear_stale_on_register=False, publications_per_client=False,
        rearm_on_queued_work=False, drain_bound_ns=None,
    ),
    "rearm-only": Policy(
        name="rearm-only",
        summary="the reverted m146/m147 experiment: re-arm latches on registration and session "
                "reset, nothing else",
        reset_on_new_session=True, rearm_on_session=True, rearm_on_register=True,
        clear_stale_on_session=False, clear_stale_on_register=False, publications_per_client=False,
        rearm_on_queued_work=False, drain_bound_ns=None,
    ),
}
DEFAULT = "fixed"


def policy(name: str | None = None, *, ranks: int | None = None) -> Policy:
    """The preset called ``name`` (default ``fixed``), optionally with another rank count."""
    chosen = PRESETS.get(name or DEFAULT)
    if chosen is None:
        raise RmtraceError(f"unknown host-service model {name!r} (one of: {', '.join(PRESETS)})")
    return chosen if ranks is None else replace(chosen, ranks=ranks)
