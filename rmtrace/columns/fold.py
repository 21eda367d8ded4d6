"""The session fold over the call table: Python only for the calls that change the model.

``Folder.fold`` visits every call: it touches the call's process, finds its
client, keeps its CallInfo, and applies what the semantic layer says the call
did (``EFFECTS``).  Over the call table the first three are the table's own
columns (its rows, its clients, what its records said of each process), so
``fold_table`` runs Python only for the rows whose meaning can change the
model, in the same order, merging in the processes and clients the table saw
at the rows where the fold would have made them:

* ``ROW``: the call's meaning is in the columns (an allocation, a free, a
  duplicate, a UVM channel registration, a control the model reads): its
  ``Decoded`` is built from the row, its records from the header fields the
  table keeps, and the semantic layer interprets that (``Interpreter.meaning``);
  when it says the params matter (``Interpreter.needs_params``: a channel or
  TSG allocation, those controls) the records are read again for their params
  buffers, whose members are read where they lie (``rmtrace.columns.view``);
* ``RECORDS``: the call's records are read again and the semantic layer
  decodes and interprets them (``Interpreter.interpret``): GSP exchanges, sema
  messages, marks, process events, the UVM commands whose other members the
  model reads, anything a user's decoder decodes;
* ``NONE``: nothing the model keeps can come of it (every other control,
  mapping, UVM command, file descriptor operation).

Which is which is data (``ROW_ESCAPES``, ...), by role numbers from the
profile; ``tests/test_columns_fold.py`` interprets every call of every test
trace the slow way and checks that a ``NONE`` call has no effect and a ``ROW``
call means the same from its row as from its records.
"""

from __future__ import annotations

import bisect
import enum
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
from rmtrace.decoders import Decoded
from rmtrace.decoders.context import context
from rmtrace.decoders.rm import NamedByArg
from rmtrace.decoders.roles import ControlRole, EscapeRole, Roles, UvmRole

from rmtrace.calls import Call, CallState
from rmtrace.columns.argspec import CLASS_MEMBER, MAX_HANDLES, Kind, Plan
from rmtrace.columns.arrays import distinct, within
from rmtrace.columns.collector import young_collections
from rmtrace.columns.params import ParamsReader, params_values
from rmtrace.columns.stash import RecordStash, Rereader
from rmtrace.columns.table import IN_FLIGHT_STATES, STATES, CallTable, ClientColumns, ClientRow, ProcessTouch
from rmtrace.columns.view import params_buffers, params_view
from rmtrace.record import Phase, Record, Role, Source, SysOp, When, decode_record
from rmtrace.semantics import CallMeaning
from rmtrace.semantics import events as ev
from rmtrace.semantics.effects import (
    CATEGORIES,
    NO_CLASS,
    NO_COMMAND,
    PARAMS_CATEGORIES,
    EffectKind,
    Effects,
    effect_kinds,
    row_effects,
)
from rmtrace.semantics.interpret import alloc_params_event, control_event, value_of
from rmtrace.session.blocks import BLOCK, in_blocks
from rmtrace.session.entities import CallInfo, Client, LaneState, Process
from rmtrace.session.fold import (
    EFFECTS,
    Folder,
    bound,
    channel_allocated,
    duplicate,
    free,
    scheduled,
    token_issued,
    tsg_allocated,
    uvm_channel,
)
from rmtrace.session.objects import ObjectColumns, ObjectsFold, Op, RowOps
from rmtrace.trace import TraceReader

COMMAND_MEMBER = "cmd"
"""The argument member that names a control (``Interpreter``'s ``_rm_control`` reads it)."""


class Need(enum.IntEnum):
    """What a row needs for the fold."""

    NONE = 0
    ROW = 1
    RECORDS = 2


ROW_ESCAPES = frozenset({EscapeRole.ALLOC, EscapeRole.ALLOC_MEMORY, EscapeRole.FREE, EscapeRole.DUP_OBJECT})
"""RM escapes whose meaning is their handles, class and status."""
ROW_UVM = frozenset({UvmRole.REGISTER_CHANNEL, UvmRole.UNREGISTER_CHANNEL})
"""UVM commands whose meaning is their handles."""
RECORDS_UVM = frozenset({UvmRole.REGISTER_GPU, UvmRole.UNREGISTER_GPU})
"""UVM commands whose meaning is in their argument's other members (the GPU's UUID)."""
RECORDS_SYS = frozenset({SysOp.FORK, SysOp.EXEC, SysOp.EXIT})
"""Process events: the model keeps the process tree, argv and exit status."""
RECORDS_SOURCES = frozenset({Source.GSP, Source.SEMA, Source.MARK})
"""Sources every call of which may change the model (and which the table decodes one by one anyway)."""


