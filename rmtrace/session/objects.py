"""A trace's RM objects as columns: what ``load_objects`` folds, without a Python object per RM object.

``Folder`` keeps an ``RmObject`` per object, with its stable name as a string: about 0.5 KB each, and
most of a fold that only wants the objects (``rmtrace stats``).  ``ObjectsFold`` makes the same objects
as numbers: the fold's object operations (``Op``: allocations, duplicates, frees, a process's exit),
logged in the fold's order, are replayed over a few dicts of ints (``ObjectsFold.resolve``), as
``Folder.add_object``, ``free_object``, ``rmtrace.session.fold.free``, ``duplicate`` and ``_exited``
apply them: the newest object of each (hClient, handle), the children named under each handle, a
freed parent freeing its children, a client's root handles freed at its exit.  The result is
``ObjectColumns``: one array per field, and each stable name as its parent's object and an order among
its siblings (the string is made only when asked for, ``stable_name``).  ``ObjectColumns.objects``
makes the ``RmObject``\\ s, equal field for field to the fold's; ``tests/test_session_objects.py``
checks that on every test trace and committed capture.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from rmtrace.columns.arrays import distinct
from rmtrace.decoders.roles import Category
from rmtrace.semantics import CallMeaning
from rmtrace.semantics import events as ev
from rmtrace.session.blocks import in_blocks
from rmtrace.session.entities import CallInfo, Client, FreedBy, RmObject, stable_name
from rmtrace.session.fold import Folder

CATEGORIES = tuple(Category)
FREED_BY: tuple[FreedBy | None, ...] = (None, FreedBy.RM_FREE, FreedBy.EXIT)
"""``ObjectColumns.freed_by`` holds the index of how an object went here (0: it did not)."""
NONE = -1
HANDLE_MAX = (1 << 32) - 1
"""RM handles are 32-bit numbers (NvHandle)."""
"""A column's value for None (a parent not named, a class not known, a sequence number not reached)."""


class Op(enum.IntEnum):
    """An object operation of the fold, in its order (``ObjectsFold.log``)."""

    ALLOC = 0      # (client, h_client, handle, parent, class_id, category, class_name, alloc_seq, alloc_ns, status)
    DUP = 1        # (client, h_client, handle, parent, src_client, src_handle, alloc_seq, alloc_ns, status)
    FREE = 2       # (h_client, handle, t_ns, seq)
    EXIT = 3       # (client, t_ns, seq): the kernel frees the client's root handles


def _array(dtype: type[np.generic]) -> dict[str, type[np.generic]]:
    """The metadata of a field of ``ObjectColumns`` that is one of its arrays, of ``dtype`` (``ARRAYS``
    reads them back)."""
    return {"dtype": dtype}


