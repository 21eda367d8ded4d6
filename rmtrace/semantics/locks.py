"""Locks calls hold across an exchange with the host: one rule per lock, read by ``wedges`` and the model.

A call that takes a lock holds it for as long as it is in flight; a later taker waits
behind it.  The interpreter gives such a call a ``LockTaken`` event (and ``LockReleased``
for its return); ``wedges`` names the holder of a blocked taker from these rules, and the
host model (``replayer/model/core.py``) takes the same lock for the same calls.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from rmtrace.decoders.roles import UvmRole


class LockKind(enum.Enum):
    """A lock a call holds while it is in flight (LOCKS says who takes which)."""

    UVM_GLOBAL = "uvm_global"


@dataclass(frozen=True)
class LockRule:
    """Who takes a lock, and why (as a chain explains it)."""

    kind: LockKind
    name: str
    """What the lock is called in a sentence ("the UVM global lock")."""
    side: str
    """Where it lives ("guest")."""
    takers: frozenset[UvmRole]
    why: str


LOCKS: Mapping[LockKind, LockRule] = {rule.kind: rule for rule in (
    LockRule(LockKind.UVM_GLOBAL, "UVM global lock", "guest",
             frozenset({UvmRole.REGISTER_GPU, UvmRole.UNREGISTER_GPU}),
             "UVM holds g_uvm_global.global_lock across its RM exchange with the host "
             "(uvm_gpu_retain_by_uuid on registration, uvm_gpu_release_locked on the last release)"),
)}
"""Every lock rmtrace knows of, by kind."""

UVM_LOCKS: Mapping[UvmRole, tuple[LockKind, ...]] = {
    role: tuple(rule.kind for rule in LOCKS.values() if role in rule.takers)
    for role in UvmRole
}
"""The locks each UVM command takes (none for most)."""