def needs(table: CallTable, plan: Plan, roles: Roles, start: int = 0, stop: int | None = None) -> np.ndarray:
    """The ``Need`` of each row from ``start`` on (to ``stop``; ``BLOCK`` * 16 rows at a time: the keys of
    every row at once, and their sort, held 40 bytes per row)."""
    last = len(table) if stop is None else stop
    out = np.zeros(last - start, dtype=np.int8)
    by_op: dict[int, int] = {}
    commands = np.array(sorted(roles.controls), dtype=np.int64)
    names = ("source", "op", "key", "state")
    step = BLOCK * 16
    for at in range(start, last, step):
        end = min(at + step, last)
        c = {name: table.columns[name][at:end] for name in names}
        keys = (c["source"].astype(np.int64) << 32) | c["op"].astype(np.int64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        for k in uniq.tolist():
            if k not in by_op:
                by_op[k] = op_need(plan, roles, k >> 32, k & 0xFFFFFFFF)
        block = np.array([by_op[k] for k in uniq.tolist()], dtype=np.int8)[inverse.ravel()]
        controls = np.flatnonzero((c["source"] == Source.RM) & (block == Need.NONE) & _controls(keys, roles))
        if controls.size:
            block[controls[np.isin(c["key"][controls], commands)]] = Need.ROW
        block[(block == Need.ROW) & (c["state"] == STATES.index(CallState.SINGLE))] = Need.RECORDS  # a lone
        out[at - start:end - start] = block  # record of an odd phase: read it as it is
        table.release(at, end, names)  # what the fold reads later it reads again (the kernel keeps the pages)
    return out


def _controls(keys: np.ndarray, roles: Roles) -> np.ndarray:
    """Rows of RM_CONTROL (the controls the model reads are picked by their command)."""
    control = [op for op, role in roles.escapes.items() if role is EscapeRole.CONTROL]
    return np.isin(keys, np.array([int(Source.RM) << 32 | op for op in control], dtype=np.int64))


def op_need(plan: Plan, roles: Roles, source: int, op: int) -> Need:
    """The ``Need`` of calls of (source, op), before their class, command and state are looked at."""
    if source == Source.RM:
        if plan.op(source, op).kind == Kind.PYTHON:
            return Need.RECORDS  # an escape carrying another (IOCTL_XFER_CMD), or a user's decoder
        return Need.ROW if roles.escapes.get(op) in ROW_ESCAPES else Need.NONE
    if source == Source.UVM:
        role = roles.uvm.get(op)
        if role in RECORDS_UVM or (role in ROW_UVM and plan.op(source, op).kind == Kind.PYTHON):
            return Need.RECORDS
        return Need.ROW if role in ROW_UVM else Need.NONE
    if source == Source.SYS:
        return Need.RECORDS if op in RECORDS_SYS else Need.NONE
    return Need.RECORDS if source in RECORDS_SOURCES or source not in tuple(Source) else Need.NONE


def fold_table(folder: Folder, table: CallTable, reader: TraceReader, channels_only: bool = False) -> None:
    """Bring ``folder`` to where folding every call of ``table`` in order would bring it; with
    ``channels_only``, as far as its channels, ranks and host state go (``CHANNELS_ONLY``)."""
    with young_collections():
        TableFold(folder, reader, channels_only=channels_only, stash=table.stash).advance(table, final=True)
    table.stash = None  # read: the table lives on in the model


def fold_table_objects(folder: Folder, table: CallTable, reader: TraceReader) -> ObjectColumns:
    """The RM objects of ``table`` as columns (``rmtrace.session.objects``), and ``folder`` as far as its
    processes and clients go (``OBJECTS_ONLY``): the objects are not made as ``RmObject``\\ s, nor kept
    in ``folder``, but each client's root handles are (``Client.rm_clients``).  It folds ``OBJECTS_BLOCK``
    rows at a time, and applies their operations after each block: what it holds grows with the objects,
    not with the rows."""
    objects = ObjectsFold()
    fold = TableFold(folder, reader, objects=objects, stash=table.stash)
    with young_collections():
        for stop in range(OBJECTS_BLOCK, len(table), OBJECTS_BLOCK):
            fold.advance(table, final=True, until=stop)
            objects.apply(tuple(folder.clients.values()))
            table.release(stop - OBJECTS_BLOCK, stop)  # the block's pages it read (mapped from the cache)
        fold.advance(table, final=True)
    table.stash = None  # read: the table lives on in the model
    return objects.resolve(tuple(folder.clients.values()))


OBJECTS_BLOCK = 65_536
"""Rows ``fold_table_objects`` folds at a time (at 1,000,000 records the whole table at once held 80 MB)."""


OBJECTS_ONLY = "the processes, clients and RM objects"
"""What ``fold_table_objects`` makes as the whole fold would: the processes (their tree, argv, exit
status), the clients, and every RM object with its life (allocated, freed, freed at exit).  It folds
only the calls that can change those: allocations (of channels and TSGs too: their params do not make
the object), frees and duplicates from their rows, GSP messages (they carry RM calls) and fork/exec/exit
from their records; channels, ranks, host state and the timeline it leaves as they are.  The objects'
operations are logged (``ObjectsFold``), the rows' as arrays, and applied after, over ints."""


CHANNELS_ONLY = "the processes, clients, channels, ranks, host state and GSP exchanges"
"""What a fold with ``channels_only`` makes as the whole fold would: the processes and clients; every
channel (its id, handle, engine, rank, channel group, ring) and when it was freed, with every host-side
flag of its lane (published, waiting, completed, stale, freed); the ranks, the host counters, the GSP
exchanges, the recorder's marks.  It leaves out what none of those depends on: the RM objects that are
neither a channel, a channel group, nor what one descends from (their frees with them), the work-submit
tokens, the schedule controls, UVM's calls (its GPU and channel registrations: the lane flags SCHEDULED and
REGISTERED rank below every host-side one in ``CHANNEL_PRECEDENCE``), and the stray frees.  Only a final fold:
which objects a channel descends from is known once every row is there."""


WINDOW = 65_536
"""Records a growing trace's fold waits for an open call to end before it folds the call as in flight
(``rmtrace.calls.pair_calls``' window: one wedged call cannot hold the rest of the model back)."""


class TableFold:
    """The fold over a call table that may still grow (a trace being recorded).

    ``advance`` folds the rows whose calls are over, in order; a call still open holds the rows after
    it back (they fold once it ends), for at most ``window`` records or until ``flush``: then it is
    folded as in flight and, should it end later, what its end means is folded then, as ``pair_calls``
    yields a call UNFINISHED and its close RESUMED.  With ``final`` every row is folded as it stands.
    """

    def __init__(self, folder: Folder, reader: TraceReader, window: int = WINDOW, objects: ObjectsFold | None = None,
                 channels_only: bool = False, stash: RecordStash | None = None) -> None:
        """``objects``: fold only as far as ``OBJECTS_ONLY`` goes, logging the objects' operations there;
        ``stash``: the records it reads again, kept as the table was built (``CallTable.stash``)."""
        self.folder = folder
        self.stash = stash
        self.objects = objects
        self.objects_only = objects is not None
        self.channels_only = channels_only
        self.reader = reader
        self.window = window
        self.plan = Plan(folder.decoders)
        self.next_row = 0
        self._touches: list[tuple[int, ProcessTouch]] = []
        """The processes of the table not made yet, by their first record (``table.processes`` is in the order
        the build met them, not in row order); ``_next_touch`` indexes the next to make."""
        self._next_touch = 0
        self._seen_processes = 0
        """How many of ``table.processes`` are in ``_touches`` (or made): a followed trace's table finds more."""
        self._next_client = 0
        """The index in ``table.clients`` (appended in row order) of the next client to make."""
        self._unfinished: set[int] = set()

    def advance(self, table: CallTable, final: bool = False, flush: bool = False, until: int | None = None) -> None:
        """``until``: fold the rows before it only, and leave the processes' and clients' ends (their last
        records) to the call that folds the rest (a final fold a block at a time, ``fold_table_objects``)."""
        folder = self.folder
        c = table.columns
        start, n = self.next_row, len(table) if until is None else until
        need = needs(table, self.plan, folder.interpreter.roles, start, n)  # need[i]: row start + i's
        if self.objects_only:
            need[~_objects_rows(table, start, n)] = Need.NONE
        if self.channels_only:  # UVM's calls register GPUs and channels: flags none of it reads
            need[c["source"][start:n] == Source.UVM] = Need.NONE
        rows = start + np.flatnonzero(need != Need.NONE)
        stop = n
        if not final and not flush and rows.size:
            open_ = np.isin(c["state"][rows], IN_FLIGHT_STATES)
            young = open_ & (self.reader.record_count - c["enter_seq"][rows].astype(np.int64) <= self.window)
            if young.any():
                stop = int(rows[np.argmax(young)])
                rows = rows[rows < stop]
        resumed = [row for row in sorted(self._unfinished) if not np.isin(c["state"][row], IN_FLIGHT_STATES)]
        self._fold_rows(table, rows, need[rows - start], stop, final)
        for row in resumed:  # a call folded in flight has ended since: what its end says
            self._unfinished.discard(row)
            end = self.reader.record_at(int(c["exit_seq"][row]))
            self._apply(folder.interpreter.interpret(Call((end,), CallState.RESUMED)), table.info(row))
        self.next_row = stop
        if until is not None:
            return
        for pid, touch in table.processes.items():  # a part at a time (see ``_process_touches``)
            proc = folder.processes.get(pid)
            if proc is not None:
                proc.last_ns = max(proc.last_ns, touch.last_ns)
                proc.threads |= touch.threads
        _client_ends(folder, table)

    def _fold_rows(self, table: CallTable, rows: np.ndarray, need: np.ndarray, stop: int, final: bool) -> None:
        """Fold ``rows`` (``need[i]``: row ``rows[i]``'s ``Need``), in order, with the processes and clients the table made before
        ``stop``.  A method of its own so that its arrays go as it returns (before ``advance``'s last steps)."""
        folder = self.folder
        by_row = _by_effects(table, rows[need == Need.ROW], self.plan, folder.interpreter.roles)
        kept = ~within(rows, by_row.rows)  # ``by_row.rows`` is a sorted part of ``rows``
        slow, slow_need = rows[kept], need[kept]
        del kept
        if self.channels_only:
            assert final, "which objects a channel descends from is known once every row is there"
            by_row = RowEffects(by_row.rows, by_row.effects[_channel_effects(table, by_row.effects, slow,
                                                                             folder.interpreter.roles)])
        if self.objects is not None:  # the rows' objects are logged as arrays; a control means nothing to them
            self.objects.rows(_object_ops(folder, table, by_row, self.objects))
            records = slow_need == Need.RECORDS
            slow, slow_need = slow[records], slow_need[records]
            by_row = RowEffects(by_row.rows, by_row.effects[np.zeros(len(by_row.effects), dtype=bool)])
        # their params from the stash where the build kept them (``stash.params_exits``), else from the trace
        effects = _EffectRows(folder, table, by_row, None if self.objects_only else ParamsReader(self.reader, self.stash))
        merged = np.concatenate([slow, by_row.rows[by_row.effects.at]])
        tags = np.concatenate([np.full(len(slow), -1, dtype=np.int64), np.arange(len(by_row.effects))])
        order = np.argsort(merged, kind="stable")
        touches = self._process_touches(table)
        clients = _Clients(table.clients)
        blocks = _blocks(table, slow, slow_need, folder, self.plan, Rereader(self.reader, self.stash))
        due = self._make(touches, clients, 0)
        for row, effect in in_blocks(merged[order], tags[order]):
            if row >= due:
                due = self._make(touches, clients, row + 1)
            if effect >= 0:  # what the row says it did: applied without a CallMeaning
                effects.apply(effect)
                continue
            _, info, meaning = next(blocks)
            self._apply(meaning, info, row)
            if not final and meaning.call.state is CallState.IN_FLIGHT:
                self._unfinished.add(row)
        # a final fold's ``stop`` is the table's length (made all), or a block's end (made as far as that)
        self._make(touches, clients, stop)

    def _process_touches(self, table: CallTable) -> list[tuple[int, ProcessTouch]]:
        """``_touches``, with the processes the table found since the last fold (sorted again only then)."""
        processes = table.processes
        if len(processes) > self._seen_processes:
            # made from the items, a part at a time: a loaded table's ``processes[pid]`` reads its columns per pid
            new = list(islice(processes.items(), self._seen_processes, None))
            self._seen_processes = len(processes)
            self._touches = sorted(self._touches[self._next_touch:] + new, key=lambda item: item[1].first[:2])
            self._next_touch = 0
        return self._touches

    def _make(self, touches: list[tuple[int, ProcessTouch]], clients: _Clients, before: int) -> int:
        """Make the processes and clients whose first row comes before row ``before``; the row the next one
        is made at (``_NEVER`` when none is left)."""
        at = self._next_touch
        while at < len(touches) and touches[at][1].first[0] < before:
            _process(self.folder, *touches[at])
            at += 1
        self._next_touch = at
        due = touches[at][1].first[0] if at < len(touches) else _NEVER
        at = self._next_client
        upto = bisect.bisect_left(clients.rows, before, lo=at)  # the clients are in the order of their first rows
        for made in clients.made(at, upto):
            _client(self.folder, made)
        self._next_client = upto
        return min(due, clients.rows[upto]) if upto < len(clients.rows) else due

    def _apply(self, meaning: CallMeaning, info: CallInfo, row: int = -1) -> None:
        """What one call (of ``row``) did, as ``Folder.fold`` applies it; with ``objects``, what it did to
        the objects is logged there instead."""
        folder = self.folder
        if meaning.first(ev.GspSessionStarted) is not None:
            folder.gsp_session += 1
        for event in meaning.effective():
            if self.objects is not None and self.objects.event(row, event, meaning, info, folder):
                continue
            effect = EFFECTS.get(type(event))
            if effect is not None:
                effect(folder, event, meaning, info)


class _Clients:
    """A table's clients for ``TableFold._make``: their first rows as a list, and the ``ClientRow``\\ s made
    only as they are folded (a loaded table's ``clients[i]`` reads its columns for each index, seven times a
    client at 1M records; ``clients[i:]`` per block would make every later client again each time)."""

    def __init__(self, clients: Sequence[ClientRow]) -> None:
        self.clients = clients
        self.rows: list[int] = (clients.columns["row"].tolist() if isinstance(clients, ClientColumns)
                                else [c.row for c in clients])
        self._start = 0
        self._made: Sequence[ClientRow] = ()
        """The clients from ``_start`` on made last: ``_make`` asks for one or two at a time, in order."""

    def made(self, start: int, stop: int) -> Sequence[ClientRow]:
        if stop <= start:
            return ()
        if not (self._start <= start and stop <= self._start + len(self._made)):
            self._start, self._made = start, self.clients[start:max(stop, start + CLIENTS_MADE)]
        return self._made[start - self._start:stop - self._start]


CLIENTS_MADE = 256
"""Clients ``_Clients`` makes at a time (each slice of a loaded table's reads its six columns)."""


def _process(folder: Folder, pid: int, touch: ProcessTouch) -> None:
    """The process's first record: the fold makes the process then (unless a fork made it first)."""
    if pid not in folder.processes:
        folder.processes[pid] = Process(pid, first_ns=touch.first[2])


def _client(folder: Folder, c: ClientRow) -> None:
    """A client made at the row that first belongs to it, as ``Folder._client_for`` makes it."""
    client = Client(c.id, c.pid, first_ns=c.first_ns, last_ns=c.first_ns, first_seq=c.first_seq,
                    last_seq=c.first_seq, gsp_session=c.gsp_session)
    folder.clients[client.id] = client
    folder._client_by_key[c.key] = client
    folder.tl.set(client.first_ns, client.first_seq, client.entity, "state", LaneState.RUNNING)


def _client_ends(folder: Folder, table: CallTable) -> None:
    """Each client's last record: the latest last record of its calls (``BLOCK`` * 16 rows at a time: the
    columns of every row at once held 40 bytes per row, the fold's peak)."""
    c = table.columns
    n = len(table.clients)
    if not n:
        return
    last_seq = np.full(n, -1, dtype=np.int64)
    last_ns = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    parted = np.sort(np.fromiter(table.members, dtype=np.int64, count=len(table.members)))
    step = BLOCK * 16
    for start in range(0, len(table), step):
        end = min(start + step, len(table))
        mine = np.flatnonzero(c["client"][start:end] >= 0)
        mine = mine[~within(mine + start, parted)]  # a call in several parts: its last part, below
        if not mine.size:
            continue
        exit_seq = c["exit_seq"][start:end][mine]
        ends = exit_seq >= 0
        client = c["client"][start:end][mine]
        np.maximum.at(last_seq, client, np.where(ends, exit_seq, c["enter_seq"][start:end][mine].astype(np.int64)))
        np.maximum.at(last_ns, client, np.where(ends, c["t_exit"][start:end][mine], c["t_enter"][start:end][mine]))
        table.release(start, end, ("client", "exit_seq", "enter_seq", "t_exit", "t_enter"))
    for row, members in table.members.items():
        client = int(c["client"][row])
        if client >= 0:
            seq, time = members[-1]
            last_seq[client], last_ns[client] = max(int(last_seq[client]), seq), max(int(last_ns[client]), time)
    for made, s, t in zip(table.clients, last_seq.tolist(), last_ns.tolist()):
        found = folder.clients.get(made.id)  # a growing trace's fold may not have reached it yet
        if found is not None:
            found.last_seq, found.last_ns = max(found.last_seq, s), max(found.last_ns, t)


def _object_ops(folder: Folder, table: CallTable, found: RowEffects, objects: ObjectsFold) -> RowOps:
    """The object operations (``rmtrace.session.objects.OP_FIELDS``) that ``found``'s effects are, as
    ``_EffectRows`` would apply them, as columns."""
    e = found.effects
    e = e[np.isin(e.kind, [*ALLOCATIONS, EffectKind.FREED])]
    rows = found.rows[e.at]
    c = table.gather(rows, _LIFE_COLUMNS)
    exit_seq = c["exit_seq"]
    ends = (exit_seq >= 0) & (c["state"] != STATES.index(CallState.RESUMED))
    last_seq = np.where(ends, exit_seq, c["enter_seq"].astype(np.int64))
    last_ns = np.where(ends, c["t_exit"], c["t_enter"])
    freed = e.kind == EffectKind.FREED
    uniq, inverse = np.unique(e.class_id, return_inverse=True)
    class_names = np.array([objects.name(folder.interpreter.class_name(None if k == NO_CLASS else k))
                            for k in uniq.tolist()], dtype=np.int64)
    statuses = np.array([objects.name(n) for n in (*table.status_names.values, "NV_OK")], dtype=np.int64)
    columns = {
        "kind": np.where(freed, Op.FREE, np.where(e.kind == EffectKind.DUPLICATED, Op.DUP, Op.ALLOC)),
        "client": c["client"], "h_client": e.h_client, "handle": e.handle, "parent": e.parent,
        "has_parent": e.parent != 0, "cls": e.class_id, "category": e.category,
        "name": class_names[inverse.ravel()] if len(uniq) else np.zeros(0, dtype=np.int64),
        "seq": np.where(freed, last_seq, c["enter_seq"].astype(np.int64)), "ns": last_ns,
        "status": statuses[c["status_name"]], "src_client": e.src_client, "src_handle": e.src_handle}
    return RowOps(rows, columns, [m.id for m in table.clients] + [None])  # a row of no client (-1) reads the last


@dataclass
class RowEffects:
    """The rows whose meaning the semantic layer reads from their columns alone
    (``rmtrace.semantics.effects``), and their effects (``effects.at`` indexes ``rows``)."""

    rows: np.ndarray
    effects: Effects


def _objects_rows(table: CallTable, start: int, stop: int) -> np.ndarray:
    """Which rows from ``start`` to ``stop`` a fold of ``OBJECTS_ONLY`` folds, as far as their need allows:
    the RM calls (read from their rows: allocations, frees, duplicates), GSP messages, fork/exec/exit."""
    source, op = table.columns["source"][start:stop], table.columns["op"][start:stop]
    return ((source == Source.RM) | (source == Source.GSP)
            | ((source == Source.SYS) & np.isin(op, [int(o) for o in RECORDS_SYS])))


DECODE_BLOCK = 1024
"""Rows whose CallInfo and Decoded ``_blocks`` makes at once: their objects, 3 KB a row, are alive together
(of 4,096 rows, 12 MB: the objects' fold's peak at 1M records), and numpy's cost per call is paid per block."""
_HANDLE_COLUMNS = ("handles", *(f"h{k}" for k in range(MAX_HANDLES)))
"""A row's handles: which names (``CallTable.handle_sets``), and their values."""
_LIFE_COLUMNS = ("exit_seq", "state", "enter_seq", "t_exit", "t_enter", "client", "status_name")
"""The columns of a row's effect's life (when, whose, how it ended) that the rows' effects are folded with."""
ALLOCATIONS = (EffectKind.ALLOCATED, EffectKind.ALLOCATED_MEMORY, EffectKind.DUPLICATED)
"""The effects that make an object."""


def _channel_effects(table: CallTable, e: Effects, slow: np.ndarray, roles: Roles) -> np.ndarray:
    """Which of the effects ``e`` a fold of ``CHANNELS_ONLY`` applies: the allocations and frees of the
    objects of ``_channel_keys`` and the BIND controls (a channel's engine, when its allocation named none)."""
    keys = _channel_keys(table, e, slow)
    own = _object_key(e.h_client, e.handle)
    binds = [command for command, role in roles.controls.items() if role is ControlRole.BIND]
    return ((np.isin(e.kind, ALLOCATIONS) & within(own, keys))
            | ((e.kind == EffectKind.FREED) & (within(own, keys) | within(_object_key(e.handle, e.handle), keys)))
            | ((e.kind == EffectKind.CONTROL) & np.isin(e.command, binds)))


def _channel_keys(table: CallTable, e: Effects, slow: np.ndarray) -> np.ndarray:
    """The (hClient, handle) keys (``_object_key``) of every channel and channel group the effects ``e``
    allocate, of every handle a row read from its records (``slow``: it may allocate one) names, and of what
    any of those descends from or copies: their parents up to the root clients, and the objects they duplicate.
    A key stands for every object that ever had it, so a handle used again only adds objects."""
    made = np.isin(e.kind, ALLOCATIONS)
    own, parent, src = (_object_key(e.h_client, e.handle), _object_key(e.h_client, e.parent),
                        _object_key(e.src_client, e.src_handle))
    channels = made & np.isin(e.category, [CATEGORIES.index(c) for c in PARAMS_CATEGORIES])
    keys = distinct(np.concatenate([own[channels], _named_keys(table, slow)]))
    up = made & (e.parent != 0)
    dup = (e.kind == EffectKind.DUPLICATED) & (e.src_handle != 0)
    # a free that names no client (or the root itself) frees the root client of that handle where there is
    # one (``rmtrace.session.fold.free``): which it frees depends on whether that root is an object too
    rootless = (e.kind == EffectKind.FREED) & ((e.h_client == 0) | (e.h_client == e.handle))
    root = _object_key(e.handle, e.handle)
    while True:
        found = within(own, keys)
        grown = distinct(np.concatenate([keys, parent[found & up], src[found & dup], root[found & rootless]]))
        if len(grown) == len(keys):
            return keys
        keys = grown


def _named_keys(table: CallTable, rows: np.ndarray) -> np.ndarray:
    """(hClient, handle) keys of every handle each of ``rows`` names, with the row's hClient."""
    handle = _handles(table, rows)
    names = {name for names in table.handle_sets.values for name in names}
    h_client = handle("hClient")
    keys = [_object_key(h_client, handle(name)) for name in sorted(names)]
    wanted = set(rows.tolist())
    extra = [(named.get("hClient", 0) & 0xFFFFFFFF, value & 0xFFFFFFFF)  # a key keeps 32 bits of each
             for row, named in table.extra_handles.items() if row in wanted for value in named.values()]
    if extra:
        keys.append(_object_key(*(np.array(side, dtype=np.uint64) for side in zip(*extra))))
    return np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)