@dataclass
class ObjectColumns:
    """Every RM object of a trace, in allocation order, one array per field (``RmObject``'s)."""

    client: np.ndarray = field(metadata=_array(np.int32))  # index into ``client_ids``
    h_client: np.ndarray = field(metadata=_array(np.int64))
    handle: np.ndarray = field(metadata=_array(np.int64))
    parent: np.ndarray = field(metadata=_array(np.int64))  # NONE where the allocation named no parent (``has_parent``)
    has_parent: np.ndarray = field(metadata=_array(np.bool_))
    cls: np.ndarray = field(metadata=_array(np.int64))  # -1: no class
    class_name: np.ndarray = field(metadata=_array(np.int32))  # index into ``names``
    category: np.ndarray = field(metadata=_array(np.int8))  # index into ``CATEGORIES``
    alloc_seq: np.ndarray = field(metadata=_array(np.int64))
    alloc_ns: np.ndarray = field(metadata=_array(np.int64))
    free_seq: np.ndarray = field(metadata=_array(np.int64))  # meaningful where ``freed_by`` > 0
    free_ns: np.ndarray = field(metadata=_array(np.int64))
    freed_by: np.ndarray = field(metadata=_array(np.int8))  # index into ``FREED_BY``
    status: np.ndarray = field(metadata=_array(np.int32))  # index into ``names``
    base: np.ndarray = field(metadata=_array(np.int32))  # the object whose stable name this one's continues (-1: none)
    order: np.ndarray = field(metadata=_array(np.int32))  # its place among its client's objects of its base's name and class
    client_ids: tuple[str, ...]
    names: tuple[str, ...]
    """The class names and statuses the columns index."""

    def __len__(self) -> int:
        return len(self.handle)

    def counts(self) -> dict[str, dict[FreedBy | None, int]]:
        """Objects per client id, per how they went (None: leaked), with numpy."""
        pairs = self.client.astype(np.int64) * len(FREED_BY) + self.freed_by
        per = np.bincount(pairs, minlength=len(self.client_ids) * len(FREED_BY)).reshape(-1, len(FREED_BY))
        seen = np.bincount(self.client, minlength=len(self.client_ids)) > 0
        return {self.client_ids[i]: {how: int(n) for how, n in zip(FREED_BY, per[i].tolist()) if n}
                for i in np.flatnonzero(seen).tolist()}

    def stable_names(self, wanted: Sequence[int] | None = None) -> list[str]:
        """Each object's stable name (``Folder.add_object``'s: its base's name, its class and order), or
        those of the objects ``wanted`` alone: each made from its bases', made once for all of them (a
        caller that names a block's objects at a time never holds every name)."""
        names = self.names
        if wanted is None:
            out: list[str] = []
            for base, cls, order in zip(self.base.tolist(), self.class_name.tolist(), self.order.tolist()):
                out.append(stable_name(out[base] if base >= 0 else "", names[cls], order))  # a base is earlier
            return out
        made: dict[int, str] = {}
        for first in wanted:
            chain, i = [], first
            while i >= 0 and i not in made:  # up to an object named already, or one of no base
                chain.append(i)
                i = int(self.base[i])
            for i in reversed(chain):
                base = int(self.base[i])
                made[i] = stable_name(made[base] if base >= 0 else "", names[int(self.class_name[i])],
                                      int(self.order[i]))
        return [made[i] for i in wanted]

    def objects(self) -> list[RmObject]:
        """The objects as the fold makes them."""
        names, ids = self.names, self.client_ids
        freed = self.freed_by.tolist()
        columns = zip(self.client.tolist(), self.handle.tolist(), self.parent.tolist(), self.has_parent.tolist(),
                      self.cls.tolist(), self.class_name.tolist(), self.stable_names(), self.alloc_seq.tolist(),
                      self.alloc_ns.tolist(), self.free_seq.tolist(), self.free_ns.tolist(), self.status.tolist(),
                      self.h_client.tolist(), freed, self.category.tolist())
        return [RmObject(ids[client], handle, parent if has_parent else None, cls, names[name], stable, seq, ns,
                         free_seq if how else None, free_ns if how else None, names[status], h_client, FREED_BY[how],
                         CATEGORIES[category])
                for (client, handle, parent, has_parent, cls, name, stable, seq, ns, free_seq, free_ns, status,
                     h_client, how, category) in columns]

    @classmethod
    def from_objects(cls, objects: Sequence[RmObject], client_ids: Sequence[str]) -> ObjectColumns:
        """The columns of a fold's ``objects`` (``Folder.object_list``: in allocation order, each stable name
        its base's and its class's); ValueError for objects no fold made so."""
        client = {c: i for i, c in enumerate(client_ids)}
        interned: dict[str, int] = {}
        by_handle: dict[tuple[int, int], int] = {}  # as Folder._by_handle stood at each allocation
        rows: list[tuple[int, ...]] = []
        for i, o in enumerate(objects):
            base = by_handle.get((o.h_client, o.parent), -1) if o.parent is not None else -1
            order = o.stable_name.rpartition("#")[2]
            base_name = objects[base].stable_name if base >= 0 else ""
            if not order.isdigit() or o.stable_name != stable_name(base_name, o.class_name, int(order)):
                raise ValueError(f"object {i}: {o.stable_name!r} is not its base's and class's name")
            if (o.free_seq is None) != (o.freed_by is None) or (o.free_ns is None) != (o.freed_by is None):
                raise ValueError(f"object {i}: freed by {o.freed_by} at {o.free_seq}")
            by_handle[(o.h_client, o.handle)] = i
            rows.append((client[o.client_id], o.h_client, o.handle, NONE if o.parent is None else o.parent,
                         o.parent is not None, o.cls, interned.setdefault(o.class_name, len(interned)),
                         CATEGORIES.index(o.category), o.alloc_seq, o.alloc_ns, o.free_seq or 0, o.free_ns or 0,
                         FREED_BY.index(o.freed_by), interned.setdefault(o.status, len(interned)), base, int(order)))
        columns = list(zip(*rows)) if rows else [()] * len(ARRAYS)
        arrays = {name: np.array(values, dtype=dtype) for (name, dtype), values in zip(ARRAYS.items(), columns)}
        return cls(**arrays, client_ids=tuple(client_ids), names=tuple(interned))

    def save(self, directory: Path, prefix: str) -> dict[str, Any]:
        """Write the arrays as ``directory/{prefix}.{field}.npy``; returns what ``load`` needs besides."""
        for name in ARRAYS:
            np.save(directory / f"{prefix}.{name}.npy", getattr(self, name))
        return {"rows": len(self), "client_ids": list(self.client_ids), "names": list(self.names)}

    @classmethod
    def load(cls, saved: dict[str, Any], directory: Path, prefix: str) -> ObjectColumns:
        """The columns ``save`` wrote, memory-mapped (a warm open maps them, it does not rebuild them)."""
        arrays = {name: np.load(directory / f"{prefix}.{name}.npy", mmap_mode="r") for name in ARRAYS}
        if any(len(a) != saved["rows"] for a in arrays.values()):
            raise ValueError(f"{prefix}: a column of the wrong length")
        return cls(**arrays, client_ids=tuple(saved["client_ids"]), names=tuple(saved["names"]))


