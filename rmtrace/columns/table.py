"""The call table: every call of a trace as one row of columns, built batch by batch from the chunks.

A row is what ``rmtrace.session.CallInfo`` holds: who (pid, tid, client),
what (source, op, name, detail), when (enter and exit seq and time), how it
went (status, its name, ok), the handles it names and the bytes of its
buffers.  ``CallTableBuilder`` makes the rows:

* the records of a batch of chunks become columns (``rmtrace.columns.scan``);
* enters and exits are paired by one sort on (pid, call_id, position), as
  ``rmtrace.calls.pair_calls`` pairs them with the default keyer, except that
  no call is cut short by a window: a call whose exit comes a million records
  later is still one call;
* a call's status, handles and name come from the columns for every
  operation the plan reads at fixed offsets (``rmtrace.columns.argspec``);
  the rest (GSP exchanges, sema messages, marks, users' decoders) are
  decoded by the decoders, one call at a time;
* GSP records are paired by the decoders' own GSP keyer, one record at a time
  (requests, answers and the parts of a long message; a few per call);
* each row gets its client as the session fold assigns them.

A call still open at the end of a batch gets its row at once, marked in
flight, and the row is rewritten when its exit comes; so ``update`` can be
called again as a live trace grows, and the table stays in order of each
call's first record, the order ``pair_calls`` yields calls in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from rmtrace.decoders import Decoded, DecoderSet, Level
from rmtrace.decoders.context import context
from rmtrace.decoders.gsp import GspPairing, codec_for
from rmtrace.decoders.ioctl import errno_name
from rmtrace.decoders.roles import UvmRole, roles

from rmtrace.calls import Call, CallState, Pairing
from rmtrace.columns.argspec import CLASS_MEMBER, MAX_HANDLES, Kind, OpPlan, Plan
from rmtrace.columns.arrays import distinct
from rmtrace.columns.batch import BATCH_RECORDS, batches
from rmtrace.columns.scan import ABSENT, ArgRegistry, KeyCache, Records, scan_chunks
from rmtrace.columns.stash import RecordStash, rereads
from rmtrace.columns.store import FileColumns, MemoryColumns, release_rows
from rmtrace.columns.strings import NONE, Strings
from rmtrace.record import Phase, Record, Source, SysOp, decode_record
from rmtrace.semantics.locks import UVM_LOCKS, LockKind
from rmtrace.session.entities import CallInfo
from rmtrace.trace import TraceReader

CALL_DTYPES: dict[str, str] = {
    "enter_seq": "<u8", "exit_seq": "<i8", "t_enter": "<i8", "t_exit": "<i8",
    "pid": "<u4", "tid": "<u4", "call_id": "<u8", "fd": "<i4", "source": "u1", "op": "<u4", "state": "u1",
    "name": "<i4", "detail": "<i4", "status": "<i8", "has_status": "u1", "status_name": "<i4", "ok": "i1",
    "bytes": "<u8", "client": "<i4", "handles": "<i4", "locks": "u1", "key": "<u4",
    **{f"h{k}": "<u4" for k in range(MAX_HANDLES)},
}
"""The call table's columns.  ``exit_seq`` is -1 when the call has no closing record (then ``t_exit``
means nothing); ``detail``, ``status_name``, ``client`` and ``handles`` are -1 for None, ``ok`` too;
``handles`` indexes the table's tuples of handle names, whose values are ``h0``, ``h1``, ...; ``locks``
indexes its tuples of the locks a call holds while in flight; ``key`` is the argument's member that names
the call or says its class (``argspec.ArgLayout.key``), 0 when it has none."""

STATES = tuple(CallState)
"""``state`` holds the index of the call's CallState here."""
IN_FLIGHT_STATES = (STATES.index(CallState.IN_FLIGHT), STATES.index(CallState.UNFINISHED))
"""The ``state`` values of calls still in flight."""
_STATE = {state: np.uint8(i) for i, state in enumerate(STATES)}

GPU_DEVICE_PREFIX = b"/dev/nvidia"
"""An open of a path starting so is the moment a process becomes a GPU client."""
GSP_SESSION_START = "GSP_INIT_DONE"
"""The GSP RPC whose call opens a new GSP session (a client of the host, when no process is known)."""

_ENTER, _EXIT = int(Phase.ENTER), int(Phase.EXIT)
_OPEN_SOURCES = (int(Source.SYS), int(Source.MARK))  # join their process's client, or open one (a GPU device)


class _Status(enum.IntEnum):
    """How a status name is spelt from its number."""

    NV = 1      # an NV_STATUS: the profile's name
    TEXT = 2    # the number itself
    ERRNO = 3   # an errno: its symbol
    RET = 4     # "ret N"
    SYSERR = 5  # a failed system call: "-1 ESYMBOL"


ClientKey = int | tuple[str, int]
"""What a client is keyed by: its process id, or ("gsp", session) for a GSP session with no process."""


@dataclass
class ClientRow:
    """A client as the call table found it: the row that created it, and what it is keyed by."""

    index: int
    id: str
    key: ClientKey
    pid: int
    row: int
    first_seq: int
    first_ns: int
    gsp_session: int | None


@dataclass(eq=False)
class _Open:
    """A GSP exchange whose answer has not come yet."""

    records: list[Record]
    resumed: bool = False
    row: int = -1
    closed: bool = False
    single: bool = False
    """A record that pairs with nothing (a host event, a message GSP pairing does not key)."""

    def call(self) -> Call:
        if self.single:
            return Call(tuple(self.records), CallState.SINGLE)
        if not self.closed:
            return Call(tuple(self.records), CallState.IN_FLIGHT)
        return Call(tuple(self.records), CallState.RESUMED if self.resumed else CallState.COMPLETE)


@dataclass
class ProcessTouch:
    """What a process's records say of it: which record of which row touched it first (row, place in
    the call, time), when its last record was, and its threads."""

    first: tuple[int, int, int]
    last_ns: int
    threads: set[int]


CLIENT_COLUMNS = ("pid", "gsp_key", "row", "first_seq", "first_ns", "gsp_session")
"""A client's columns (``ClientColumns``), int64 each: ``gsp_key`` is the session of a client keyed by one (-1:
keyed by its pid), ``gsp_session`` -1 for None."""
PROCESS_COLUMNS = ("pid", "first_row", "first_place", "first_ns", "last_ns", "threads_end")
"""A process's columns (``ProcessColumns``), int64 each: ``threads_end`` is where its threads end in the tids
column (they start where the previous process's end)."""
_PARTS = 4096
"""Clients or processes made at a time by an iteration over the columns."""


