"""The parquet calls table's columns, a block of calls at a time, from the call table and the RM objects as columns.

Every column of ``rmtrace.export.parquet.SCHEMA`` but the stable object names
is a column of the call table (``rmtrace.columns.table``) or follows from one:
times, pid and tid, client, source, name, detail, status, state, latency, the
bytes, the handles.  The stable names (``objects``) are those of the objects
the call's handles named once the session fold had folded it: per handle, the newest object of the
call's client with that handle allocated by this call or an earlier one.  The
objects come as columns (``rmtrace.session.model.load_objects``: the objects'
fold over the table, or the cache's), and each handle's object is found by one
sorted search over (client, handle, allocating call) for the whole block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from rmtrace.columns.argspec import MAX_HANDLES
from rmtrace.columns.store import FAULT_AROUND_ROWS, release_rows
from rmtrace.columns.table import IN_FLIGHT_STATES, STATES, CallTable
from rmtrace.export.source import ExportInput
from rmtrace.record import Source, enum_name
from rmtrace.session.model import ObjectsModel, load_objects
from rmtrace.session.objects import ObjectColumns

_SEQ_BITS = 40
"""A sequence number's bits in a search key (a trace of 10^12 records), the object's handle key above them."""


class ObjectNames:
    """The stable name of the newest object of (client, handle) allocated at or before a record, asked
    for block after block of calls in order (``find``, then ``past``).

    The objects come in allocation order (``ObjectColumns``): a block's calls need only the objects
    allocated since the last block's (searched among themselves) and, for each (client, handle), the
    newest object before those.  What is kept is that newest object of each (client, handle) of the
    clients still to make a call, as two sorted arrays; a client's go once its last call is past.  A
    search over every object of the trace (sorted keys and their allocations) held some 24 bytes an
    object, 56 while it was made (19 and 44 MB at 10M records); this holds the live clients' objects.
    A name is made when a block's call asks for it, not for every object up front."""

    def __init__(self, table: CallTable, objects: ObjectColumns) -> None:
        index = {client: i for i, client in enumerate(objects.client_ids)}
        self.client_map = np.array([index.get(c.id, -1) for c in table.clients] + [-1], dtype=np.int64)
        """The table's client index (-1 last) -> the objects' one (-1: none)."""
        self.objects = objects
        seqs = objects.alloc_seq
        if not _ascending(seqs):
            raise ValueError("the objects are not in allocation order")
        if len(seqs) and int(seqs[-1]) >> _SEQ_BITS:
            raise ValueError("too many records for the objects' search keys")
        self._next = 0
        """The first object not taken in yet: those before it are allocated before the next query's record."""
        self._keys = np.zeros(0, dtype=np.int64)
        self._newest = np.zeros(0, dtype=np.int64)
        """Sorted keys (client, handle) of the live clients' objects taken in, and the newest object of each."""
        last = _last_rows(table)
        self._ends = np.argsort(last, kind="stable")  # the table's clients by their last row
        self._last = last[self._ends]
        self._ended = 0

    def find(self, client: np.ndarray, handle: np.ndarray, seq: np.ndarray) -> np.ndarray:
        """Per query (the table's client index, a handle, the call's first record): the object's stable
        name, or None.  A block's queries come after every earlier block's (by record)."""
        out = np.full(len(client), None, dtype=object)
        mine = self.client_map[client]
        ok = (mine >= 0) & (handle >= 0) & (handle < 1 << 32)
        if not ok.any():
            return out
        key, at_seq = _key(mine[ok], handle[ok]), seq[ok]
        objects = self.objects
        end = self._next + int(np.searchsorted(objects.alloc_seq[self._next:], int(at_seq.max()), side="right"))
        new_keys = _key(np.asarray(objects.client[self._next:end], dtype=np.int64),
                        np.asarray(objects.handle[self._next:end], dtype=np.int64))
        new_seqs = np.asarray(objects.alloc_seq[self._next:end], dtype=np.int64)
        # the objects allocated since the last block: the newest of the key at or before each query's record
        keys, key_ids = np.unique(new_keys, return_inverse=True)
        combined = key_ids.ravel().astype(np.int64) << _SEQ_BITS | new_seqs
        order = np.argsort(combined, kind="stable")  # equal keys: the later allocation last
        combined = combined[order]
        found = np.full(len(key), -1, dtype=np.int64)
        if len(keys):
            at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            below = np.searchsorted(combined, at.astype(np.int64) << _SEQ_BITS | at_seq, side="right") - 1
            hit = (keys[at] == key) & (below >= 0)
            hit[hit] = (combined[below[hit]] >> _SEQ_BITS) == at[hit]
            found[hit] = self._next + order[below[hit]]
        # else the newest before them (every object taken in was allocated before this block's records)
        rest = np.flatnonzero(found < 0)
        if len(rest) and len(self._keys):
            at = np.minimum(np.searchsorted(self._keys, key[rest]), len(self._keys) - 1)
            hit = self._keys[at] == key[rest]
            found[rest[hit]] = self._newest[at[hit]]
        if len(keys):
            last = np.append(np.flatnonzero(np.diff(combined >> _SEQ_BITS)), len(combined) - 1)
            kept = ~np.isin(self._keys, keys)
            merged = np.concatenate([self._keys[kept], keys])
            sort = np.argsort(merged)
            self._keys = merged[sort]
            self._newest = np.concatenate([self._newest[kept], self._next + order[last]])[sort]
        self._next = end
        rows = np.flatnonzero(ok)[found >= 0]
        wanted, inverse = np.unique(found[found >= 0], return_inverse=True)
        out[rows] = np.array(objects.stable_names(wanted.tolist()), dtype=object)[inverse.ravel()]
        for name in _OBJECT_COLUMNS:  # pages read of mapped columns (the base names' chains are anywhere)
            column = getattr(objects, name)
            release_rows(column, 0, len(column))
        return out

    def past(self, row: int) -> None:
        """Every call before ``row`` has been asked for: forget the objects of clients with no call after."""
        stop = int(np.searchsorted(self._last, row))
        if stop > self._ended:
            gone = self.client_map[self._ends[self._ended:stop]]
            self._ended = stop
            live = ~np.isin(self._keys >> 32, gone[gone >= 0])
            self._keys, self._newest = self._keys[live], self._newest[live]


