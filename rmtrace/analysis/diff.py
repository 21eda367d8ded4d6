"""The first divergence between two runs, and who sent what in each.

Runs are aligned per client (``c1`` with ``c1``: clients are numbered by
order of appearance) by *stable names*: a call is the token (operation,
detail, the stable name of the object it acts on), so two runs of the same
program compare although RM handed out different handle values.  The first
divergence is the earliest of: a call one run lacks, a different status, a
different output field (the argument struct's non-handle members after the
call), or a client that goes quiet (its calls stop, or one never returns).
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders import Level
from rmtrace.record import Source, enum_name
from rmtrace.semantics import EscapeRole, GspRole, Interpreter
from rmtrace.session import CallInfo, SessionModel
from rmtrace.session.entities import Named
from rmtrace.timefmt import format_offset

COMPARED_SOURCES = (Source.RM, Source.UVM, Source.GSP, Source.SEMA)
TARGET_HANDLES = ("hObject", "hChannel")
"""The handle a call acts on, in order of preference."""
CREATING = frozenset({EscapeRole.ALLOC, EscapeRole.ALLOC_MEMORY, EscapeRole.DUP_OBJECT, GspRole.RM_ALLOC,
                      GspRole.DUP_OBJECT})
CREATED_TARGET = ("hParent",)
"""Calls that create their object act on its parent (a failed one never had a name of its own)."""


class DivergenceKind(Named):
    MISSING_IN_A = "missing_in_a"
    MISSING_IN_B = "missing_in_b"
    DIFFERENT_CALL = "different_call"
    STATUS = "status"
    OUTPUT = "output"
    QUIET_A = "quiet_a"
    QUIET_B = "quiet_b"
    CLIENT_MISSING = "client_missing"

RUN_SPECIFIC_OUTPUTS = frozenset({"session", "vgpu", "pub_calls", "counter", "generation", "held", "held_ns"})
"""Output members that count or number things per run (host session generations, counters):
they differ between any two runs and say nothing about divergence."""


class _Names:
    """Stable names of one client's handles as they were at a given record."""

    def __init__(self, model: SessionModel, client_id: str) -> None:
        self.by_handle: dict[int, tuple[list[int], list[str]]] = {}
        for obj in sorted(model.objects_of(client_id), key=lambda o: o.alloc_seq):
            seqs, names = self.by_handle.setdefault(obj.handle, ([], []))
            seqs.append(obj.alloc_seq)
            names.append(obj.stable_name)

    def at(self, handle: int | None, seq: int) -> str:
        if not handle:
            return ""
        entry = self.by_handle.get(handle)
        if entry is None:
            return "?"
        i = bisect.bisect_right(entry[0], seq) - 1
        return entry[1][max(i, 0)]


@dataclass
class Step:
    call: CallInfo
    token: tuple[str, str, str]

    def describe(self) -> str:
        name, detail, target = self.token
        text = f"{name}({detail})" if detail else name
        return f"{text} on {target}" if target else text


def recorded_sources(model: SessionModel) -> set[int]:
    return set(model.source_counts()) & set(COMPARED_SOURCES)


def steps(model: SessionModel, client_id: str, sources: frozenset[int] | set[int] = frozenset(COMPARED_SOURCES)) -> list[Step]:
    names = _Names(model, client_id)
    interpreter = Interpreter(model.decoders)
    out = []
    for call in model.calls_of(client_id):
        if call.source not in sources:
            continue
        targets = CREATED_TARGET if interpreter.role(call.source, call.op) in CREATING else TARGET_HANDLES
        handle = next((call.handles[h] for h in targets if h in call.handles), None)
        out.append(Step(call, (call.name, call.detail or "", names.at(handle, call.enter_seq))))
    return out


@dataclass
class Divergence:
    client_id: str
    kind: DivergenceKind
    index: int
    summary: str
    a: CallInfo | None = None
    b: CallInfo | None = None
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"client": self.client_id, "kind": self.kind, "index": self.index, "summary": self.summary,
                "a_seq": self.a.enter_seq if self.a else None, "b_seq": self.b.enter_seq if self.b else None,
                "details": list(self.details)}


def _output_fields(model: SessionModel, call: CallInfo) -> dict[str, Any]:
    """The call's argument-struct members after the call, handles left out (they differ run to run)."""
    if call.exit_seq is None:
        return {}
    records = [model.reader.record_at(call.enter_seq), model.reader.record_at(call.exit_seq)]
    from rmtrace.calls import Call, CallState
    decoded = model.decoders.decode(Call(tuple(records), CallState.COMPLETE), Level.CALL)
    skip = set(decoded.handles) | RUN_SPECIFIC_OUTPUTS
    return {k: v for k, v in decoded.args.items() if k not in skip}