def _object_key(h_client: np.ndarray, handle: np.ndarray) -> np.ndarray:
    """One number per (hClient, handle), of 32 bits of each (RM handles are 32-bit numbers, per client): the
    fold's objects are keyed by the pair, and two pairs that share a key only make more objects kept."""
    return (h_client.astype(np.uint64) << np.uint64(32)) | (handle.astype(np.uint64) & np.uint64(0xFFFFFFFF))


def _by_effects(table: CallTable, rows: np.ndarray, plan: Plan, roles: Roles) -> RowEffects:
    """Of ``rows`` (their need: ROW), those whose every effect ``row_effects`` gives: calls that ended
    (one in flight may still end, and its end be folded then) whose handles fit the columns.  Worked out
    ``EFFECTS_BLOCK`` rows at a time: the columns a row's effects are read from, and the steps between,
    held for the whole of ``rows`` at once were 150 bytes per row (wedges' peak at 1M records)."""
    parts = [_block_effects(table, rows[at:at + EFFECTS_BLOCK], plan, roles)
             for at in range(0, max(len(rows), 1), EFFECTS_BLOCK)]
    done = 0
    for part in parts:  # each block's ``at`` counted from the first row of all
        part.effects.at += done
        done += len(part.rows)
    return RowEffects(np.concatenate([part.rows for part in parts]), Effects.joined([part.effects for part in parts]))