ARRAYS: dict[str, type[np.generic]] = {f.name: f.metadata["dtype"] for f in fields(ObjectColumns) if "dtype" in f.metadata}
"""``ObjectColumns``' arrays, in its order, and the type of each: its fields say it once (``_array``)."""


def _typecode(dtype: type[np.generic]) -> str:
    """The ``array`` type code of ``dtype``'s items (a bool as a byte: ``array`` has no bool)."""
    return "b" if dtype is np.bool_ else np.dtype(dtype).char


class ObjectList(Sequence[RmObject]):
    """``ObjectColumns.objects``, made when first read (a caller that counts objects never makes them)."""

    def __init__(self, columns: ObjectColumns) -> None:
        self.columns = columns
        self._made: list[RmObject] | None = None

    @property
    def made(self) -> list[RmObject]:
        if self._made is None:
            self._made = self.columns.objects()
        return self._made

    def __len__(self) -> int:
        return len(self.columns)

    def __getitem__(self, i: Any) -> Any:
        return self.made[i]

    def __iter__(self) -> Iterator[RmObject]:
        return iter(self.made)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as one


class NewestObjects(Mapping[tuple[str, int], RmObject]):
    """(client id, handle) -> the newest object of that handle (``Folder.objects``), made from ``objects``
    when first read."""

    def __init__(self, objects: Sequence[RmObject]) -> None:
        self.objects = objects
        self._made: dict[tuple[str, int], RmObject] | None = None

    @property
    def made(self) -> dict[tuple[str, int], RmObject]:
        if self._made is None:
            self._made = {(o.client_id, o.handle): o for o in self.objects}
        return self._made

    def __getitem__(self, key: tuple[str, int]) -> RmObject:
        return self.made[key]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self.made)

    def __len__(self) -> int:
        return len(self.made)


OP_FIELDS = ("kind", "client", "h_client", "handle", "parent", "has_parent", "cls", "category", "name", "seq", "ns",
             "status", "src_client", "src_handle")
"""An operation's columns: an ``Op``; its client (an index into ``RowOps.clients``); its object's handles
and (ALLOC) class, category and class name (an index into ``ObjectsFold.names``); its record and time
(ALLOC, DUP: the allocation's first record and last time; FREE, EXIT: its last); its status (an index
into the names); and (DUP) the object it copies."""


OP_DTYPES = {"kind": np.int8, "client": np.int32, "h_client": np.uint32, "handle": np.uint32, "parent": np.uint32,
             "has_parent": np.bool_, "cls": np.int64, "category": np.int8, "name": np.int32, "seq": np.int64,
             "ns": np.int64, "status": np.int32, "src_client": np.uint32, "src_handle": np.uint32}
"""The operations' columns as ``resolve`` keeps them (a 10M-record trace has 1.6M operations)."""
HANDLES = ("h_client", "handle", "parent", "src_client", "src_handle")


@dataclass
class RowOps:
    """Object operations as columns (``OP_FIELDS``), at the rows of the call table they come from."""

    rows: np.ndarray
    columns: dict[str, np.ndarray]
    clients: Sequence[str | None]
    """The client ids ``columns["client"]`` indexes (-1: the last)."""


