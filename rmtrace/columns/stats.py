"""``rmtrace stats``' operations table from the call table: one sort, then every group at once.

``operations`` groups the columns with numpy (no Python visit per call or per
group) into ``Operations``, a column per figure with one entry per group;
its ``rows`` are what ``rmtrace.analysis.stats.op_stats`` gives from the
session model's CallInfo list, as the JSON-ready dicts ``OpStats.to_dict``
makes, in the same order and with the statuses in the same order, made one
at a time as a writer takes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rmtrace.calls import CallState
from rmtrace.columns.arrays import BLOCK, distinct, group_numbers, group_rows
from rmtrace.columns.strings import NONE, Strings
from rmtrace.columns.table import STATES, CallTable
from rmtrace.record import Source, enum_name

_IN_FLIGHT = [STATES.index(CallState.IN_FLIGHT), STATES.index(CallState.UNFINISHED)]
IN_FLIGHT_STATUS, NO_STATUS = "in flight", "-"
"""How a call without a status name is counted: still in flight, or neither."""


def full_names(table: CallTable) -> tuple[np.ndarray, Strings[str]]:
    """Each row's ``CallInfo.full_name`` as an id into a string table of its own."""
    names = Strings[str]()
    width = len(table.details) + 1
    span = len(table.names) * width
    pairs: np.ndarray = table.columns["name"].astype(np.int32 if span < 1 << 31 else np.int64)
    pairs *= width
    pairs += table.columns["detail"]
    pairs -= NONE
    if span > _LOOKUP_MAX:  # too many (name, detail) pairs to look them up by number: sort them
        uniq, inverse = np.unique(pairs, return_inverse=True)
        pairs, slots = inverse.ravel(), np.arange(len(uniq))
    else:
        present = np.zeros(span, dtype=bool)
        present[pairs] = True
        uniq = slots = np.flatnonzero(present)
    ids = np.empty(int(slots[-1]) + 1 if len(slots) else 0, dtype=np.int32)
    for slot, pair in zip(slots.tolist(), uniq.tolist()):
        name, detail = table.names.values[pair // width], table.details.get(pair % width + NONE)
        ids[slot] = names.id(f"{name}({detail})" if detail else name)
    return ids[pairs], names


_LOOKUP_MAX = 1 << 24
"""Pairs of numbers looked up in a table indexed by them when there are at most so many (no sort)."""


class OperationsBlock(NamedTuple):
    """Consecutive groups of an ``Operations``, as Python lists: ``Operations``' columns, its indexes
    (client, source, operation) as they are there, the statuses as text."""

    pid: list[int]
    client: list[int]
    source: list[int]
    operation: list[int]
    calls: list[int]
    """``Operations.count`` (a tuple has a ``count``)."""
    bytes: list[int]
    in_flight: list[int]
    latency_min: list[int]
    """``Operations.latency``'s four figures, each a list of its own (a list per group cost 5x their tolist)."""
    latency_median: list[int]
    latency_p99: list[int]
    latency_max: list[int]
    timed: list[bool]
    status_bounds: list[int]
    """Group k's statuses are ``status_text[a:b]`` and ``status_count[a:b]`` for a, b = bounds[k], bounds[k + 1]."""
    status_text: list[str]
    status_count: list[int]


@dataclass
class Operations:
    """stats' operations table as columns, one entry per (pid, client, source, operation) group, in the
    order ``op_stats`` sorts them; ``rows`` makes each group's JSON-ready dict when it is asked for (a
    trace of 100M records has millions of groups: their dicts are never all alive at once)."""

    pid: np.ndarray
    client: np.ndarray
    """Indexes into ``clients`` (0: no client)."""
    source: np.ndarray
    operation: np.ndarray
    """Indexes into ``names``."""
    count: np.ndarray
    bytes: np.ndarray
    in_flight: np.ndarray
    latency: np.ndarray
    """(groups, 4): min, median, p99 and max; a group without a timed call has ``timed`` False."""
    timed: np.ndarray
    status_bounds: np.ndarray
    """Group g's statuses are ``status_text[a:b]`` and ``status_count[a:b]`` for a, b = bounds[g], bounds[g + 1]."""
    status_text: np.ndarray
    status_count: np.ndarray
    clients: list[str]
    sources: dict[int, str]
    names: list[str]
    status_names: list[str]

    def __len__(self) -> int:
        return len(self.pid)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.rows()

    def rows(self, block: int = 4096) -> Iterator[dict[str, Any]]:
        """Each group as ``OpStats.to_dict`` gives it, in order (``block`` groups' dicts made at once, each
        kind by a comprehension over the block's lists: 1M records' 74,200 rows 0.278 -> 0.244 s CPU against a
        loop that made each row's)."""
        clients, sources, names = self.clients, self.sources, self.names
        for b in self.blocks(block):
            text, counted, bounds = b.status_text, b.status_count, b.status_bounds
            statuses = [{text[a]: counted[a]} if z - a == 1 else dict(zip(text[a:z], counted[a:z]))
                        for a, z in zip(bounds, bounds[1:])]
            latency = [{"min": lo, "median": med, "p99": p99, "max": hi} if t else None
                       for lo, med, p99, hi, t in zip(b.latency_min, b.latency_median, b.latency_p99, b.latency_max,
                                                      b.timed)]
            yield from [{"pid": p, "client": clients[cl] or None, "source": sources[so], "operation": names[o],
                         "count": n, "statuses": st, "latency_ns": lat, "bytes": by, "in_flight": f}
                        for p, cl, so, o, n, st, lat, by, f in zip(b.pid, b.client, b.source, b.operation, b.calls,
                                                                   statuses, latency, b.bytes, b.in_flight)]

    def blocks(self, block: int = 4096, texts: Sequence[str] | None = None) -> Iterator[OperationsBlock]:
        """The groups ``block`` at a time, each figure as a Python list (one ``tolist`` per column and block);
        the statuses as ``texts`` gives them (by default ``status_names``: a writer passes them formatted)."""
        texts = self.status_names if texts is None else texts
        for at in range(0, len(self), block):
            end = min(at + block, len(self))
            bounds = self.status_bounds[at:end + 1]
            first, last = int(bounds[0]), int(bounds[-1])
            latency = self.latency[at:end]
            yield OperationsBlock(
                self.pid[at:end].tolist(), self.client[at:end].tolist(), self.source[at:end].tolist(),
                self.operation[at:end].tolist(), self.count[at:end].tolist(), self.bytes[at:end].tolist(),
                self.in_flight[at:end].tolist(), latency[:, 0].tolist(), latency[:, 1].tolist(),
                latency[:, 2].tolist(), latency[:, 3].tolist(),
                self.timed[at:end].tolist(),
                (bounds - first).tolist(), [texts[i] for i in self.status_text[first:last].tolist()],
                self.status_count[first:last].tolist())

    def client_sources(self) -> dict[str, Counter]:
        """Calls per source of each client ("-": no client), clients and their sources in the order the
        rows meet them (``client_sources`` of the rows)."""
        if not len(self):
            return {}
        width = max(self.sources) + 1
        pairs = self.client.astype(np.int64) * width + self.source
        uniq, first, inverse = np.unique(pairs, return_index=True, return_inverse=True)
        sums = np.bincount(inverse.ravel(), weights=self.count, minlength=len(uniq)).astype(np.int64)
        order = np.argsort(first, kind="stable")
        per: dict[str, Counter] = {}
        for pair, n in zip(uniq[order].tolist(), sums[order].tolist()):
            per.setdefault(self.clients[pair // width] or "-", Counter())[self.sources[pair % width]] += n
        return per


def operations(table: CallTable) -> Operations:
    """Per (pid, client, source, operation): count, statuses, latency, bytes and calls in flight."""
    c = table.columns
    full, full_table = full_names(table)
    clients = [table.client_id(i) or "" for i in range(-1, len(table.clients))]
    status_text = [*table.status_names.values, IN_FLIGHT_STATUS, NO_STATUS]
    if len(table) == 0:
        none = np.zeros(0, dtype=np.int64)
        return Operations(none, none, none, none, none, none, none, np.zeros((0, 4), dtype=np.int64),
                          np.zeros(0, dtype=bool), np.zeros(1, dtype=np.int64), none, none, clients, {},
                          full_table.values, status_text)
    # each column's pages are let go of as soon as it is read (a cached table is mapped: what a pass touches
    # stays resident until then), and each row-long array once used
    n = len(table)
    table.release(0, n, ("name", "detail"))
    order, bounds = group_rows(_read_once(table, ("pid", "client", "source"), full))
    firsts = order[bounds[:-1]]
    pid, client, source = (c[name][firsts] for name in ("pid", "client", "source"))
    table.release(0, n, ("pid", "client", "source"))
    client = client.astype(np.int64) + 1  # 0: no client, as ``clients`` counts them
    op = full[firsts]
    group = group_numbers(order, bounds)
    del full, order, firsts
    groups = len(pid)
    counts = np.bincount(group, minlength=groups)
    byte_sums = np.bincount(group, weights=c["bytes"], minlength=groups).astype(np.int64)  # exact to 2**53
    table.release(0, n, ("bytes",))
    in_flight = np.isin(c["state"], _IN_FLIGHT)
    table.release(0, n, ("state",))
    flights = np.bincount(group[in_flight], minlength=groups)
    status = c["status_name"].astype(np.int32)  # a call without a status name: in flight, or neither
    table.release(0, n, ("status_name",))
    unnamed = status < 0
    status[unnamed] = len(table.status_names) + 1
    status[unnamed & in_flight] = len(table.status_names)
    del in_flight, unnamed
    bounds, text, counted = _statuses(group, status, groups)
    del status
    latency, timed = _latencies(table, group, groups)
    del group
    sources = {int(v): enum_name(Source, int(v)) for v in distinct(source)}
    # the order op_stats sorts in: pid, client id, source name, most calls first, operation name
    rank = _ranks(clients), _ranks([sources.get(v, "") for v in range(max(sources) + 1)]), _ranks(full_table.values)
    final = np.lexsort((rank[2][op], -counts, rank[1][source], rank[0][client], pid))
    # the statuses of the groups in their final order: each group's run of them, moved as a block
    sizes = np.diff(bounds)[final]
    starts = np.repeat(bounds[:-1][final] - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
    moved = starts + np.arange(int(sizes.sum()))
    return Operations(pid[final], client[final], source[final], op[final], counts[final], byte_sums[final],
                      flights[final], latency[final], timed[final], np.concatenate(([0], np.cumsum(sizes))),
                      text[moved], counted[moved], clients, sources, full_table.values, status_text)


def operation_rows(table: CallTable) -> list[dict[str, Any]]:
    """``operations(table)``' rows, as a list."""
    return list(operations(table).rows())


def _read_once(table: CallTable, names: Sequence[str], *more: np.ndarray) -> Iterator[np.ndarray]:
    """Columns ``names`` of ``table`` one at a time, then ``more``: each column's pages are let go of when
    the next is asked for (``group_rows`` packs one column at a time)."""
    for name in names:
        yield table.columns[name]
        table.release(0, len(table), (name,))
    yield from more


def _ranks(values: list[str]) -> np.ndarray:
    """Each value's place in sorted order."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.arange(len(values))
    return out


def _latencies(table: CallTable, group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """min, median (as ``statistics.median`` then ``int``), p99 and max of each group's latencies, and
    whether the group has any (each column's pages let go of once read)."""
    c, n = table.columns, len(table)
    timed = c["exit_seq"] >= 0
    timed &= c["exit_seq"] != c["enter_seq"].view(np.int64)  # seqs < 2**63: a view, not a copy
    table.release(0, n, ("exit_seq", "enter_seq"))
    # the timed rows' latencies and groups a block of rows at a time, into arrays of their final size: no
    # row-long temporary, and no more than a block of each time column resident at once
    latency = np.empty(int(np.count_nonzero(timed)), dtype=np.int64)
    g = np.empty(len(latency), dtype=np.int64)  # int64: _sorted_pairs packs into it, not into a copy
    done = 0
    for at in range(0, n, BLOCK):
        end = min(at + BLOCK, n)
        mine = timed[at:end]
        k = done + int(np.count_nonzero(mine))
        np.subtract(c["t_exit"][at:end][mine], c["t_enter"][at:end][mine], out=latency[done:k])
        g[done:k] = group[at:end][mine]
        table.release(at, end, ("t_exit", "t_enter"))
        done = k
    del timed
    out = np.zeros((groups, 4), dtype=np.int64)
    has = np.zeros(groups, dtype=bool)
    if not len(g):
        return out, has
    g, latency = _sorted_pairs(g, latency)
    first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    owner = g[first]
    del g  # row-long: gone before the per-group arrays are made
    sizes = np.diff(np.append(first, len(latency)))
    lo, hi = latency[first + (sizes - 1) // 2], latency[first + sizes // 2]
    has[owner] = True
    out[owner, 0] = latency[first]
    # statistics.median's mean of the middle two, made an int (a float's truncation, as int() does)
    out[owner, 1] = np.where(lo == hi, lo, ((lo + hi) / 2).astype(np.int64))
    out[owner, 2] = latency[first + np.minimum(sizes - 1, (sizes * 0.99).astype(np.int64))]
    out[owner, 3] = latency[first + sizes - 1]
    return out, has


def _sorted_pairs(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(major, minor) pairs sorted by major then minor (``major`` non-negative, ``minor`` int64).  Packed
    into one int64 and sorted by value where they fit: several times faster than ``np.lexsort``'s
    indirect sort.  Both arrays are the caller's temporaries and their room is reused (an int64
    ``major`` is packed and sorted in place, then holds the majors; ``minor`` gets the minors back), so
    the sort's peak holds no row-long array beyond the two."""
    low = int(minor.min())
    bits = max(int(minor.max()) - low, 1).bit_length()
    if bits + max(int(major.max()), 1).bit_length() > 63:
        order = np.lexsort((minor, major))
        return major[order], minor[order]
    packed = major.astype(np.int64, copy=False)
    packed <<= bits
    minor -= low  # non-negative, below 2**bits
    packed |= minor
    packed.sort()
    np.bitwise_and(packed, (1 << bits) - 1, out=minor)
    minor += low
    packed >>= bits
    return packed, minor


def _statuses(group: np.ndarray, status: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each group's statuses and their counts, in order of each status's first call in the group (a
    Counter's order): (bounds of each group's run, status ids, counts).  The (group, status) pair and the
    row are packed into one int64 where they fit (one row-long array, sorted in place), else sorted as
    a pair."""
    width = int(status.max()) + 1
    key = group.astype(np.int64)
    key *= width
    key += status
    n = len(key)
    row_bits = max(n - 1, 1).bit_length()
    if row_bits + max(groups * width - 1, 1).bit_length() <= 63:
        key <<= row_bits
        for at in range(0, n, BLOCK):
            key[at:at + BLOCK] |= np.arange(at, min(at + BLOCK, n), dtype=np.int64)
        key.sort()
        new = np.empty(n, dtype=bool)
        new[:1] = True
        for at in range(1, n, BLOCK):
            end = min(at + BLOCK, n)
            np.not_equal(key[at:end] >> row_bits, key[at - 1:end - 1] >> row_bits, out=new[at:end])
        starts = np.flatnonzero(new)
        del new
        at_starts = key[starts]
        uniq, first = at_starts >> row_bits, at_starts & ((1 << row_bits) - 1)
    else:
        key, row = _sorted_pairs(key, np.arange(n, dtype=np.int64))
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        uniq, first = key[starts], row[starts]
        del row
    counts = np.diff(np.append(starts, n))
    del key
    owner = uniq // width
    order = np.lexsort((first, owner))
    bounds = np.searchsorted(owner[order], np.arange(groups + 1))
    return bounds, uniq[order] % width, counts[order]