_OBJECT_COLUMNS = ("client", "handle", "alloc_seq", "base", "class_name", "order")
"""The objects' columns ``ObjectNames`` reads."""
_SCAN_ROWS = 1 << 20
"""Items of a mapped column read at a time by a pass over all of it (its pages let go after each)."""


def _ascending(values: np.ndarray) -> bool:
    """Whether ``values`` never go down, read a part at a time."""
    for start in range(0, len(values), _SCAN_ROWS):
        part = np.asarray(values[max(start - 1, 0):start + _SCAN_ROWS])
        if np.any(part[1:] < part[:-1]):
            return False
        release_rows(values, start, start + _SCAN_ROWS)
    return True


def _last_rows(table: CallTable) -> np.ndarray:
    """Each of the table's clients' last row (-1: none), read a part of the client column at a time."""
    last = np.full(len(table.clients), -1, dtype=np.int64)
    column = table.columns["client"]
    for start in range(0, len(table), _SCAN_ROWS):
        part = np.asarray(column[start:start + _SCAN_ROWS])[::-1]
        clients, at = np.unique(part, return_index=True)
        mine = clients >= 0
        last[clients[mine]] = start + len(part) - 1 - at[mine]
        table.release(start, start + _SCAN_ROWS, ("client",))
    return last


def _key(client: np.ndarray, handle: np.ndarray) -> np.ndarray:
    return client << 32 | handle


def object_names(src: ExportInput) -> tuple[CallTable, ObjectNames]:
    """The trace's call table and its objects' stable names (both from the cache when it holds them)."""
    model = load_objects(src.reader, decoders=src.decoders)
    objects = model.columns if isinstance(model, ObjectsModel) else ObjectColumns.from_objects(
        model.object_list, [c.id for c in model.clients])
    # the objects' fold read the table's columns: let their pages go (a pass reads them again block by block)
    model.table.release(0, len(model.table))
    return model.table, ObjectNames(model.table, objects)