class ObjectsFold:
    """The fold's object operations: those of the rows read from their columns (``rows``: arrays), and
    those of the calls read from their records, logged as the fold meets them (``event``); ``resolve``
    applies them all in the fold's order."""

    def __init__(self) -> None:
        self.log: list[tuple[int, tuple[Any, ...]]] = []
        """(row, ``OP_FIELDS`` of its operation, the client by id and the names as text), in the fold's order."""
        self.row_ops: RowOps | None = None
        self._names: dict[str, int] = {}
        self._objects = _Objects()

    def name(self, text: str) -> int:
        """``text``'s index among the names the operations hold."""
        found = self._names.get(text)
        if found is None:
            found = self._names[text] = len(self._names)
        return found

    def rows(self, ops: RowOps) -> None:
        """The operations of the rows read from their columns."""
        self.row_ops = ops

    def event(self, row: int, event: ev.Event, meaning: CallMeaning, info: CallInfo, folder: Folder) -> bool:
        """Log what ``event`` of the call of ``row`` does to the objects, as the fold's handler of it
        would (``rmtrace.session.fold.EFFECTS``); False when the handler is still to run (all of it: an
        exit's other effects, or an event that is not the objects')."""
        first, last = meaning.call.first, meaning.call.last
        status = meaning.decoded.status_name or "NV_OK"
        if isinstance(event, ev.ObjectAllocated):
            self.log.append((row, (Op.ALLOC, info.client_id, event.h_client, event.handle, event.parent or 0,
                                   event.parent is not None, -1 if event.class_id is None else event.class_id,
                                   CATEGORIES.index(event.category), folder.interpreter.class_name(event.class_id),
                                   first.seq, last.time_ns, status, 0, 0)))
        elif isinstance(event, ev.ObjectDuplicated):
            self.log.append((row, (Op.DUP, info.client_id, event.h_client, event.handle, event.parent or 0,
                                   event.parent is not None, -1, 0, "DUP", first.seq, last.time_ns, status,
                                   event.src_client, event.src_handle)))
        elif isinstance(event, ev.ObjectFreed):
            self.log.append((row, (Op.FREE, None, event.h_client, event.handle, 0, False, -1, 0, "", last.seq,
                                   last.time_ns, "", 0, 0)))
        elif isinstance(event, ev.ProcessExited):
            client = folder._client_by_key.get(first.pid)
            if client is not None:
                self.log.append((row, (Op.EXIT, client.id, 0, 0, 0, False, -1, 0, "", first.seq, first.time_ns, "",
                                       0, 0)))
            return False  # the exit status and the client's lane are the fold's (its objects are logged here)
        else:
            return False
        return True

    def _merged(self, clients: Sequence[Client]) -> dict[str, np.ndarray]:
        """Every operation logged or given since the last ``apply``, its columns (``OP_DTYPES``), in the
        fold's order (a row's own, then a later row's), its client an index into ``clients`` (-1: none).
        The log and the rows' columns are let go of one by one."""
        index: dict[str | None, int] = {c.id: i for i, c in enumerate(clients)}
        logged = {name: [op[k] for _, op in self.log] for k, name in enumerate(OP_FIELDS)}
        logged["client"] = [index.get(c, -1) for c in logged["client"]]
        logged["name"] = [self.name(n) for n in logged["name"]]
        logged["status"] = [self.name(n) for n in logged["status"]]
        rows = np.array([row for row, _ in self.log], dtype=np.int64)
        self.log = []
        own, self.row_ops = self.row_ops, None
        if own is not None:
            remap = np.array([index.get(c, -1) for c in own.clients], dtype=np.int64)
            own.columns["client"] = remap[own.columns["client"]]
            rows = np.concatenate([rows, own.rows])
        order = np.argsort(rows, kind="stable")  # rows differ between the two parts
        del rows
        out: dict[str, np.ndarray] = {}
        for name in OP_FIELDS:
            parts = [np.array(logged.pop(name), dtype=np.int64)]
            if own is not None:
                parts.append(own.columns.pop(name))
            if name in HANDLES and any(((p < 0) | (p > HANDLE_MAX)).any() for p in parts):
                raise Ambiguous("a handle of more than 32 bits: resolve's keys hold two in one number")
            out[name] = np.concatenate(parts).astype(OP_DTYPES[name])[order]
        return out

    def apply(self, clients: Sequence[Client]) -> None:
        """Apply the operations given so far (``event``, ``rows``) as the fold applies them, and let them go:
        a fold that goes a block of rows at a time holds a block's operations, never the trace's
        (``clients``: the fold's so far; a later call's list starts with the same ones)."""
        self._objects.apply(self._merged(clients), self.name("DUP"))

    def resolve(self, clients: Sequence[Client]) -> ObjectColumns:
        """Apply the operations left as the fold applies them: the objects, and each client's root handles
        (``Client.rm_clients``, ``h_client``) as the fold leaves them (``clients``: the fold's)."""
        self.apply(clients)
        objects, self._objects = self._objects, _Objects()
        for client, handles in objects.rm_clients.items():
            clients[client].rm_clients.extend(handles)
            if clients[client].h_client is None:
                clients[client].h_client = handles[0]
        return objects.columns(tuple(c.id for c in clients), tuple(self._names))