class ClientColumns(Sequence[ClientRow]):
    """A table's clients as columns (mapped from its cache entry), each ``ClientRow`` made when read: what a
    loaded table holds of its clients is their ids, not an object each (5,964 at 10M records: 1.8 MB)."""

    def __init__(self, ids: Sequence[str], columns: Mapping[str, np.ndarray]) -> None:
        self.ids = list(ids)
        self.columns = dict(columns)

    @staticmethod
    def columns_of(clients: Sequence[ClientRow]) -> dict[str, np.ndarray]:
        """``CLIENT_COLUMNS`` of ``clients`` (their ids apart)."""
        return {"pid": np.array([c.pid for c in clients], dtype=np.int64),
                "gsp_key": np.array([c.key[1] if isinstance(c.key, tuple) else -1 for c in clients], dtype=np.int64),
                "row": np.array([c.row for c in clients], dtype=np.int64),
                "first_seq": np.array([c.first_seq for c in clients], dtype=np.int64),
                "first_ns": np.array([c.first_ns for c in clients], dtype=np.int64),
                "gsp_session": np.array([-1 if c.gsp_session is None else c.gsp_session for c in clients],
                                        dtype=np.int64)}

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> ClientRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[ClientRow]: ...

    def __getitem__(self, index: int | slice) -> ClientRow | list[ClientRow]:
        if isinstance(index, slice):
            return list(self._made(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return next(self._made(index, index + 1, 1))

    def __iter__(self) -> Iterator[ClientRow]:
        for start in range(0, len(self), _PARTS):
            yield from self._made(start, min(start + _PARTS, len(self)), 1)

    def _made(self, start: int, stop: int, step: int) -> Iterator[ClientRow]:
        c = {name: self.columns[name][start:stop:step].tolist() for name in CLIENT_COLUMNS}
        for i, pid, gsp_key, row, seq, ns, session in zip(range(start, stop, step), c["pid"], c["gsp_key"], c["row"],
                                                         c["first_seq"], c["first_ns"], c["gsp_session"]):
            yield ClientRow(i, self.ids[i], pid if gsp_key < 0 else ("gsp", gsp_key), pid, row, seq, ns,
                            None if session < 0 else session)


class ProcessColumns(Mapping[int, ProcessTouch]):
    """A table's processes as columns (mapped from its cache entry), by pid in the order the table first
    touched them, each ``ProcessTouch`` made when read (9,939 at 10M records held 5 MB as objects)."""

    def __init__(self, columns: Mapping[str, np.ndarray], tids: np.ndarray) -> None:
        self.columns = dict(columns)
        self.tids = tids
        self._by_pid: np.ndarray | None = None

    @staticmethod
    def columns_of(processes: Mapping[int, ProcessTouch]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``PROCESS_COLUMNS`` of ``processes``, and their threads one after another (each process's sorted)."""
        touches = list(processes.values())
        threads = [sorted(t.threads) for t in touches]
        columns = {"pid": np.array(list(processes), dtype=np.int64),
                   **{name: np.array([t.first[k] for t in touches], dtype=np.int64)
                      for k, name in enumerate(("first_row", "first_place", "first_ns"))},
                   "last_ns": np.array([t.last_ns for t in touches], dtype=np.int64),
                   "threads_end": np.cumsum([len(t) for t in threads], dtype=np.int64)}
        return columns, np.array([tid for t in threads for tid in t], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.columns["pid"])

    def __getitem__(self, pid: int) -> ProcessTouch:
        if self._by_pid is None:
            self._by_pid = np.argsort(self.columns["pid"], kind="stable")
        pids = self.columns["pid"]
        at = int(np.searchsorted(pids, pid, sorter=self._by_pid))
        if at == len(pids) or int(pids[self._by_pid[at]]) != pid:
            raise KeyError(pid)
        i = int(self._by_pid[at])
        return next(self._made(i, i + 1))[1]

    def __iter__(self) -> Iterator[int]:
        for start in range(0, len(self), _PARTS):
            yield from self.columns["pid"][start:start + _PARTS].tolist()

    def items(self) -> ItemsView[int, ProcessTouch]:
        return _ProcessItems(self)

    def made(self) -> Iterator[tuple[int, ProcessTouch]]:
        """(pid, ProcessTouch) of each process, in order, made a part at a time."""
        for start in range(0, len(self), _PARTS):
            yield from self._made(start, min(start + _PARTS, len(self)))

    def _made(self, start: int, stop: int) -> Iterator[tuple[int, ProcessTouch]]:
        c = {name: self.columns[name][start:stop].tolist() for name in PROCESS_COLUMNS}
        base = int(self.columns["threads_end"][start - 1]) if start else 0
        tids = self.tids[base:c["threads_end"][-1] if c["threads_end"] else base].tolist()
        at = 0
        for pid, row, place, first_ns, last_ns, end in zip(c["pid"], c["first_row"], c["first_place"], c["first_ns"],
                                                           c["last_ns"], c["threads_end"]):
            yield pid, ProcessTouch((row, place, first_ns), last_ns, set(tids[at:end - base]))
            at = end - base


class _ProcessItems(ItemsView[int, ProcessTouch]):
    """``ProcessColumns.items()``: its processes made a part at a time, not looked up one by one."""

    _mapping: ProcessColumns

    def __iter__(self) -> Iterator[tuple[int, ProcessTouch]]:
        return self._mapping.made()


Extras = dict[int, tuple[dict[str, int] | None, tuple[tuple[int, int], ...] | None]]
"""Of calls decoded one by one, what does not fit the columns, by their index among the calls: handles
(more than the handle columns, or not 32-bit numbers), and (seq, time) of every record when there are
more than the first and the exit."""


@dataclass
class CallTable:
    """The rows so far, their string tables and their clients."""

    columns: dict[str, np.ndarray]
    names: Strings[str]
    details: Strings[str]
    status_names: Strings[str]
    handle_sets: Strings[tuple[str, ...]]
    lock_sets: Strings[tuple[LockKind, ...]]
    clients: Sequence[ClientRow]
    """The clients, in order of their index (``ClientColumns`` when loaded from the cache)."""
    processes: Mapping[int, ProcessTouch] = field(default_factory=dict)
    """By pid (``ProcessColumns`` when loaded from the cache)."""
    extra_handles: dict[int, dict[str, int]] = field(default_factory=dict)
    """Rows whose handles do not fit the handle columns (more of them, or not 32-bit numbers)."""
    members: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    """(seq, time) of every record of the rows made of more than their first record and their exit
    (a GSP exchange in several parts)."""
    stash: RecordStash | None = None
    """The records the fold will read again, kept as the build scanned them (``rmtrace.columns.stash``):
    only on a table just built for a fold, which lets it go when done."""

    def records_of(self, row: int) -> tuple[tuple[int, int], ...]:
        """(seq, time) of each record of row ``row``, in order."""
        found = self.members.get(row)
        if found is not None:
            return found
        c = self.columns
        first = (int(c["enter_seq"][row]), int(c["t_enter"][row]))
        exit_seq = int(c["exit_seq"][row])
        return (first,) if exit_seq < 0 or exit_seq == first[0] else (first, (exit_seq, int(c["t_exit"][row])))

    def __len__(self) -> int:
        return len(self.columns["enter_seq"])

    def client_id(self, index: int) -> str | None:
        if index < 0:
            return None
        return self.clients.ids[index] if isinstance(self.clients, ClientColumns) else self.clients[index].id

    def client_index(self, client_id: str) -> int:
        """The index ``client`` holds for ``client_id`` (``NONE`` when the table has no such client)."""
        return next((i for i, found in enumerate(self.client_ids()) if found == client_id), NONE)

    def client_ids(self) -> list[str]:
        """Each client's id, by index."""
        clients = self.clients
        return list(clients.ids) if isinstance(clients, ClientColumns) else [c.id for c in clients]

    def open_rows(self) -> np.ndarray:
        """The rows of calls still in flight."""
        found = np.flatnonzero(np.isin(self.columns["state"], IN_FLIGHT_STATES))
        self.release(0, len(self), ("state",))
        return found

    def record_clients(self) -> tuple[np.ndarray, np.ndarray]:
        """(seqs, client indexes) of every record of a call that has a client, by seq."""
        c = self.columns
        mine = c["client"] >= 0
        irregular = np.zeros(len(self), dtype=bool)
        irregular[list(self.members)] = True
        regular = mine & ~irregular
        second = regular & (c["exit_seq"] >= 0) & (c["exit_seq"] != c["enter_seq"].astype(np.int64))
        parts = [(seq, int(c["client"][row])) for row, members in self.members.items() if c["client"][row] >= 0
                 for seq, _ in members]
        seqs = np.concatenate([c["enter_seq"][regular].astype(np.int64), c["exit_seq"][second],
                               np.array([seq for seq, _ in parts], dtype=np.int64)])
        owners = np.concatenate([c["client"][regular], c["client"][second],
                                 np.array([owner for _, owner in parts], dtype=np.int32)])
        self.release(0, len(self), ("client", "exit_seq", "enter_seq"))
        order = np.argsort(seqs, kind="stable")
        return seqs[order], owners[order]

    def info(self, row: int) -> CallInfo:
        """Row ``row`` as the session model's CallInfo."""
        return self.infos_at(np.array([row]))[0]

    def infos(self, block: int = 65_536) -> Iterator[CallInfo]:
        for start in range(0, len(self), block):
            yield from self.infos_at(np.arange(start, min(start + block, len(self))))

    def infos_at(self, rows: np.ndarray) -> list[CallInfo]:
        """The CallInfo of each of ``rows`` (column by column: numpy's cost per call is paid once)."""
        return self.infos_and_decoded(rows, decoded=False)[0]

    def infos_and_decoded(self, rows: np.ndarray, decoded: bool = True) -> tuple[list[CallInfo], list[Decoded]]:
        """The CallInfo of each of ``rows``, and (with ``decoded``) the call-level ``Decoded`` the decoders
        would make of it as far as the columns say: name, detail, status and handles (no summary
        arguments, no buffers).  Both share one handles dict per row."""
        c = {name: column.tolist() for name, column in self.gather(rows, _INFO_COLUMNS).items()}
        names, details, statuses = self.names.values, self.details.values, self.status_names.values
        locks, clients = self.lock_sets.values, self.client_ids()
        in_flight = set(IN_FLIGHT_STATES)
        infos, decodes = [], []
        for i, row in enumerate(rows.tolist()):
            exit_seq, ok, detail, status_name = c["exit_seq"][i], c["ok"][i], c["detail"][i], c["status_name"][i]
            client = c["client"][i]
            handles = self._handles(row, c, i)
            name = names[c["name"][i]]
            detail_text = details[detail] if detail >= 0 else None
            status = c["status"][i] if c["has_status"][i] else None
            status_text = statuses[status_name] if status_name >= 0 else None
            okay = None if ok < 0 else bool(ok)
            infos.append(CallInfo(
                pid=c["pid"][i], tid=c["tid"][i], call_id=c["call_id"][i], client_id=clients[client] if client >= 0 else None,
                source=c["source"][i], op=c["op"][i], name=name, detail=detail_text, status=status,
                status_name=status_text, ok=okay, enter_seq=c["enter_seq"][i], exit_seq=None if exit_seq < 0 else exit_seq,
                t_enter=c["t_enter"][i], t_exit=None if exit_seq < 0 else c["t_exit"][i],
                in_flight=c["state"][i] in in_flight, handles=handles, bytes=c["bytes"][i], locks=locks[c["locks"][i]]))
            if decoded:
                decodes.append(Decoded(c["source"][i], c["op"][i], name, detail_text, status=status,
                                       status_name=status_text, ok=okay, handles=handles, level=Level.CALL))
        return infos, decodes

    def gather(self, rows: np.ndarray, names: Iterable[str]) -> dict[str, np.ndarray]:
        """Columns ``names`` at ``rows``, read one column at a time, the pages of each mapped one let
        go once read: rows spread over the table touch every page of a column, and of every column gathered
        at once they were the folds' peaks (30-60 MB at 1M records)."""
        span = (int(rows.min()), int(rows.max()) + 1) if len(rows) else (0, 0)
        out = {}
        for name in names:
            out[name] = self.columns[name][rows]
            self.release(*span, (name,))
        return out

    def release(self, start: int, end: int, names: Iterable[str] | None = None) -> None:
        """Let go of the pages of rows [start, end) of columns mapped from the cache (``names``: of those
        columns only): the kernel keeps them in its page cache, the process no longer holds them (a pass
        over the table stays small)."""
        for column in (self.columns.values() if names is None else (self.columns[name] for name in names)):
            release_rows(column, start, end)

    def _handles(self, row: int, c: dict[str, list], i: int) -> dict[str, int]:
        extra = self.extra_handles.get(row)
        if extra is not None:
            return dict(extra)
        names = self.handle_sets.values[c["handles"][i]] if c["handles"][i] >= 0 else ()
        return {name: c[f"h{k}"][i] for k, name in enumerate(names)}


class TableCalls(Sequence[CallInfo]):
    """A call table's rows as a sequence of CallInfo, each made when it is asked for."""

    def __init__(self, table: CallTable) -> None:
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    @overload
    def __getitem__(self, index: int) -> CallInfo: ...
    @overload
    def __getitem__(self, index: slice) -> list[CallInfo]: ...

    def __getitem__(self, index: int | slice) -> CallInfo | list[CallInfo]:
        if isinstance(index, slice):
            return self.table.infos_at(np.arange(len(self.table))[index])
        if index < 0:
            index += len(self.table)
        if not 0 <= index < len(self.table):
            raise IndexError(index)
        return self.table.info(index)

    def __iter__(self) -> Iterator[CallInfo]:
        return self.table.infos()


@dataclass
class _LayoutTables:
    """Per argument layout id (``ArgRegistry``), and one more entry for "no layout": the table's id of its
    handle names (NONE for none), whether it has a key member, whether that names the call, a status."""

    handles: np.ndarray
    has_key: np.ndarray
    named: np.ndarray
    has_status: np.ndarray


class CallTableBuilder:
    """Builds a trace's call table from its chunks; ``update`` picks up chunks added since."""

    def __init__(self, reader: TraceReader, decoders: DecoderSet, batch_records: int = BATCH_RECORDS,
                 rows: MemoryColumns | FileColumns | None = None, client_ids: Mapping[int, str] | None = None,
                 stash: bool = False, params: bool = False) -> None:
        """``client_ids``: pid -> client id of the clients a replay trace was made for
        (``rmtrace.session.model.client_ids``); any other client is numbered by its first row.  ``stash``:
        keep the records the fold will read again (``CallTable.stash``), for a table a fold reads next;
        ``params``: that fold reads params too (``rmtrace.columns.stash.params_exits``)."""
        self.reader = reader
        self.decoders = decoders
        self.batch_records = batch_records
        self.plan = Plan(decoders)
        self.args = ArgRegistry(self.plan)
        self.status_namer = context(decoders.profile).names  # the names every built-in ioctl decoder uses
        self.names: Strings[str] = Strings()
        self.details: Strings[str] = Strings()
        self.status_names: Strings[str] = Strings()
        self.handle_sets: Strings[tuple[str, ...]] = Strings()
        self.lock_sets: Strings[tuple[LockKind, ...]] = Strings([()])
        self.client_ids = dict(client_ids or {})
        self._planned = set(self.client_ids.values())
        self._taken: set[str] = set()  # the ids of self.clients (a set: a trace of 100M records has 60,000)
        # room for a row per record (a call has one at least), reserved but not touched: numpy's zeros are
        # pages the kernel maps only when written, so the table holds its rows' bytes and is never copied
        # to grow (a live trace that outgrows it doubles)
        self.rows = rows if rows is not None else MemoryColumns(CALL_DTYPES, max(4096, reader.record_count))
        self.clients: list[ClientRow] = []
        self._client_of: dict[ClientKey, int] = {}
        self.extra_handles: dict[int, dict[str, int]] = {}
        self.members: dict[int, tuple[tuple[int, int], ...]] = {}
        self.processes: dict[int, ProcessTouch] = {}
        self.gsp_session = 0
        self.stash = RecordStash() if stash else None
        self._rereads = rereads(self.plan, roles(decoders.profile), params) if stash else None
        self.next_chunk = 0
        self.next_pos = 0
        self._room: bytearray | None = None  # the batch's decompressed chunks, reused from batch to batch
        self._pending: Records | None = None  # enters whose exit has not come, with their rows
        self._pending_rows = np.zeros(0, dtype=np.int64)
        self._kept: dict[int, Record] = {}  # of those, the records the decoders will decode, by position
        codec = codec_for(decoders.profile)
        self._gsp = GspPairing(codec) if codec is not None else None
        self._open: dict[Hashable, _Open] = {}
        self._settled: list[_Open] = []  # exchanges that ended (answered or superseded) in this batch
        self._kinds = KeyCache(lambda key: int(self._op(key).kind))
        self._op_names = KeyCache(lambda key: self.names.id(self._op(key).name))
        self._results = KeyCache(lambda key: _RESULTS.index(self._op(key).result))
        uvm = roles(decoders.profile).uvm
        self._locks = KeyCache(lambda key: self.lock_sets.id(
            UVM_LOCKS[uvm.get(key & 0xFFFFFFFF, UvmRole.OTHER)] if key >> 32 == Source.UVM else ()))
        self._status_ids = KeyCache(self._status_name)
        self._status_ok = KeyCache(self._nv_ok)
        self._keyed: list[int] = []  # (source, op) of operations named by a member of their argument
        self._keyed_ops = KeyCache(self._keyed_op)
        self._detail_of = KeyCache(self._detail)
        self._tables: _LayoutTables | None = None

    def _op(self, key: int) -> OpPlan:
        return self.plan.op(key >> 32, key & 0xFFFFFFFF)

    # -- driving ------------------------------------------------------------------------

    def update(self) -> int:
        """Fold the chunks not seen yet; returns how many rows were added."""
        before = self.rows.n
        for indices in batches(self.reader.chunks, self.next_chunk, self.batch_records):
            self.next_chunk = indices.stop
            self._batch(indices)
        # the batch buffer is room for the next batch only: let it go now (the builder's key caches hold
        # it in a reference cycle, so it would outlive the builder until a collection; a live trace's
        # next update makes one the size of what it reads)
        self._room = None
        return self.rows.n - before

    def table(self) -> CallTable:
        """The rows so far.  A later ``update`` may rewrite the rows of calls that were still open.  The
        stash goes to the table and the builder keeps no more (its key caches hold it in a reference cycle,
        which the fold, with the collector held, would keep alive with the stash until the fold's end)."""
        stash, self.stash = self.stash, None
        return CallTable(self.rows.view(), self.names, self.details, self.status_names, self.handle_sets,
                         self.lock_sets, self.clients, self.processes, self.extra_handles, self.members, stash)

    # -- one batch ----------------------------------------------------------------------

    def _batch(self, indices: range) -> None:
        self._room, spans = self.reader.read_chunks(indices, self._room)
        views = {span.index: memoryview(self._room)[span.start:span.end] for span in spans}
        batch = scan_chunks(self._room, spans, self.args, self.next_pos, GPU_DEVICE_PREFIX)
        if self.stash is not None and self._rereads is not None:
            seq, chunk, offset = batch["seq"], batch["chunk"], batch["offset"]
            for i in np.flatnonzero(self._rereads(batch)).tolist():
                self.stash.add(int(seq[i]), views[int(chunk[i])], int(offset[i]))
        self.next_pos += len(batch["pos"])
        pending = self._pending
        npend = 0 if pending is None else len(pending["pos"])
        recs = batch if pending is None else {k: np.concatenate([pending[k], batch[k]]) for k in batch}

        def record(i: int) -> Record:
            if i < npend:
                return self._kept[int(recs["pos"][i])]
            return decode_record(views[int(recs["chunk"][i])], int(recs["offset"][i]))

        n = len(recs["pos"])
        gsp = (recs["source"] == Source.GSP) if self._gsp is not None else np.zeros(n, dtype=bool)
        pairable = ((recs["phase"] == _ENTER) | (recs["phase"] == _EXIT)) & ~gsp
        partner, last_of_key = _pair(recs, np.flatnonzero(pairable))
        is_enter = pairable & (recs["phase"] == _ENTER)
        closing = np.zeros(n, dtype=bool)
        closing[partner[partner >= 0]] = True

        fresh = np.zeros(n, dtype=bool)  # the first records of calls starting in this batch
        fresh[npend:] = ~gsp[npend:] & ~closing[npend:]
        first = np.flatnonzero(fresh)
        second = partner[first]
        state = np.full(len(first), _STATE[CallState.SINGLE])
        state[is_enter[first]] = _STATE[CallState.IN_FLIGHT]
        state[is_enter[first] & (second >= 0)] = _STATE[CallState.COMPLETE]
        state[pairable[first] & ~is_enter[first]] = _STATE[CallState.RESUMED]
        vector, extras = self._rows(recs, first, second, state, record)
        vector["opens_gpu"] = recs["path_match"][first] & (vector["source"] == Source.SYS) & (vector["op"] == SysOp.OPEN)
        exchanges, members = self._exchanges(recs, np.flatnonzero(gsp[npend:]) + npend, record)
        first_rows = self._append(recs["pos"][first], vector, extras, exchanges)

        done = np.flatnonzero(is_enter[:npend] & (partner[:npend] >= 0))  # calls that started before, ended now
        if done.size:
            values, extras = self._rows(recs, done, partner[done], np.full(done.size, _STATE[CallState.COMPLETE]),
                                        record)
            del values["client"]
            self._patch(self._pending_rows[done], values, extras)
        self._patch_exchanges()

        still = is_enter & (partner < 0) & last_of_key  # what stays open: the newest enter of a key, unanswered
        rows = np.full(n, -1, dtype=np.int64)  # the row of each record, and where in its call it is
        place = np.zeros(n, dtype=np.int64)
        rows[:npend] = self._pending_rows
        rows[first] = first_rows
        enters = np.flatnonzero(partner >= 0)
        rows[partner[enters]], place[partner[enters]] = rows[enters], 1
        for i, item, k in members:
            rows[i], place[i] = item.row, k
        self._touch(recs, npend, rows, place)
        for i in np.flatnonzero(~still[:npend]).tolist():
            self._kept.pop(int(recs["pos"][i]), None)
        keep = np.flatnonzero(still)
        python = self._kinds(_op_keys(recs, keep)) == Kind.PYTHON
        for i in keep[python & (keep >= npend)].tolist():
            self._kept[int(recs["pos"][i])] = record(i)
        self._pending = {k: v[keep] for k, v in recs.items()}
        self._pending_rows = rows[keep]

    def _touch(self, recs: Records, npend: int, rows: np.ndarray, place: np.ndarray) -> None:
        """What the new records say of their processes: which row and record of it touched each first,
        when, the last time, the threads (as ``Folder._touch_process`` sees them, call by call)."""
        if len(rows) <= npend:
            return
        pid, tid, time = recs["pid"][npend:], recs["tid"][npend:], recs["time"][npend:]
        row, k = rows[npend:], place[npend:]
        order = np.lexsort((k, row, pid))
        pid, tid, time, row, k = pid[order], tid[order], time[order], row[order], k[order]
        starts = np.flatnonzero(np.concatenate(([True], pid[1:] != pid[:-1])))
        latest = np.maximum.reduceat(time, starts)
        pairs = distinct((pid.astype(np.uint64) << np.uint64(32)) | tid.astype(np.uint64))
        threads: dict[int, set[int]] = {}
        for pair in pairs.tolist():
            threads.setdefault(pair >> 32, set()).add(pair & 0xFFFFFFFF)
        for at, last in zip(starts.tolist(), latest.tolist()):
            p = int(pid[at])
            found = self.processes.get(p)
            first = (int(row[at]), int(k[at]), int(time[at]))
            if found is None:
                self.processes[p] = ProcessTouch(first, last, threads[p])
            else:
                found.first = min(found.first, first)
                found.last_ns = max(found.last_ns, last)
                found.threads |= threads[p]

    def _append(self, positions: np.ndarray, vector: dict[str, np.ndarray], extras: Extras,
                exchanges: list[tuple[int, _Open]]) -> np.ndarray:
        """Add the rows of calls starting in this batch, merged in order of their first record with the
        GSP exchanges starting in it; returns the rows the ``vector`` calls got."""
        base = self.rows.n
        n = len(positions)
        if exchanges:
            calls = [item.call() for _, item in exchanges]
            decoded, gsp_extras = self._decoded_rows(calls)
            decoded["opens_gpu"] = np.zeros(len(calls), dtype=bool)
            order = np.argsort(np.concatenate([positions, [pos for pos, _ in exchanges]]), kind="stable")
            merged = {k: np.concatenate([vector[k], decoded[k]])[order] for k in vector}
            row_of = np.empty(len(order), dtype=np.int64)
            row_of[order] = base + np.arange(len(order))
            for k, (_, item) in enumerate(exchanges):
                item.row = int(row_of[n + k])
            self._settled = [item for item in self._settled if item.row < base]  # new ones were just written
            self._keep_extras(row_of[n:], gsp_extras)
        else:
            merged = vector
            row_of = base + np.arange(n)
        self._keep_extras(row_of[:n], extras)
        merged["client"] = self._assign_clients(merged, base)
        del merged["opens_gpu"]
        self.rows.append(merged)
        return row_of[:n]

    def _patch(self, rows: np.ndarray, values: dict[str, np.ndarray], extras: Extras) -> None:
        for row in rows.tolist():
            self.extra_handles.pop(row, None)
            self.members.pop(row, None)
        self._keep_extras(rows, extras)
        self.rows.patch(rows, values)

    def _keep_extras(self, rows: np.ndarray, extras: Extras) -> None:
        for i, (handles, members) in extras.items():
            row = int(rows[i])
            if handles is not None:
                self.extra_handles[row] = handles
            if members is not None:
                self.members[row] = members

    # -- columns of calls paired here ----------------------------------------------------

    def _rows(self, recs: Records, first: np.ndarray, second: np.ndarray, state: np.ndarray,
              record: Callable[[int], Record]) -> tuple[dict[str, np.ndarray], Extras]:
        """The columns of calls made of record ``first`` and (where it is >= 0) record ``second``."""
        n = len(first)
        has2 = second >= 0
        two = np.where(has2, second, first)
        out = _empty(n)
        for name in ("pid", "tid", "call_id", "fd", "source", "op"):
            out[name] = recs[name][first]
        out["enter_seq"] = recs["seq"][first]
        out["t_enter"] = recs["time"][first]
        out["state"] = state
        closed = has2 & ((state == _STATE[CallState.COMPLETE]) | (state == _STATE[CallState.RESUMED]))
        single = state == _STATE[CallState.SINGLE]
        seq, time = recs["seq"].astype(np.int64), recs["time"]
        out["exit_seq"] = np.where(closed, seq[two], np.where(single, seq[first], -1))
        out["t_exit"] = np.where(closed, time[two], np.where(single, time[first], 0))
        out["bytes"] = recs["bytes"][first] + np.where(has2, recs["bytes"][two], 0)
        keys = _op_keys(recs, first)
        kinds = self._kinds(keys)
        out["name"] = self._op_names(keys)
        out["locks"] = self._locks(keys)
        ioctl = np.flatnonzero(kinds == Kind.IOCTL)
        if ioctl.size:
            self._ioctl(recs, first[ioctl], second[ioctl], out, ioctl)
        sys = np.flatnonzero(kinds == Kind.SYSCALL)
        if sys.size:
            self._syscall(recs, first[sys], second[sys], keys[sys], out, sys)
        python = np.flatnonzero(kinds == Kind.PYTHON)
        extras: Extras = {}
        if python.size:
            calls = [Call(tuple(record(i) for i in ((f,) if s < 0 else (f, s))), STATES[st])
                     for f, s, st in zip(first[python].tolist(), second[python].tolist(), state[python].tolist())]
            decoded, found = self._decoded_rows(calls)
            for name in _DECODED:
                out[name][python] = decoded[name]
            extras = {int(python[i]): value for i, value in found.items()}
        return out, extras

    def _ioctl(self, recs: Records, first: np.ndarray, second: np.ndarray, out: dict[str, np.ndarray],
               rows: np.ndarray) -> None:
        """An ioctl's status, handles and detail as ``IoctlOp.decode`` works them out, from the columns."""
        has2 = second >= 0
        two = np.where(has2, second, first)
        sides = {}
        for side in ("b", "a"):
            mine, theirs = recs[f"{side}_arg"][first], np.where(has2, recs[f"{side}_arg"][two], ABSENT)
            use2 = (mine == ABSENT) & (theirs != ABSENT)  # the first record holding such a buffer
            sides[side] = (np.where(use2, theirs, mine), np.where(use2, two, first))
        (b_arg, b_rec), (a_arg, a_rec) = sides["b"], sides["a"]
        exit_rec = np.where(recs["phase"][first] == _EXIT, first,
                            np.where(has2 & (recs["phase"][two] == _EXIT), two, -1))
        has_exit = exit_rec >= 0
        ex = np.where(has_exit, exit_rec, first)
        ret, err = recs["ret"][ex], recs["err"][ex].astype(np.int64)
        returned = has_exit & (ret >= 0) & (err == 0)
        after = (a_arg >= 0) & returned
        use_a = after | ((b_arg < 0) & (a_arg >= 0))
        main_rec = np.where(use_a, a_rec, b_rec)
        none = len(self.args.layouts)  # the index of the "no layout" entry appended to each per-layout table
        main = np.where(use_a, a_arg, b_arg)
        main = np.where(main >= 0, main, none)
        tables = self._layout_tables()
        out["handles"][rows] = tables.handles[main]
        handles = np.where(use_a[:, None], recs["a_h"][main_rec], recs["b_h"][main_rec])
        for k in range(MAX_HANDLES):
            out[f"h{k}"][rows] = handles[:, k]
        key = np.where(use_a, recs["a_key"][main_rec], recs["b_key"][main_rec])
        out["key"][rows] = np.where(tables.has_key[main], key, 0)
        out["detail"][rows] = self._detail_ids(out["source"][rows], out["op"][rows], key, tables.named[main])
        has_status = tables.has_status[main] & after
        status = np.where(has_status, recs["a_status"][a_rec], ret)
        kind = np.select([has_exit & ~returned & (err != 0), has_exit & ~returned, has_status, after, has_exit],
                         [_Status.ERRNO, _Status.RET, _Status.NV, _Status.TEXT, _Status.RET], 0)
        names, ok = self._status_names(kind, np.select([kind == _Status.ERRNO, kind == _Status.NV], [err, status], ret))
        out["status_name"][rows] = names
        out["ok"][rows] = np.where(kind == _Status.NV, ok, np.where(returned, 1, np.where(has_exit, 0, -1)))
        out["has_status"][rows] = after
        out["status"][rows] = np.where(after, status, 0)

    def _layout_tables(self) -> _LayoutTables:
        """What ``_ioctl`` looks up per argument layout id, made again only when a batch added layouts."""
        tables = self._tables
        if tables is None or len(tables.has_key) != len(self.args.layouts) + 1:
            layouts = self.args.layouts
            tables = self._tables = _LayoutTables(
                np.array([self.handle_sets.id(self.args.handle_sets[i]) for i in self.args.handle_set] + [NONE],
                         dtype=np.int32),
                np.array([layout.key is not None for layout in layouts] + [False]),
                np.array([layout.names_call for layout in layouts] + [False]),
                np.array(self.args.has_status + [False]))
        return tables

    def _syscall(self, recs: Records, first: np.ndarray, second: np.ndarray, keys: np.ndarray,
                 out: dict[str, np.ndarray], rows: np.ndarray) -> None:
        """A system call's result as ``SysCall.decode`` works it out, from the header."""
        has2 = second >= 0
        rec = np.where(recs["phase"][first] == _EXIT, first, np.where(has2, second, first))
        result = self._results(keys)
        applies = (result != _RESULTS.index(None)) & (recs["phase"][rec] != _ENTER)
        ret, err = recs["ret"][rec], recs["err"][rec].astype(np.int64)
        value = np.where(result == _RESULTS.index("fd"), recs["fd"][rec].astype(np.int64), ret)
        failed = (ret < 0) | (err != 0)
        status = np.where(failed, -1, value)
        kind = np.where(applies, np.where(failed & (err != 0), _Status.SYSERR, _Status.TEXT), 0)
        names, _ = self._status_names(kind, np.where(kind == _Status.SYSERR, err, status))
        out["status_name"][rows] = names
        out["status"][rows] = np.where(applies, status, 0)
        out["has_status"][rows] = applies
        out["ok"][rows] = np.where(applies, ~failed, -1)

    def _status_names(self, kind: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Status name ids (and, for NV_STATUS codes, whether they count as success) of (kind, value) pairs,
        each distinct pair spelt once."""
        keys = (value.astype(np.int64) * 8 + kind).view(np.uint64)  # values stay far below 2**60
        return self._status_ids(keys), self._status_ok(keys)

    def _status_name(self, key: int) -> int:
        signed = key - (1 << 64) if key >> 63 else key
        kind, value = signed & 7, signed >> 3
        return self.status_names.id(_SPELL[kind](self.status_namer, value)) if kind else NONE

    def _nv_ok(self, key: int) -> int:
        return int(key & 7 == _Status.NV and bool(self.status_namer.status_ok(key >> 3)))

    def _detail_ids(self, source: np.ndarray, op: np.ndarray, key: np.ndarray, keyed: np.ndarray) -> np.ndarray:
        """The names an operation's key gives (a control's command, an allocation's class), each asked once."""
        out = np.full(len(key), NONE, dtype=np.int32)
        rows = np.flatnonzero(keyed)
        if rows.size:
            ops = self._keyed_ops((source[rows].astype(np.uint64) << np.uint64(32)) | op[rows].astype(np.uint64))
            out[rows] = self._detail_of((ops.astype(np.uint64) << np.uint64(32)) | (key[rows].astype(np.uint64)
                                                                                   & np.uint64(0xFFFFFFFF)))
        return out

    def _detail(self, key: int) -> int:
        decoder = self._op(self._keyed[key >> 32]).op
        return self.details.id(decoder.name_of(key & 0xFFFFFFFF).name)

    def _keyed_op(self, key: int) -> int:
        self._keyed.append(key)
        return len(self._keyed) - 1

    # -- calls the decoders decode --------------------------------------------------------

    def _decoded_rows(self, calls: Sequence[Call]) -> tuple[dict[str, np.ndarray], Extras]:
        """The columns of calls decoded one by one by the decoders (as the session fold decodes them)."""
        out = _empty(len(calls))
        extras: Extras = {}
        for i, call in enumerate(calls):
            first, last = call.first, call.last
            d = self.decoders.decode(call, Level.CALL)
            ends = (call.state in (CallState.COMPLETE, CallState.RESUMED) and len(call.records) > 1
                    or call.state is CallState.SINGLE)
            handles = tuple(d.handles.values())
            fits = len(handles) <= MAX_HANDLES and all(isinstance(v, int) and 0 <= v < 1 << 32 for v in handles)
            row = {"enter_seq": first.seq, "exit_seq": last.seq if ends else -1, "t_enter": first.time_ns,
                   "t_exit": last.time_ns if ends else 0, "pid": first.pid, "tid": first.tid,
                   "call_id": first.call_id, "fd": first.fd, "source": first.source, "op": first.op,
                   "state": _STATE[call.state], "key": _key(d),
                   "bytes": sum(len(b.data) for r in call.records for b in r.buffers),
                   "name": self.names.id(d.name), "detail": self.details.id(d.detail),
                   "status": d.status if d.status is not None else 0, "has_status": d.status is not None,
                   "status_name": self.status_names.id(d.status_name), "ok": -1 if d.ok is None else int(d.ok),
                   "handles": self.handle_sets.id(tuple(d.handles)) if fits and handles else NONE,
                   "locks": self._locks(np.array([first.source << 32 | first.op], dtype=np.uint64))[0]}
            for name, value in row.items():
                out[name][i] = value
            if fits:
                for k, v in enumerate(handles):
                    out[f"h{k}"][i] = v
            extra = dict(d.handles) if handles and not fits else None
            regular = len(call.records) == 1 or (ends and len(call.records) == 2)
            members = None if regular else tuple((r.seq, r.time_ns) for r in call.records)
            if extra is not None or members is not None:
                extras[i] = (extra, members)
        return out, extras

    def _exchanges(self, recs: Records, rows: np.ndarray, record: Callable[[int], Record]
                   ) -> tuple[list[tuple[int, _Open]], list[tuple[int, _Open, int]]]:
        """GSP records paired by the decoders' GSP keyer (as ``pair_calls`` does, without its window):
        the calls they start, with the position of their first record, and for every record the call
        it belongs to and where in it."""
        starts: list[tuple[int, _Open]] = []
        members: list[tuple[int, _Open, int]] = []
        if self._gsp is None:
            return starts, members
        for i in rows.tolist():
            rec = record(i)
            pos = int(recs["pos"][i])
            action = self._gsp(rec)
            if action is None:
                item = _Open([rec], closed=True, single=True)
                starts.append((pos, item))
                members.append((i, item, 0))
                continue
            kind, key = action
            pending = self._open.get(key)
            if kind is Pairing.OPEN:
                if pending is not None:
                    self._settled.append(pending)  # superseded: it stays in flight with what it has
                pending = self._open[key] = _Open([rec])
                starts.append((pos, pending))
            elif pending is not None:
                pending.records.append(rec)
                if kind is Pairing.PART:
                    self._settled.append(pending)  # its row shows the parts so far
            elif kind is Pairing.PART:
                pending = self._open[key] = _Open([rec], resumed=True)
                starts.append((pos, pending))
            else:
                pending = _Open([rec], resumed=True, closed=True)  # an answer whose request was never seen
                starts.append((pos, pending))
                members.append((i, pending, 0))
                continue
            members.append((i, pending, len(pending.records) - 1))
            if kind is Pairing.CLOSE:
                pending.closed = True
                del self._open[key]
                self._settled.append(pending)
        return starts, members

    def _patch_exchanges(self) -> None:
        """Rewrite the rows of GSP exchanges that started in an earlier batch and changed in this one."""
        changed = list({id(item): item for item in self._settled if item.row >= 0}.values())
        self._settled = []
        if changed:
            values, extras = self._decoded_rows([item.call() for item in changed])
            del values["client"]
            self._patch(np.array([item.row for item in changed], dtype=np.int64), values, extras)

    # -- clients ----------------------------------------------------------------------------

    def _new_client_id(self, pid: int) -> str:
        """The name the trace gives this process's client (a replay's plan), else the next free ``cN``
        (as ``rmtrace.session.fold.ClientNames`` names them)."""
        named = self.client_ids.get(pid) if pid else None
        if named is not None and named not in self._taken:
            return named
        n = len(self.clients) + 1
        while f"c{n}" in self._taken or f"c{n}" in self._planned:
            n += 1
        return f"c{n}"

    def _assign_clients(self, rows: dict[str, np.ndarray], base: int) -> np.ndarray:
        """Each new row's client, as the session fold picks it (``Folder._client_for``), creating clients
        in order of the first row that makes one."""
        n = len(rows["pid"])
        source, pid = rows["source"], rows["pid"].astype(np.int64)
        joins = np.isin(source, _OPEN_SOURCES)
        gsp_host = (source == Source.GSP) & (pid == 0)
        by_pid = (~joins & (pid != 0)) | rows["opens_gpu"]
        session = self.gsp_session + np.cumsum(rows["name"] == self.names.find(GSP_SESSION_START))
        if n:
            self.gsp_session = int(session[-1])
        key = np.where(gsp_host, -1 - session, pid)  # one number per client key: pids, or -1 - session
        creators = np.flatnonzero(by_pid | gsp_host)
        _, at = np.unique(key[creators], return_index=True)
        for i in np.sort(creators[at]).tolist():
            name: ClientKey = ("gsp", int(session[i])) if gsp_host[i] else int(pid[i])
            if name not in self._client_of:
                self._client_of[name] = len(self.clients)
                self.clients.append(ClientRow(len(self.clients), self._new_client_id(int(pid[i])), name, int(pid[i]),
                                              base + i, int(rows["enter_seq"][i]), int(rows["t_enter"][i]),
                                              int(session[i]) if source[i] == Source.GSP else None))
                self._taken.add(self.clients[-1].id)
        uniq, inverse = np.unique(key, return_inverse=True)
        index = np.full(len(uniq), NONE, dtype=np.int64)
        since = np.zeros(len(uniq), dtype=np.int64)
        for u, k in enumerate(uniq.tolist()):
            lookup: ClientKey = ("gsp", -1 - k) if k < 0 else k
            found = self._client_of.get(lookup)
            if found is not None:
                index[u], since[u] = found, self.clients[found].row
        inverse = inverse.ravel()
        mine = (by_pid | joins | gsp_host) & (base + np.arange(n) >= since[inverse])
        return np.where(mine, index[inverse], NONE).astype(np.int32)


_SPELL: dict[int, Callable[[Any, int], str]] = {
    _Status.NV: lambda names, v: names.status(v), _Status.TEXT: lambda names, v: str(v),
    _Status.ERRNO: lambda names, v: errno_name(v), _Status.RET: lambda names, v: f"ret {v}",
    _Status.SYSERR: lambda names, v: f"-1 {errno_name(v)}",
}
"""How a status of each kind is spelt (``IoctlOp.decode``, ``SysCall.decode``)."""
_INFO_COLUMNS = ("pid", "tid", "call_id", "client", "source", "op", "name", "detail", "status", "has_status",
                 "status_name", "ok", "enter_seq", "exit_seq", "t_enter", "t_exit", "state", "bytes", "locks",
                 "handles", *(f"h{k}" for k in range(MAX_HANDLES)))
_DECODED = ("name", "detail", "key", "status", "has_status", "status_name", "ok", "handles",
            *(f"h{k}" for k in range(MAX_HANDLES)))
"""The columns the decoders fill in for a call they decode."""
_RESULTS = (None, "fd", "ret")
"""``SysCall.result`` values, by the code the plan cache holds."""


def _key(d: Decoded) -> int:
    """What a call decoded one by one says its class or command is (as ``argspec.ArgLayout.key``)."""
    for value in (d.extra.get("cmd"), d.extra.get("hClass"), d.args.get(CLASS_MEMBER)):
        if isinstance(value, int) and 0 <= value < 1 << 32:
            return value
    return 0


def _empty(n: int) -> dict[str, np.ndarray]:
    out = {name: np.zeros(n, dtype=dtype) for name, dtype in CALL_DTYPES.items()}
    for name in ("detail", "status_name", "client", "handles", "ok"):
        out[name][:] = NONE
    return out


def _op_keys(recs: Records, rows: np.ndarray) -> np.ndarray:
    return (recs["source"][rows].astype(np.uint64) << np.uint64(32)) | recs["op"][rows].astype(np.uint64)


def _pair(recs: Records, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Enter/exit pairs among records ``idx``: for each record its exit's index (-1: none) and whether
    it is the last record of its (pid, call_id).  An exit closes the enter right before it in
    position order of the same key, as ``pair_calls`` closes the newest open call of a key."""
    n = len(recs["pos"])
    partner = np.full(n, -1, dtype=np.int64)
    last = np.zeros(n, dtype=bool)
    if not idx.size:
        return partner, last
    # records are in position order (the pending enters, then the batch's), so a stable sort by (pid, call_id)
    # is the order; one sort of one key, both packed in 64 bits when they fit (a quarter of lexsort's CPU)
    pid, call = recs["pid"][idx], recs["call_id"][idx]
    shift = int(call.max()).bit_length()
    if shift + int(pid.max()).bit_length() <= 64:
        order = idx[np.argsort((pid.astype(np.uint64) << np.uint64(shift)) | call, kind="stable")]
    else:
        order = idx[np.lexsort((call, pid))]
    pid, call, phase = recs["pid"][order], recs["call_id"][order], recs["phase"][order]
    same = (pid[1:] == pid[:-1]) & (call[1:] == call[:-1])
    close = same & (phase[:-1] == _ENTER) & (phase[1:] == _EXIT)
    partner[order[:-1][close]] = order[1:][close]
    last[order] = np.append(~same, True)
    return partner, last
