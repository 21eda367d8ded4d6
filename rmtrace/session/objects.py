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
from dataclasses import dataclass, fields
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


@dataclass
class ObjectColumns:
    """Every RM object of a trace, in allocation order, one array per field (``RmObject``'s)."""

    client: np.ndarray      # int32: index into ``client_ids``
    h_client: np.ndarray    # int64
    handle: np.ndarray      # int64
    parent: np.ndarray      # int64, NONE where the allocation named no parent (``has_parent``)
    has_parent: np.ndarray  # bool
    cls: np.ndarray         # int64 (-1: no class)
    class_name: np.ndarray  # int32: index into ``names``
    category: np.ndarray    # int8: index into ``CATEGORIES``
    alloc_seq: np.ndarray   # int64
    alloc_ns: np.ndarray    # int64
    free_seq: np.ndarray    # int64 (meaningful where ``freed_by`` > 0)
    free_ns: np.ndarray     # int64
    freed_by: np.ndarray    # int8: index into ``FREED_BY``
    status: np.ndarray      # int32: index into ``names``
    base: np.ndarray        # int32: the object whose stable name this one's continues (-1: none)
    order: np.ndarray       # int32: its place among its client's objects of its base's name and class
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

    def stable_names(self) -> list[str]:
        """Each object's stable name (``Folder.add_object``'s: its base's name, its class and order)."""
        out: list[str] = []
        names = self.names
        for base, cls, order in zip(self.base.tolist(), self.class_name.tolist(), self.order.tolist()):
            out.append(stable_name(out[base] if base >= 0 else "", names[cls], order))  # a base is an earlier object
        return out

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
        dtypes = (np.int32, np.int64, np.int64, np.int64, bool, np.int64, np.int32, np.int8, np.int64, np.int64,
                  np.int64, np.int64, np.int8, np.int32, np.int32, np.int32)
        columns = list(zip(*rows)) if rows else [()] * len(dtypes)
        arrays = {f.name: np.array(values, dtype=dtype) for f, values, dtype in zip(fields(cls), columns, dtypes)}
        return cls(**arrays, client_ids=tuple(client_ids), names=tuple(interned))

    def save(self, directory: Path, prefix: str) -> dict[str, Any]:
        """Write the arrays as ``directory/{prefix}.{field}.npy``; returns what ``load`` needs besides."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                np.save(directory / f"{prefix}.{f.name}.npy", value)
        return {"rows": len(self), "client_ids": list(self.client_ids), "names": list(self.names)}

    @classmethod
    def load(cls, saved: dict[str, Any], directory: Path, prefix: str) -> ObjectColumns:
        """The columns ``save`` wrote, memory-mapped (a warm open maps them, it does not rebuild them)."""
        arrays = {f.name: np.load(directory / f"{prefix}.{f.name}.npy", mmap_mode="r")
                  for f in fields(cls) if f.name not in ("client_ids", "names")}
        if any(len(a) != saved["rows"] for a in arrays.values()):
            raise ValueError(f"{prefix}: a column of the wrong length")
        return cls(**arrays, client_ids=tuple(saved["client_ids"]), names=tuple(saved["names"]))


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
        """Every operation's columns (``OP_DTYPES``), in the fold's order (a row's own, then a later row's),
        its client an index into ``clients`` (-1: none).  The rows' columns are let go of one by one."""
        index: dict[str | None, int] = {c.id: i for i, c in enumerate(clients)}
        logged = {name: [op[k] for _, op in self.log] for k, name in enumerate(OP_FIELDS)}
        logged["client"] = [index.get(c, -1) for c in logged["client"]]
        logged["name"] = [self.name(n) for n in logged["name"]]
        logged["status"] = [self.name(n) for n in logged["status"]]
        rows = np.array([row for row, _ in self.log], dtype=np.int64)
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

    def resolve(self, clients: Sequence[Client]) -> ObjectColumns:
        """Apply the operations as the fold applies them: the objects, and each client's root handles
        (``Client.rm_clients``, ``h_client``) as the fold leaves them (``clients``: the fold's)."""
        ops = self._merged(clients)
        dup_name, other = self.name("DUP"), CATEGORIES.index(Category.OTHER)
        state = _Objects()
        by_handle, children = state.by_handle, state.children
        parents, has_parents = state.parents, state.has_parents
        free_object = state.free
        # keys of several ints as one number, exact: a name or an order is below the count of operations
        n_ops, n_names = len(ops["kind"]) + 1, len(self._names) + 1
        siblings: dict[int, int] = {}  # (client, base's name, class name): objects so far
        stable: dict[int, int] = {}  # (base's name, class name, order) -> a name
        made, name_of, bases, orders = array("q"), array("q"), array("q"), array("q")
        """Each object's operation, stable name (an index into ``stable``), base and order among its siblings."""
        classes, categories = array("q"), array("q")
        copied: dict[int, int] = {}  # a duplicate: the object it copies
        rm_clients: dict[int, list[int]] = {}
        root = CATEGORIES.index(Category.ROOT)

        free_op, exit_op, dup_op = int(Op.FREE), int(Op.EXIT), int(Op.DUP)  # an enum member is an attribute lookup
        names = ("kind", "client", "h_client", "handle", "parent", "has_parent", "category", "name", "seq", "ns",
                 "src_client", "src_handle")
        for at, (kind, client, h_client, handle, parent, has_parent, category, name, seq, ns, src_client,
                 src_handle) in enumerate(in_blocks(*(ops[name] for name in names))):
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
            if kind == dup_op:
                src = by_handle.get(src_client << 32 | src_handle)
                if src is None:
                    name, category = dup_name, other
                else:
                    copied[len(made)] = src
                    name, category = classes[src], categories[src]
            if category == root:
                rm_clients.setdefault(client, []).append(handle)
            base = by_handle.get(h_client << 32 | parent, -1) if has_parent else -1
            base_name = name_of[base] if base >= 0 else -1
            key = (client * n_ops + base_name + 1) * n_names + name
            order = siblings.get(key, 0)
            siblings[key] = order + 1
            name_key = ((base_name + 1) * n_names + name) * n_ops + order
            own = stable.get(name_key)
            if own is None:
                own = stable[name_key] = len(stable)
            by_handle[h_client << 32 | handle] = len(made)
            made.append(at)
            name_of.append(own)
            bases.append(base)
            orders.append(order)
            classes.append(name)
            categories.append(category)
            parents.append(parent)
            has_parents.append(has_parent)
            if has_parent:
                children.setdefault(h_client << 32 | parent, []).append(handle)
        for client, handles in rm_clients.items():
            clients[client].rm_clients.extend(handles)
            if clients[client].h_client is None:
                clients[client].h_client = handles[0]
        return self._columns(ops, made, bases, orders, classes, categories, copied, (state.freed, state.free_seq, state.free_ns),
                             clients)

    def _columns(self, ops: dict[str, np.ndarray], made: array, bases: array, orders: array,
                 classes: array, categories: array, copied: dict[int, int], frees: tuple[dict[int, int], ...],
                 clients: Sequence[Client]) -> ObjectColumns:
        """The objects' columns: each of ``made`` (the operations that made them) with its fields."""
        names = tuple(self._names)
        class_name = np.frombuffer(classes, dtype=np.int64).astype(np.int32)
        if any("/" in names[i] or "#" in names[i] for i in distinct(class_name).tolist()):
            raise Ambiguous("a class name with '/' or '#'")
        at = np.frombuffer(made, dtype=np.int64)
        cls = np.where(ops["kind"][at] == Op.DUP, -1, ops["cls"][at])  # a copy of nothing known has no class
        for obj, src in copied.items():  # in order: a copy of a copy copies what its source copied
            cls[obj] = cls[src]
        n = len(at)
        free_seq, free_ns, freed_by = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, np.int8)
        freed, seqs, times = frees
        if freed:
            gone = np.fromiter(freed, dtype=np.int64, count=len(freed))
            freed_by[gone] = np.fromiter(freed.values(), dtype=np.int8, count=len(freed))
            free_seq[gone] = np.fromiter(seqs.values(), dtype=np.int64, count=len(freed))
            free_ns[gone] = np.fromiter(times.values(), dtype=np.int64, count=len(freed))
        return ObjectColumns(
            client=ops["client"][at].astype(np.int32), h_client=ops["h_client"][at].astype(np.int64),
            handle=ops["handle"][at].astype(np.int64),
            parent=np.where(ops["has_parent"][at] != 0, ops["parent"][at], NONE), has_parent=ops["has_parent"][at] != 0,
            cls=cls, class_name=class_name, category=np.frombuffer(categories, dtype=np.int64).astype(np.int8), alloc_seq=ops["seq"][at],
            alloc_ns=ops["ns"][at], free_seq=free_seq, free_ns=free_ns, freed_by=freed_by,
            status=ops["status"][at].astype(np.int32), base=np.frombuffer(bases, dtype=np.int64).astype(np.int32),
            order=np.frombuffer(orders, dtype=np.int64).astype(np.int32), client_ids=tuple(c.id for c in clients), names=names)


