"""Counts, statuses, latencies and bytes per process, client, source and operation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmtrace.columns.stats import operations
from rmtrace.record import Source, enum_name
from rmtrace.session import CallInfo
from rmtrace.session.entities import FreedBy
from rmtrace.session.model import Objects


@dataclass
class OpStats:
    pid: int
    client: str | None
    source: str
    operation: str
    count: int = 0
    statuses: Counter = field(default_factory=Counter)
    latencies: list[int] = field(default_factory=list)
    bytes: int = 0
    in_flight: int = 0

    def add(self, call: CallInfo) -> None:
        self.count += 1
        self.statuses[call.status_name or ("in flight" if call.in_flight else "-")] += 1
        if call.latency_ns is not None and call.exit_seq != call.enter_seq:
            self.latencies.append(call.latency_ns)
        self.bytes += call.bytes
        self.in_flight += call.in_flight

    def latency(self) -> dict[str, int] | None:
        if not self.latencies:
            return None
        import statistics  # with fractions, 5-6 ms CPU at the start of each stats run, whose latencies come from columns
        xs = sorted(self.latencies)
        return {"min": xs[0], "median": int(statistics.median(xs)), "p99": xs[min(len(xs) - 1, int(len(xs) * 0.99))],
                "max": xs[-1]}

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "client": self.client, "source": self.source, "operation": self.operation,
                "count": self.count, "statuses": dict(self.statuses), "latency_ns": self.latency(),
                "bytes": self.bytes, "in_flight": self.in_flight}


def op_stats(calls: Iterable[CallInfo]) -> list[OpStats]:
    table: dict[tuple, OpStats] = {}
    for call in calls:
        key = (call.pid, call.client_id, call.source, call.full_name)
        entry = table.get(key)
        if entry is None:
            entry = table[key] = OpStats(call.pid, call.client_id, enum_name(Source, call.source), call.full_name)
        entry.add(call)
    return sorted(table.values(), key=lambda s: (s.pid, s.client or "", s.source, -s.count, s.operation))


def session_stats(model: Objects) -> dict[str, Any]:
    """Everything ``rmtrace stats`` prints, as one JSON-ready dict (the operations from the call table,
    ``rmtrace.columns.stats``: what ``op_stats`` gives over every call, without a Python visit per call).
    ``model``: a ``SessionModel``, or as much of one as stats reads (``rmtrace.session.model.load_objects``)."""
    out = stats_parts(model)
    out["operations"] = list(out["operations"])
    return out


def stats_parts(model: Objects) -> dict[str, Any]:
    """``session_stats`` with its operations an ``Operations`` (``rmtrace.columns.stats``): the groups as
    columns, each row's dict made as it is taken (iterated, or ``rows``), or none (``blocks``)."""
    ops = operations(model.table)
    per_client = ops.client_sources()
    objects = _object_counts(model)
    return {
        "processes": [{"pid": p.pid, "ppid": p.ppid, "argv": list(p.argv), "threads": len(p.threads),
                       "exit_status": p.exit_status} for p in model.processes.values()],
        "clients": [{"id": c.id, "pid": c.pid, "label": c.label, "sources": dict(per_client.get(c.id, {})),
                     "objects": objects.get(c.id, _counts(Counter()))}
                    for c in model.clients],
        "operations": ops,
    }


def _object_counts(model: Objects) -> dict[str, dict[str, int]]:
    """Objects allocated, freed, freed at exit and leaked, per client (``Objects.object_counts``)."""
    return {client: _counts(Counter(counts)) for client, counts in model.object_counts().items()}


def _counts(by: Counter) -> dict[str, int]:
    return {"allocated": sum(by.values()), "freed": by[FreedBy.RM_FREE], "freed_at_exit": by[FreedBy.EXIT],
            "leaked": by[None]}