class _Objects:
    """The objects as ``ObjectsFold.apply`` makes them, over ints, and a free (a class, not a closure: a
    recursive closure refers to itself, a cycle that would keep its dicts until the collector ran).

    Each (hClient, handle) is one number, ``hClient << 32 | handle``: a tuple key and its ints cost four
    times as much, and a 10M-record trace has a million objects.  Each object's fields are in arrays of
    the widths ``ObjectColumns`` holds (some 90 bytes an object), which become its columns without a copy.
    The fields an object takes from its operation as they are (``FROM_OPS``) are not appended one by one:
    the loop notes which operation made it, and ``flush`` gathers them from the operations' columns with
    numpy (sixteen appends an object were a fifth of the objects' fold).  What the loop works out (its
    base, order) and what a free reads (its parent) go at once, and the arrays a free writes are made
    long enough beforehand."""

    def __init__(self) -> None:
        self.by_handle: dict[int, int] = {}  # the newest object of each (hClient, handle)
        self.children: dict[int, list[int]] = {}  # handles allocated under each, until it is freed
        self.siblings: dict[int, int] = {}  # (client, base's name, class name): objects so far
        self.stable: dict[int, int] = {}  # (base's name, class name, order) -> a name
        self.rm_clients: dict[int, list[int]] = {}  # each client's root handles
        self.name_of = array("i")  # each object's stable name (an index into ``stable``)
        self.fields = {name: array(_typecode(dtype)) for name, dtype in ARRAYS.items()}
        """``ObjectColumns``' arrays, in its order (``freed_by``: 0 until the object is freed)."""
        self.made_by = array("q")
        """The operation (its place in ``apply``'s ``ops``) of each object made since the last ``flush``."""
        self.copied: list[tuple[int, int, int, int]] = []
        """(its place in ``made_by``, class name, category, class) of each copy made since then: what its
        source had, not what its operation holds."""

    def apply(self, ops: dict[str, np.ndarray], dup_name: int) -> None:
        """Apply ``ops`` (``ObjectsFold._merged``'s) in order."""
        f = self.fields
        by_handle, children, siblings, stable, rm_clients = (self.by_handle, self.children, self.siblings, self.stable,
                                                             self.rm_clients)
        name_of, class_names, categories, clss = self.name_of, f["class_name"], f["category"], f["cls"]
        made_by, copied = self.made_by, self.copied
        put_made, put_parent, put_base, put_order = made_by.append, f["parent"].append, f["base"].append, f["order"].append
        made = int(np.count_nonzero(ops["kind"] <= Op.DUP))  # at most one object per ALLOC or DUP
        for column in FREES:  # zeros a free of an object made here writes over
            f[column].frombytes(bytes(made * f[column].itemsize))
        other, root = CATEGORIES.index(Category.OTHER), CATEGORIES.index(Category.ROOT)
        free_op, exit_op, dup_op = int(Op.FREE), int(Op.EXIT), int(Op.DUP)  # an enum member is an attribute lookup
        free_object = self.free
        for i, (kind, client, h_client, handle, parent, has_parent, category, name, seq, ns, src_client,
                src_handle) in enumerate(in_blocks(*(ops[k] for k in LOOP_FIELDS))):
            if kind == free_op:  # rmtrace.session.fold.free; a stray free frees nothing
                if not h_client or h_client == handle:
                    h_client = handle if (handle << 32 | handle) in by_handle else h_client
                free_object(h_client, handle, seq, ns, 1)
                continue
            if kind == exit_op:  # the kernel frees what the process left behind (``_exited``)
                for h in rm_clients.get(client, ()):
                    free_object(h, h, seq, ns, 2)
                continue
            if client < 0:  # ``Folder.add_object``: an object of no client is not kept
                continue
            if kind == dup_op:  # a copy of nothing known has no class; a copy of a copy, what its source copied
                src = by_handle.get(src_client << 32 | src_handle)
                if src is None:
                    name, category, cls = dup_name, other, -1
                else:
                    if src >= len(clss):  # made since the last flush: its class is not in its array yet
                        self.flush(ops)
                    name, category, cls = class_names[src], categories[src], clss[src]
                copied.append((len(made_by), name, category, cls))
            if category == root:
                rm_clients.setdefault(client, []).append(handle)
            base = by_handle.get(h_client << 32 | parent, -1) if has_parent else -1
            base_name = name_of[base] if base >= 0 else -1
            key = client << 64 | (base_name + 1) << 32 | name  # exact: every index here is below 2**32
            order = siblings.get(key, 0)
            siblings[key] = order + 1
            name_key = ((base_name + 1) << 32 | name) << 32 | order
            own = stable.get(name_key)
            if own is None:
                own = stable[name_key] = len(stable)
            by_handle[h_client << 32 | handle] = len(name_of)
            name_of.append(own)
            put_made(i)
            put_parent(parent if has_parent else NONE)
            put_base(base)
            put_order(order)
            if has_parent:
                children.setdefault(h_client << 32 | parent, []).append(handle)
        self.flush(ops)
        for column in FREES:  # the room of the operations that made no object
            del f[column][len(name_of):]

    def flush(self, ops: dict[str, np.ndarray]) -> None:
        """Put the ``FROM_OPS`` fields of the objects made since the last flush into their arrays."""
        made = np.frombuffer(self.made_by, dtype=np.int64)
        at, *copied = zip(*self.copied) if self.copied else ((),)
        for name, op_field in FROM_OPS.items():
            values = ops[op_field][made].astype(ARRAYS[name])
            if at and name in COPIED:
                values[list(at)] = copied[COPIED.index(name)]
            self.fields[name].frombytes(values.tobytes())
        del made  # the view holds made_by's buffer: an array cannot shrink while it is exported
        del self.made_by[:]
        self.copied.clear()

    def free(self, h_client: int, handle: int, seq: int, t: int, how: int) -> None:
        """``Folder.free_object``: the newest object of the handle, and first what was allocated under it."""
        index = self.by_handle.get(h_client << 32 | handle)
        f = self.fields
        freed_by = f["freed_by"]
        if index is None or freed_by[index]:
            return
        for child in self.children.pop(h_client << 32 | handle, ()):
            self.free(h_client, child, seq, t, how)
        parent = f["parent"][index]
        if parent != NONE:  # it had a parent (handles are 32-bit: NONE is none)
            same = self.children.get(h_client << 32 | parent)
            if same is not None and handle in same:
                same.remove(handle)
        freed_by[index], f["free_seq"][index], f["free_ns"][index] = how, seq, t  # again: a child

    def columns(self, client_ids: tuple[str, ...], names: tuple[str, ...]) -> ObjectColumns:
        """The objects made so far as ``ObjectColumns`` (on these arrays: nothing is added to them after)."""
        arrays: dict[str, np.ndarray] = {name: np.frombuffer(values, dtype=ARRAYS[name])
                                         for name, values in self.fields.items()}
        if any("/" in names[i] or "#" in names[i] for i in distinct(arrays["class_name"]).tolist()):
            raise Ambiguous("a class name with '/' or '#'")
        return ObjectColumns(**arrays, client_ids=client_ids, names=names)


LOOP_FIELDS = ("kind", "client", "h_client", "handle", "parent", "has_parent", "category", "name", "seq", "ns",
               "src_client", "src_handle")
"""The operations' columns ``_Objects.apply`` reads for every operation."""
FROM_OPS = {"client": "client", "h_client": "h_client", "handle": "handle", "has_parent": "has_parent", "cls": "cls",
            "class_name": "name", "category": "category", "alloc_seq": "seq", "alloc_ns": "ns", "status": "status"}
"""The fields of an object that are its operation's columns (``ObjectColumns``' name: the operation's), as they
are but for a copy's class, class name and category (``COPIED``)."""
COPIED = ("class_name", "category", "cls")
"""The fields of a copy that are its source's, in the order ``_Objects.copied`` holds them."""
FREES = ("free_seq", "free_ns", "freed_by")
"""The fields of an object that a free writes."""


class Ambiguous(ValueError):
    """What ``resolve``'s keys cannot tell apart: a class name with '/' or '#' (two stable names of different
    parts could read the same: the fold's siblings are counted by the text), a handle of more than 32 bits
    (two in one number).  The caller folds the objects as ``RmObject``\\ s (``Folder``)."""