class _Objects:
    """What ``ObjectsFold.resolve`` keeps of the objects as it goes, and a free (a class, not a closure:
    a recursive closure refers to itself, a cycle that would keep these dicts until the collector ran).
    Each (hClient, handle) is one number, ``hClient << 32 | handle``: a tuple key and its ints cost four
    times as much, and a 10M-record trace has a million objects."""

    def __init__(self) -> None:
        self.by_handle: dict[int, int] = {}  # the newest object of each (hClient, handle)
        self.children: dict[int, list[int]] = {}  # handles allocated under each, until it is freed
        self.parents, self.has_parents = array("q"), array("b")  # each object's parent handle, if it named one
        self.freed: dict[int, int] = {}  # object -> how it went (``FREED_BY``), and when:
        self.free_seq: dict[int, int] = {}
        self.free_ns: dict[int, int] = {}

    def free(self, h_client: int, handle: int, seq: int, t: int, how: int) -> None:
        """``Folder.free_object``: the newest object of the handle, and first what was allocated under it."""
        index = self.by_handle.get(h_client << 32 | handle)
        if index is None or index in self.freed:
            return
        for child in self.children.pop(h_client << 32 | handle, ()):
            self.free(h_client, child, seq, t, how)
        if self.has_parents[index]:
            same = self.children.get(h_client << 32 | self.parents[index])
            if same is not None and handle in same:
                same.remove(handle)
        self.freed[index], self.free_seq[index], self.free_ns[index] = how, seq, t  # again: its own child


class Ambiguous(ValueError):
    """What ``resolve``'s keys cannot tell apart: a class name with '/' or '#' (two stable names of different
    parts could read the same: the fold's siblings are counted by the text), a handle of more than 32 bits
    (two in one number).  The caller folds the objects as ``RmObject``\\ s (``Folder``)."""