def _first_in_client(a: SessionModel, b: SessionModel, cid: str) -> Divergence | None:
    # Only what both runs recorded is compared: a replay's host-side GSP/sema records, say,
    # have no counterpart in a userspace capture of the same program.
    sources = recorded_sources(a) & recorded_sources(b)
    sa, sb = steps(a, cid, sources), steps(b, cid, sources)
    ta, tb = [s.token for s in sa], [s.token for s in sb]
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    structural: Divergence | None = None
    for tag, i1, _i2, j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "delete" and j1 == len(tb):
            structural = Divergence(cid, DivergenceKind.QUIET_B, i1, f"{cid}: run B stops after call {j1}; run A continues with "
                                    f"{sa[i1].describe()}", sa[i1].call, sb[-1].call if sb else None)
        elif tag == "insert" and i1 == len(ta):
            structural = Divergence(cid, DivergenceKind.QUIET_A, i1, f"{cid}: run A stops after call {i1}; run B continues with "
                                    f"{sb[j1].describe()}", sa[-1].call if sa else None, sb[j1].call)
        elif tag == "delete":
            structural = Divergence(cid, DivergenceKind.MISSING_IN_B, i1, f"{cid}: run A has {sa[i1].describe()} "
                                    f"(call {i1}) that run B lacks", sa[i1].call, sb[j1].call if j1 < len(sb) else None)
        elif tag == "insert":
            structural = Divergence(cid, DivergenceKind.MISSING_IN_A, i1, f"{cid}: run B has {sb[j1].describe()} "
                                    f"(call {j1}) that run A lacks", sa[i1].call if i1 < len(sa) else None, sb[j1].call)
        else:
            structural = Divergence(cid, DivergenceKind.DIFFERENT_CALL, i1, f"{cid}: call {i1} is {sa[i1].describe()} in run A "
                                    f"but {sb[j1].describe()} in run B", sa[i1].call, sb[j1].call)
        break
    limit = structural.index if structural else len(sa)
    for i, j in _aligned(matcher, limit):
        ca, cb = sa[i].call, sb[j].call
        if ca.in_flight != cb.in_flight:
            quiet, kind = ("A", DivergenceKind.QUIET_A) if ca.in_flight else ("B", DivergenceKind.QUIET_B)
            return Divergence(cid, kind, i, f"{cid}: {sa[i].describe()} (call {i}) never returns in run {quiet}",
                              ca, cb)
        if ca.status != cb.status:
            return Divergence(cid, DivergenceKind.STATUS, i, f"{cid}: {sa[i].describe()} (call {i}) returns {ca.status_name} "
                              f"in run A but {cb.status_name} in run B", ca, cb)
        fa, fb = _output_fields(a, ca), _output_fields(b, cb)
        changed = [k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
        if changed:
            return Divergence(cid, DivergenceKind.OUTPUT, i, f"{cid}: {sa[i].describe()} (call {i}) writes different "
                              f"{', '.join(changed)}", ca, cb, [f"{k}: A={fa.get(k)!r} B={fb.get(k)!r}" for k in changed])
    return structural


def _aligned(matcher: difflib.SequenceMatcher, limit: int):
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            if block.a + k >= limit:
                return
            yield block.a + k, block.b + k


def first_divergence(a: SessionModel, b: SessionModel) -> Divergence | None:
    """The earliest divergence (by time in run A) over all clients, or None when the runs agree."""
    found = []
    ids_a, ids_b = [c.id for c in a.clients], [c.id for c in b.clients]
    for cid in ids_a:
        if cid not in ids_b:
            found.append(Divergence(cid, DivergenceKind.CLIENT_MISSING, 0, f"{cid} ({a.client(cid).label}) is in run A only"))
            continue
        d = _first_in_client(a, b, cid)
        if d is not None:
            found.append(d)
    for cid in ids_b:
        if cid not in ids_a:
            found.append(Divergence(cid, DivergenceKind.CLIENT_MISSING, 0, f"{cid} ({b.client(cid).label}) is in run B only: "
                                    f"run A issued no traffic for it"))

    def when(d: Divergence) -> int:
        if d.a is not None:
            return d.a.t_enter - a.start_ns
        return (d.b.t_enter - b.start_ns) if d.b is not None else 0
    return min(found, key=when) if found else None


def traffic_table(a: SessionModel, b: SessionModel) -> list[dict[str, Any]]:
    """Per client and source, how many calls each run made (run B issued zero RM traffic, at a glance)."""
    rows = []
    ids = list(dict.fromkeys([c.id for c in a.clients] + [c.id for c in b.clients]))
    for cid in ids:
        counts = {}
        for run, model in (("a", a), ("b", b)):
            counts[run] = Counter({enum_name(Source, source): n for source, n in model.source_counts(cid).items()})
        sources = sorted(set(counts["a"]) | set(counts["b"]))
        rows.append({"client": cid, "sources": {s: [counts["a"].get(s, 0), counts["b"].get(s, 0)] for s in sources}})
    return rows


def describe_position(model: SessionModel, call: CallInfo | None) -> str:
    if call is None:
        return "-"
    return f"seq {call.enter_seq} at {format_offset(call.t_enter - model.start_ns)}"