class CallColumns:
    """``SCHEMA``'s per-call columns of blocks of the table's rows."""

    def __init__(self, src: ExportInput, table: CallTable, names: ObjectNames) -> None:
        self.src, self.table, self.names = src, table, names
        self.offset = src.wall_offset_ns or 0
        self.clients = np.array([c.id for c in table.clients] + [None], dtype=object)
        self.sources = {s: enum_name(Source, s) for s in range(256)}
        self.states = np.array([s.value for s in STATES], dtype=object)

    def block(self, rows: np.ndarray) -> dict[str, Any]:
        """The columns of ``rows`` (consecutive), by name, with the wall-clock times as ``wall`` too."""
        t, c = self.table, self.table.columns
        col = {name: np.asarray(c[name][rows]) for name in _READ}
        enter = col["enter_seq"].astype(np.int64)
        t_enter = col["t_enter"]
        wall = t_enter + self.offset
        exit_seq = col["exit_seq"]
        returned = (exit_seq >= 0) & (exit_seq != enter)
        latency = np.where(returned, col["t_exit"] - t_enter, 0)
        in_flight = np.isin(col["state"], IN_FLIGHT_STATES)
        duration = np.where(in_flight, self.src.end_ns - t_enter, latency)
        ok = col["ok"]
        handles, objects = self._handles(rows, col, enter)
        self.names.past(int(rows[-1]) + 1)
        self.table.release(max(int(rows[0]) - FAULT_AROUND_ROWS, 0), int(rows[-1]) + 1, _READ)
        return {
            "wall": wall,
            "time": pa.array(wall // 1000, pa.timestamp("us", tz="UTC")),
            "time_ns": wall, "t_ns": t_enter - self.src.start_ns, "seq": enter,
            "pid": col["pid"].astype(np.int64), "tid": col["tid"].astype(np.int64),
            "client": self.clients[col["client"]],
            "source": [self.sources[s] for s in col["source"].tolist()],
            "op": _strings(t.names.values, col["name"]),
            "detail": _strings(t.details.values, col["detail"]),
            "status": _strings(t.status_names.values, col["status_name"]),
            "status_code": pa.array(col["status"], pa.int64(), mask=col["has_status"] == 0),
            "ok": pa.array(ok == 1, pa.bool_(), mask=ok < 0),
            "state": self.states[col["state"]],
            "latency_ns": pa.array(latency, pa.int64(), mask=~returned),
            "duration_ns": pa.array(duration, pa.int64(), mask=~(returned | in_flight)),
            "handles": handles, "objects": objects,
            "bytes": col["bytes"].astype(np.int64),
        }

    def _handles(self, rows: np.ndarray, col: dict[str, np.ndarray], enter: np.ndarray
                 ) -> tuple[list[list[tuple[str, int]]], list[list[tuple[str, str]]]]:
        """Each row's handles by name, and the stable names of the objects they name."""
        sets, extra = self.table.handle_sets.values, self.table.extra_handles
        values = list(zip(*(col[f"h{k}"].tolist() for k in range(MAX_HANDLES))))
        handles: list[list[tuple[str, int]]] = []
        at_row, names, clients, numbers = [], [], [], []
        for i, (row, hset, client) in enumerate(zip(rows.tolist(), col["handles"].tolist(), col["client"].tolist())):
            found = extra.get(row)
            items = list(found.items()) if found is not None else list(zip(sets[hset] if hset >= 0 else (), values[i]))
            handles.append(items)
            if client >= 0:
                for name, number in items:
                    at_row.append(i)
                    names.append(name)
                    clients.append(client)
                    numbers.append(number)
        stable = self.names.find(np.array(clients, dtype=np.int64), np.array(numbers, dtype=np.int64),
                                 enter[np.array(at_row, dtype=np.int64)])
        objects: list[list[tuple[str, str]]] = [[] for _ in handles]
        for i, name, text in zip(at_row, names, stable.tolist()):
            if text is not None:
                objects[i].append((name, text))
        return handles, objects


def _strings(values: Sequence[str], ids: np.ndarray) -> np.ndarray:
    """The strings ``ids`` index in ``values`` (-1: None)."""
    table = np.array([*values, None], dtype=object)
    return table[ids]


_READ = ("enter_seq", "t_enter", "exit_seq", "t_exit", "state", "pid", "tid", "client", "source", "name", "detail",
         "status_name", "status", "has_status", "ok", "bytes", "handles", *(f"h{k}" for k in range(MAX_HANDLES)))
"""The table's columns a block reads."""
