"""``rmtrace stats``' operations table from the call table: one sort, then every group at once.

``operation_rows`` gives what ``rmtrace.analysis.stats.op_stats`` gives from the
session model's CallInfo list, as the JSON-ready dicts ``OpStats.to_dict``
makes, in the same order and with the statuses in the same order; but it
groups the columns with numpy instead of visiting each call in Python.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rmtrace.calls import CallState
from rmtrace.columns.strings import NONE, Strings
from rmtrace.columns.table import STATES, CallTable
from rmtrace.record import Source, enum_name

_IN_FLIGHT = [STATES.index(CallState.IN_FLIGHT), STATES.index(CallState.UNFINISHED)]
IN_FLIGHT_STATUS, NO_STATUS = "in flight", "-"
"""How a call without a status name is counted: still in flight, or neither."""


def full_names(table: CallTable) -> tuple[np.ndarray, Strings[str]]:
    """Each row's ``CallInfo.full_name`` as an id into a string table of its own."""
    names = Strings[str]()
    pairs = table.columns["name"].astype(np.int64) << 32 | (table.columns["detail"].astype(np.int64) - NONE)
    uniq, inverse = np.unique(pairs, return_inverse=True)
    ids = np.empty(len(uniq), dtype=np.int32)
    for i, pair in enumerate(uniq.tolist()):
        name, detail = table.names.values[pair >> 32], table.details.get((pair & 0xFFFFFFFF) + NONE)
        ids[i] = names.id(f"{name}({detail})" if detail else name)
    return ids[inverse.ravel()], names


def operation_rows(table: CallTable) -> list[dict[str, Any]]:
    """Per (pid, client, source, operation): count, statuses, latency, bytes and calls in flight."""
    c = table.columns
    n = len(table)
    if n == 0:
        return []
    full, full_table = full_names(table)
    in_flight = np.isin(c["state"], _IN_FLIGHT)
    status = np.where(c["status_name"] >= 0, c["status_name"],
                      np.where(in_flight, len(table.status_names), len(table.status_names) + 1))
    status_text = [*table.status_names.values, IN_FLIGHT_STATUS, NO_STATUS]
    group, (pid, client, source, op) = _groups([c["pid"], c["client"] + 1, c["source"], full])
    client = client - 1
    groups = len(pid)
    counts = np.bincount(group, minlength=groups)
    byte_sums = np.bincount(group, weights=c["bytes"], minlength=groups).astype(np.int64)  # exact to 2**53
    flights = np.bincount(group, weights=in_flight, minlength=groups).astype(np.int64)
    latencies = _latencies(c, group, groups)
    statuses = _statuses(group, status, status_text, groups)
    clients = [table.client_id(i) or "" for i in range(-1, len(table.clients))]
    sources = {int(v): enum_name(Source, int(v)) for v in np.unique(source)}
    # the order op_stats sorts in: pid, client id, source name, most calls first, operation name
    rank = _ranks(clients), _ranks([sources.get(v, "") for v in range(max(sources) + 1)]), _ranks(full_table.values)
    final = np.lexsort((rank[2][op], -counts, rank[1][source], rank[0][client + 1], pid))
    rows = []
    for g, p, cl, so, o, k, b, f in zip(final.tolist(), pid[final].tolist(), client[final].tolist(),
                                      source[final].tolist(), op[final].tolist(), counts[final].tolist(),
                                      byte_sums[final].tolist(), flights[final].tolist()):
        rows.append({"pid": p, "client": clients[cl + 1] or None, "source": sources[so],
                     "operation": full_table.values[o], "count": k,
                     "statuses": statuses[g], "latency_ns": latencies[g],
                     "bytes": b, "in_flight": f})
    return rows


def _groups(keys: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each row's group (rows with the same non-negative key values), and each group's key values,
    groups in order of their keys.  The keys are packed into one 64-bit number when they fit."""
    widths = [max(int(k.max()).bit_length(), 1) for k in keys]
    if sum(widths) > 63:
        stacked = np.stack([k.astype(np.int64) for k in keys], axis=1)
        uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
        return inverse.ravel(), [uniq[:, i] for i in range(len(keys))]
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for key, width in zip(keys, widths):
        packed = (packed << width) | key.astype(np.int64)
    uniq, inverse = np.unique(packed, return_inverse=True)
    values = []
    for width in reversed(widths):
        values.append(uniq & ((1 << width) - 1))
        uniq = uniq >> width
    return inverse.ravel(), values[::-1]


def _ranks(values: list[str]) -> np.ndarray:
    """Each value's place in sorted order."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.arange(len(values))
    return out


def client_sources(rows: list[dict[str, Any]]) -> dict[str, Counter]:
    """Calls per source of each client ("-": no client), in the order the operations table meets them."""
    per: dict[str, Counter] = {}
    for row in rows:
        per.setdefault(row["client"] or "-", Counter())[row["source"]] += row["count"]
    return per


def _latencies(c: dict[str, np.ndarray], group: np.ndarray, groups: int) -> list[dict[str, int] | None]:
    """min, median (as ``statistics.median`` then ``int``), p99 and max of each group's latencies."""
    timed = np.flatnonzero((c["exit_seq"] >= 0) & (c["exit_seq"] != c["enter_seq"].astype(np.int64)))
    latency = c["t_exit"][timed] - c["t_enter"][timed]
    g = group[timed]
    order = np.lexsort((latency, g))
    g, latency = g[order], latency[order]
    out: list[dict[str, int] | None] = [None] * groups
    if not len(g):
        return out
    first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    sizes = np.diff(np.append(first, len(g)))
    low, high = first + (sizes - 1) // 2, first + sizes // 2
    p99 = first + np.minimum(sizes - 1, (sizes * 0.99).astype(np.int64))
    for grp, least, lo, hi, p, most in zip(g[first].tolist(), latency[first].tolist(), latency[low].tolist(),
                                           latency[high].tolist(), latency[p99].tolist(),
                                           latency[first + sizes - 1].tolist()):
        median = lo if lo == hi else int((lo + hi) / 2)  # statistics.median's mean of the middle two, as int
        out[grp] = {"min": least, "median": median, "p99": p, "max": most}
    return out


def _statuses(group: np.ndarray, status: np.ndarray, names: list[str], groups: int) -> list[dict[str, int]]:
    """Each group's statuses and their counts, in order of each status's first call in the group
    (a Counter's order)."""
    width = int(status.max()) + 1
    uniq, first, counts = np.unique(group * width + status, return_index=True, return_counts=True)
    owner = uniq // width
    order = np.lexsort((first, owner))
    text = [names[i] for i in (uniq[order] % width).tolist()]
    counted = counts[order].tolist()
    bounds = np.searchsorted(owner[order], np.arange(groups + 1)).tolist()
    return [dict(zip(text[a:b], counted[a:b])) for a, b in zip(bounds, bounds[1:])]
