"""The replay tables of a driver branch: what a real driver may be sent, and what its fields mean.

``rmtrace replay --against nvidia`` re-issues recorded calls against a real
driver on a shared machine.  ``data/<branch>.replay.json``, beside the driver
profiles, says per number of the profile (RM escape, class id, control
command, UVM request number) whether a call is known to be harmless, always
with the reason; which fields of a call hold handles, fds, addresses or
values the driver hands out (so the replay can remap them); which address
ranges a call needs reserved in the replaying process; which output
fields legitimately differ from the recording (the comparison's masks); and
which statuses depend on other clients running at the same time (``across``:
judged across the clients that overlap, not client by client).

Every entry names the call it was written for.  The loader checks that name
against the profile's own name for the number (for numbers no public header
names, against the decoders' stand-in name such as
``NV2080_CTRL_CMD_THERMAL_0x46``) and drops an entry whose number now means
something else: a renumbered command never inherits another's verdict.  What
the tables do not list is unsafe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from rmtrace.decoders.context import context
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.errors import RmtraceError

SUFFIX = ".replay.json"
ROLES = frozenset({"handle", "handle-new", "handle-free", "fd", "va", "gva", "cookie", "cookie-out", "gpuid", "gpuid-out",
                   "uuid-out"})
"""What a field can be to the remapping (docs/replay-nvidia.md, "Remapping")."""
PROTS = frozenset({"none", "rw"})
KINDS = ("esc", "ctrl", "class", "memclass", "uvm")
"""Call keys: ``esc:NR`` (every RM escape), ``ctrl:CMD`` (RM_CONTROL), ``class:ID`` (RM_ALLOC's alloc params),
``memclass:ID`` (RM_ALLOC_MEMORY by class), ``uvm:NR``."""
CALL_TABLES = {"esc": "escapes", "ctrl": "controls", "class": "classes", "memclass": "classes", "uvm": "uvm"}
"""The table that names each kind of call key's number."""
BY = frozenset({"control", "class", "inner"})
"""Escapes decided by something inside them: the control command, the class, the escape XFER carries."""


@dataclass(frozen=True)
class Rule:
    """Whether one number is known to be harmless to send, and why."""

    name: str
    safe: bool
    reason: str
    by: str | None = None
    """For an escape: decided by its ``control``, ``class`` or ``inner`` escape instead."""


@dataclass(frozen=True)
class Reserve:
    """An address range a call needs mapped in the replaying process (as the recorded process had it)."""

    base: str
    length: str
    plus: int
    prot: str


@dataclass(frozen=True)
class Mask:
    paths: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Across:
    """A call whose status depends on other clients running at the same time (see ``oracle.Judge``)."""

    name: str
    reason: str


@dataclass(frozen=True)
class ReplayTables:
    branch: str
    escapes: Mapping[int, Rule]
    classes: Mapping[int, Rule]
    controls: Mapping[int, Rule]
    uvm: Mapping[int, Rule]
    devices: tuple[tuple[re.Pattern, str], ...]
    """Device node names (under /dev) a replay may open, each with what it is."""
    links: Mapping[str, Mapping[str, str]]
    """Call key -> pointer field path -> the buffer it points to (``params``, ``alloc``, ``rights``, ``arg``)."""
    fields: Mapping[str, Mapping[str, str]]
    """Call key -> field path -> role."""
    reserve: Mapping[str, Reserve]
    masks: Mapping[str, Mask]
    dropped: tuple[str, ...]
    """Entries whose number the profile names otherwise: left out, each said in a sentence."""
    across: Mapping[str, Across] = field(default_factory=dict)
    """Call key -> a status judged across the clients that overlap (the multiset of their statuses)."""

    def device(self, name: str) -> str | None:
        """What the node /dev/NAME is, or None when a replay must not open it."""
        return next((what for pattern, what in self.devices if pattern.fullmatch(name)), None)


def available_branches() -> list[str]:
    data = resources.files("rmtrace.decoders.profiles") / "data"
    return sorted(p.name[: -len(SUFFIX)] for p in data.iterdir() if p.name.endswith(SUFFIX))


@cache
def replay_tables(profile: DriverProfile) -> ReplayTables:
    """The replay tables for ``profile``'s branch, checked against the profile; RmtraceError when none ship."""
    path = resources.files("rmtrace.decoders.profiles") / "data" / f"{profile.branch}{SUFFIX}"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise RmtraceError(f"no replay safety table for driver branch {profile.branch} (profile {profile.version}); "
                           f"shipped: {', '.join(available_branches()) or 'none'}") from None
    return parse_tables(raw, profile)


def parse_tables(raw: Mapping[str, Any], profile: DriverProfile) -> ReplayTables:
    """``raw`` (a replay JSON document) as tables, its names checked against ``profile``."""
    names = context(profile).names
    dropped: list[str] = []
    expected = {
        "escapes": lambda n: profile.escapes[n].name if n in profile.escapes else None,
        "classes": lambda n: names.class_label(n).name,
        "controls": lambda n: names.control_label(n).name,
        "uvm": lambda n: profile.uvm[n].name if n in profile.uvm else None,
    }
    rules: dict[str, dict[int, Rule]] = {}
    for table, name_of in expected.items():
        rules[table] = {}
        for key, entry in raw.get(table, {}).items():
            number = int(key, 0)
            rule = _rule(table, key, entry)
            actual = name_of(number)
            if actual != rule.name:
                dropped.append(f"{table} {key} was written for {rule.name}, but profile {profile.version} "
                               f"names it {actual or 'nothing'}: left out (unsafe)")
                continue
            rules[table][number] = rule
    fields = {}
    for call, entries in raw.get("fields", {}).items():
        _check_call(call)
        for path, role in entries.items():
            if role not in ROLES:
                raise RmtraceError(f"replay tables: {call} {path}: unknown role {role!r} (one of {', '.join(sorted(ROLES))})")
        fields[call] = dict(entries)
    links = {}
    for call, entries in raw.get("links", {}).items():
        _check_call(call)
        links[call] = dict(entries)
    reserve = {}
    for call, entry in raw.get("reserve", {}).items():
        _check_call(call)
        if entry.get("prot") not in PROTS:
            raise RmtraceError(f"replay tables: {call}: reserve prot must be one of {', '.join(sorted(PROTS))}")
        reserve[call] = Reserve(entry["base"], entry["length"], int(entry.get("plus", 0)), entry["prot"])
    masks = {}
    for call, entry in raw.get("masks", {}).items():
        _check_call(call)
        if not entry.get("reason"):
            raise RmtraceError(f"replay tables: mask {call} has no reason")
        masks[call] = Mask(tuple(entry["paths"]), entry["reason"])
    across = {}
    for call, entry in raw.get("across", {}).items():
        _check_call(call)
        if not entry.get("reason") or not entry.get("name"):
            raise RmtraceError(f"replay tables: across {call} needs a name and a reason")
        kind, _, number = call.partition(":")
        actual = expected[CALL_TABLES[kind]](int(number, 0))
        if actual != entry["name"]:
            dropped.append(f"across {call} was written for {entry['name']}, but profile {profile.version} "
                           f"names it {actual or 'nothing'}: left out (judged client by client)")
            continue
        across[call] = Across(entry["name"], entry["reason"])
    devices = tuple((re.compile(pattern), what) for pattern, what in raw.get("devices", {}).items())
    return ReplayTables(str(raw.get("branch", profile.branch)), rules["escapes"], rules["classes"], rules["controls"],
                        rules["uvm"], devices, links, fields, reserve, masks, tuple(dropped), across)


def _rule(table: str, key: str, entry: Mapping[str, Any]) -> Rule:
    reason = entry.get("reason")
    if not reason:
        raise RmtraceError(f"replay tables: {table} {key} has no reason")
    by = entry.get("by")
    if by is not None and (table != "escapes" or by not in BY):
        raise RmtraceError(f"replay tables: {table} {key}: 'by' is for escapes, one of {', '.join(sorted(BY))}")
    if by is None and not isinstance(entry.get("safe"), bool):
        raise RmtraceError(f"replay tables: {table} {key} says neither safe (true/false) nor by")
    return Rule(entry["name"], bool(entry.get("safe", False)), reason, by)


def _check_call(call: str) -> None:
    kind, _, number = call.partition(":")
    if kind not in KINDS or not number:
        raise RmtraceError(f"replay tables: {call!r} is not a call key ({', '.join(k + ':N' for k in KINDS)})")
    int(number, 0)


__all__ = ["ReplayTables", "Across", "Rule", "Reserve", "Mask", "replay_tables", "parse_tables", "available_branches", "ROLES"]