EFFECTS_BLOCK = 1 << 16
"""Rows ``_by_effects`` works out the effects of at once."""


def _block_effects(table: CallTable, rows: np.ndarray, plan: Plan, roles: Roles) -> RowEffects:
    """``_by_effects`` of one block of rows."""
    rows = rows[~np.isin(table.gather(rows, ("state",))["state"], IN_FLIGHT_STATES)]
    if table.extra_handles:
        rows = rows[~np.isin(rows, np.fromiter(table.extra_handles, dtype=np.int64))]
    c = table.gather(rows, ("source", "op", "key", "ok"))
    source, op, key = c["source"], c["op"], c["key"].astype(np.int64)
    class_id, command = _class_and_command(plan, source, op, key)
    kinds = effect_kinds(roles, source, op, command)
    kept = kinds != EffectKind.NONE
    rows, class_id, command, kinds = rows[kept], class_id[kept], command[kept], kinds[kept]
    return RowEffects(rows, row_effects(roles, kinds, c["ok"][kept] == 1, class_id, command, _handles(table, rows)))


def _class_and_command(plan: Plan, source: np.ndarray, op: np.ndarray, key: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's class and command as ``Interpreter.class_id`` and ``_rm_control`` read them from the
    Decoded ``_key_member`` makes: the key, when the operation is named by its class (or keeps one) or
    by its command; ``NO_CLASS`` and ``NO_COMMAND`` otherwise."""
    ops = (source.astype(np.int64) << 32) | op.astype(np.int64)
    uniq, inverse = np.unique(ops, return_inverse=True)
    names = [_key_name(plan, k >> 32, k & 0xFFFFFFFF) for k in uniq.tolist()]
    inverse = inverse.ravel()

    def by_name(test: Callable[[str | None], bool]) -> np.ndarray:
        return np.array([test(n) for n in names] + [False], dtype=bool)[inverse if len(names) else inverse - 1]
    is_class, unnamed, is_command = by_name(lambda n: n == CLASS_MEMBER), by_name(lambda n: n is None), \
        by_name(lambda n: n == COMMAND_MEMBER)
    return (np.where(is_class | (unnamed & (key != 0)), key, NO_CLASS), np.where(is_command, key, NO_COMMAND))


def _handles(table: CallTable, rows: np.ndarray) -> Callable[[str], np.ndarray]:
    """handle(member): each of ``rows``' handle of that name (``CallTable._handles``), 0 where it has none."""
    c = table.gather(rows, _HANDLE_COLUMNS)
    sets = c.pop("handles")
    values = np.stack(list(c.values()), axis=1)  # 32-bit, as the columns hold them
    del c
    picked = np.arange(len(rows))

    def handle(name: str) -> np.ndarray:
        where = np.array([names.index(name) if name in names else -1 for names in table.handle_sets.values] + [-1])
        at = where[sets]  # a row without handles (NONE) reads the last entry: -1
        return np.where(at >= 0, values[picked, np.maximum(at, 0)].astype(np.int64), 0)
    return handle


class _EffectRows:
    """Applies ``RowEffects`` one at a time, in their rows' order among the other rows, as the event
    handlers of ``rmtrace.session.fold.EFFECTS`` apply the events these rows' meanings hold.  Where a
    row's params say more (``Effects.params``), its records' params buffers are read (``ParamsReader``)
    and the interpreter says what they mean (``alloc_params_event``, ``control_event``); without
    ``params`` (a fold of ``OBJECTS_ONLY``) only the objects are made."""

    def __init__(self, folder: Folder, table: CallTable, found: RowEffects, params: ParamsReader | None) -> None:
        self.folder, self.table, self.params = folder, table, params
        e = found.effects
        rows = found.rows[e.at]
        c = table.gather(rows, _LIFE_COLUMNS)
        exit_seq = c["exit_seq"]
        ends = (exit_seq >= 0) & (c["state"] != STATES.index(CallState.RESUMED))
        first_seq = c["enter_seq"].astype(np.int64)
        self._columns = {
            "rows": rows, "first_seq": c["enter_seq"], "last_seq": np.where(ends, exit_seq, first_seq),
            "last_ns": np.where(ends, c["t_exit"], c["t_enter"]), "client": c["client"],
            "status": c["status_name"], "kind": e.kind, "h_client": e.h_client, "handle": e.handle,
            "parent": e.parent, "class_id": e.class_id, "category": e.category, "src_client": e.src_client,
            "src_handle": e.src_handle, "command": e.command, "with_params": e.params,
            "params_seq": _last_records(table, rows, c)}
        self._clients = [m.id for m in table.clients]
        self._start = self._end = 0
        self._values: dict[int, Any] = {}
        self._class_names: dict[int | None, str] = {}
        self._defs = context(folder.decoders.profile).defs

    def apply(self, i: int) -> None:
        k = self._local(i)
        _APPLY[self.kind[k]](self, k)

    def _local(self, i: int) -> int:
        """Effect ``i``'s place in the block of effects held as Python values (one block at a time: a list
        of every effect's values would hold tens of bytes per effect per column)."""
        if not self._start <= i < self._end:
            self._start = i - i % BLOCK
            self._end = self._start + BLOCK
            got: dict[str, list[int]] = {name: column[self._start:self._end].tolist()
                                         for name, column in self._columns.items()}
            self.rows, self.first_seq, self.last_seq, self.last_ns = (got["rows"], got["first_seq"], got["last_seq"],
                                                                      got["last_ns"])
            self.kind, self.h_client, self.handle, self.parent = (got["kind"], got["h_client"], got["handle"],
                                                                  got["parent"])
            self.src_client, self.src_handle = got["src_client"], got["src_handle"]
            self.command, self.with_params, self.params_seq = got["command"], got["with_params"], got["params_seq"]
            self.client = [self._clients[k] if k >= 0 else None for k in got["client"]]
            self.status = [self.table.status_names.values[k] if k >= 0 else "NV_OK" for k in got["status"]]
            self.class_id = [None if k == NO_CLASS else k for k in got["class_id"]]
            self.category = [CATEGORIES[k] for k in got["category"]]
            if self.params is not None and self.params.stash is not None:  # the fold is at effect i's row: it
                self.params.stash.forget_before(self.first_seq[i - self._start])  # reads no earlier record again
            self._values = self._block_params(got)
        return i - self._start

    def _block_params(self, got: dict[str, list[int]]) -> dict[int, Any]:
        """The block's params values (``params_value``) that its AFTER buffers give, found and read for the
        whole block at once (``ParamsReader.after_buffers``, ``params_values``), by effect in the block."""
        if self.params is None:
            return {}
        picked = np.flatnonzero(np.array(got["with_params"], dtype=bool))
        control = np.array(got["kind"], dtype=np.int64)[picked] == EffectKind.CONTROL
        roles = np.where(control, int(Role.PARAMS), int(Role.ALLOC_PARAMS))
        classes = np.array(got["class_id"], dtype=np.int64)[picked]
        keys = np.where(control, np.array(got["command"], dtype=np.int64)[picked],
                        np.where(classes == NO_CLASS, 0, classes))
        found = self.params.after_buffers(np.array(got["params_seq"], dtype=np.int64)[picked], roles)
        values = params_values(self._defs, self.folder.profile, found, roles, keys)
        return {k: value for k, value in zip(picked.tolist(), values) if value is not None}

    def params_value(self, k: int, role: Role, key: int) -> Any:
        """The value of the params buffer of ``role`` of the records of effect ``k`` of the block, as
        ``buffer_value`` reads it from the Decoded the interpreter is given (``params_buffers``: views by
        the class or command ``key``)."""
        assert self.params is not None
        value = self._values.get(k)
        if value is not None:
            return value
        # ``value_of`` takes the first readable AFTER copy, and only the call's last record (its exit) holds
        # one: the others are read only when that one is not there (or not whole)
        after = self.params.buffer(self.params_seq[k], role, When.AFTER)
        value = params_view(self._defs, self.folder.profile, after, key) if after is not None else None
        if value is not None:
            return value
        records = [Record(Source.RM, _ENTER, buffers=self.params.buffers(seq))
                   for seq, _ in self.table.records_of(self.rows[k])]
        return value_of(params_buffers(self._defs, self.folder.profile, records, key), role)

    def params_event(self, i: int) -> ev.Event | None:
        """What effect ``i``'s params say beyond its row (None where they say nothing more)."""
        return self._params_event(self._local(i))

    def _params_event(self, i: int) -> ev.Event | None:
        if not self.with_params[i]:
            return None
        if self.kind[i] == EffectKind.CONTROL:
            command = self.command[i]
            return control_event(self.folder.interpreter.roles.controls[command], self.h_client[i], self.handle[i],
                                 self.params_value(i, Role.PARAMS, command))
        cls = self.class_id[i]
        return alloc_params_event(self.category[i], self.h_client[i], self.handle[i], self.parent[i],
                                  self.params_value(i, Role.ALLOC_PARAMS, cls if cls is not None else 0))

    def _allocated(self, i: int) -> None:
        cls = self.class_id[i]
        name = self._class_names.get(cls)
        if name is None:
            name = self._class_names[cls] = self.folder.interpreter.class_name(cls)
        self.folder.add_object(self.client[i], self.h_client[i], self.handle[i], self.parent[i] or None, cls,
                               self.category[i], name, self.first_seq[i], self.last_ns[i], self.status[i])
        if self.with_params[i] and self.params is not None:
            event = self._params_event(i)
            if isinstance(event, ev.ChannelAllocated):
                channel_allocated(self.folder, event, self.first_seq[i], self.last_ns[i], self.last_seq[i])
            elif isinstance(event, ev.ChannelGroupAllocated):
                tsg_allocated(self.folder, event, self.first_seq[i])

    def _control(self, i: int) -> None:
        if self.params is None:
            return
        event = self._params_event(i)
        t, seq = self.last_ns[i], self.last_seq[i]
        if isinstance(event, ev.WorkTokenIssued):
            token_issued(self.folder, event, t, seq)
        elif isinstance(event, ev.ChannelBound):
            bound(self.folder, event, t, seq)
        elif isinstance(event, ev.ChannelScheduled):
            scheduled(self.folder, event, t, seq)

    def _duplicated(self, i: int) -> None:
        duplicate(self.folder, self.client[i], self.h_client[i], self.handle[i], self.parent[i] or None,
                  self.src_client[i], self.src_handle[i], self.first_seq[i], self.last_ns[i], self.status[i])

    def _freed(self, i: int) -> None:
        if not free(self.folder, self.h_client[i], self.handle[i], self.last_ns[i], self.last_seq[i]):
            self.folder.stray_frees.append(self.table.info(self.rows[i]))

    def _uvm_registered(self, i: int) -> None:
        uvm_channel(self.folder, self.h_client[i], self.handle[i], True, self.last_ns[i], self.last_seq[i])

    def _uvm_unregistered(self, i: int) -> None:
        uvm_channel(self.folder, self.h_client[i], self.handle[i], False, self.last_ns[i], self.last_seq[i])


_APPLY: dict[int, Callable[[_EffectRows, int], None]] = {
    EffectKind.ALLOCATED: _EffectRows._allocated, EffectKind.ALLOCATED_MEMORY: _EffectRows._allocated,
    EffectKind.FREED: _EffectRows._freed, EffectKind.DUPLICATED: _EffectRows._duplicated,
    EffectKind.UVM_CHANNEL_REGISTERED: _EffectRows._uvm_registered,
    EffectKind.UVM_CHANNEL_UNREGISTERED: _EffectRows._uvm_unregistered, EffectKind.CONTROL: _EffectRows._control}
"""How ``_EffectRows`` applies an effect of each kind: functions of the class, not methods bound to one (a
table of an instance's own bound methods is a cycle, which the fold, with the collector held, would keep
with all its arrays until the collector ran)."""


def _last_records(table: CallTable, rows: np.ndarray, c: dict[str, np.ndarray]) -> np.ndarray:
    """The sequence number of each of ``rows``' last record (``CallTable.records_of``; ``c``: their
    ``exit_seq`` and ``enter_seq``, gathered)."""
    exit_seq = c["exit_seq"]
    last = np.where(exit_seq >= 0, exit_seq, c["enter_seq"].astype(np.int64))
    if table.members:
        parted = np.flatnonzero(np.isin(rows, np.fromiter(table.members, dtype=np.int64)))
        last[parted] = [table.members[row][-1][0] for row in rows[parted].tolist()]
    return last


def _blocks(table: CallTable, rows: np.ndarray, need: np.ndarray, folder: Folder, plan: Plan,
            reader: Rereader) -> Iterator[tuple[int, CallInfo, CallMeaning]]:
    """(row, its CallInfo, what it means) for each of ``rows`` (``need[i]``: row ``rows[i]``'s), in order,
    ``DECODE_BLOCK`` rows at a time."""
    for at in range(0, len(rows), DECODE_BLOCK):
        block, wanted = rows[at:at + DECODE_BLOCK], need[at:at + DECODE_BLOCK]
        # a row read again from its records is decoded from them: the columns' Decoded only where one is ROW
        infos, decoded = table.infos_and_decoded(block, decoded=bool((wanted == _ROW).any()))
        if reader.stash is not None:  # the fold is at the block's first row: it reads no earlier record again
            reader.stash.forget_before(infos[0].enter_seq)
        yield from zip(block.tolist(), infos, _meanings(table, block, wanted, decoded, folder, plan, reader))
        table.release(int(block[0]), int(block[-1]))
        if not gc.isenabled():
            gc.collect(1)


def _meanings(table: CallTable, rows: np.ndarray, need: np.ndarray, decoded: list[Decoded], folder: Folder,
              plan: Plan, reader: Rereader) -> Iterator[CallMeaning]:
    """What each of ``rows`` means, in order (``decoded``: each row's Decoded, as far as the columns say)."""
    interpreter = folder.interpreter
    cols = {name: column.tolist() for name, column in table.gather(rows, (
        "source", "op", "state", "pid", "tid", "call_id", "fd", "enter_seq", "exit_seq", "t_enter", "t_exit", "key")).items()}
    defs, profile = context(folder.decoders.profile).defs, folder.decoders.profile
    params = ParamsReader(reader.reader, reader.stash)
    states = [STATES[s] for s in cols["state"]]
    # the records of the rows read from them that the stash lacks, read in the trace's order: a call's exit may
    # be chunks after its enter, and reading them row by row went back and forth past the reader's few cached
    # chunks (each chunk decompressed again, a third of the chunks at 1M records).  Those the stash has are
    # decoded as their rows come (all of a block's at once were the objects' fold's peak, 13 MB at 1M records)
    records_of = {row: table.records_of(row) for row in rows[need != _ROW].tolist()}
    if len(rows):  # records_of read these at rows spread over the table, touching every page
        table.release(int(rows[0]), int(rows[-1]) + 1, ("enter_seq", "exit_seq", "t_enter", "t_exit"))
    located = {seq: reader.locate(seq) for seq in sorted(seq for found in records_of.values() for seq, _ in found)}
    read = {seq: reader.reader.record_at(seq) for seq, where in located.items() if where is None}
    for i, (row, by_row) in enumerate(zip(rows.tolist(), (need == _ROW).tolist())):
        state = states[i]
        if by_row:
            d = decoded[i]
            _key_member(d, plan, cols["key"][i])
            if not interpreter.needs_params(d):
                yield interpreter.meaning(Call(_header_records(cols, i, state), state), d)
                continue
        if by_row:  # the row, and the few params members the semantic layer reads from views
            records = _header_records(cols, i, state, params)
            d.buffers = params_buffers(defs, profile, records, cols["key"][i])
            yield interpreter.meaning(Call(records, state), d)
        else:
            yield interpreter.interpret(Call(tuple(_located(seq, located, read) for seq, _ in records_of.pop(row)),
                                             state))


def _located(seq: int, located: dict[int, tuple[bytes, int] | None], read: dict[int, Record]) -> Record:
    """Record ``seq`` as ``_meanings`` found it: decoded where the stash holds it, else as read from the trace."""
    where = located[seq]
    return decode_record(*where) if where is not None else read[seq]


def _key_member(d: Decoded, plan: Plan, key: int) -> None:
    """Where a decode puts the argument's class or command: ``extra`` under the member's name for an
    escape named by it, ``args`` for an allocation that only carries it."""
    name = _key_name(plan, d.source, d.op)
    if name is not None:
        d.extra[name] = key
    elif key:
        d.args[CLASS_MEMBER] = key


def _key_name(plan: Plan, source: int, op: int) -> str | None:
    """The argument member naming calls of (source, op), None when the decoder is not named by one."""
    decoder = plan.op(source, op).op
    return decoder.key if isinstance(decoder, NamedByArg) else None


def _header_records(cols: dict[str, list], i: int, state: CallState,
                    params: ParamsReader | None = None) -> tuple[Record, ...]:
    """A call's records as far as the table keeps them: their header fields, and with ``params`` their
    params buffers (no other buffer)."""
    def record(phase: Phase, seq: int, time: int) -> Record:
        return Record(cols["source"][i], phase, cols["op"][i], seq, time, cols["pid"][i], cols["tid"][i],
                      cols["call_id"][i], cols["fd"][i], buffers=params.buffers(seq) if params is not None else ())
    if state is _RESUMED:  # an exit whose enter the trace lacks
        return (record(_EXIT, cols["enter_seq"][i], cols["t_enter"][i]),)
    enter = record(_ENTER, cols["enter_seq"][i], cols["t_enter"][i])
    if state is _IN_FLIGHT or cols["exit_seq"][i] < 0:
        return (enter,)
    return enter, record(_EXIT, cols["exit_seq"][i], cols["t_exit"][i])


_NEVER = 1 << 62
"""A row after every row (``TableFold._make``: nothing left to make)."""
# enum members looked up once: in a loop, each ``Enum.MEMBER`` is a class attribute lookup
_ROW = Need.ROW
_ENTER, _EXIT = Phase.ENTER, Phase.EXIT
_IN_FLIGHT, _RESUMED = CallState.IN_FLIGHT, CallState.RESUMED

