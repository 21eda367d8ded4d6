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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from rmtrace.decoders.roles import Category
from rmtrace.semantics import CallMeaning
from rmtrace.semantics import events as ev
from rmtrace.session.entities import CallInfo, Client, FreedBy, RmObject
from rmtrace.session.fold import Folder

CATEGORIES = tuple(Category)
FREED_BY: tuple[FreedBy | None, ...] = (None, FreedBy.RM_FREE, FreedBy.EXIT)
"""``ObjectColumns.freed_by`` holds the index of how an object went here (0: it did not)."""
NONE = -1
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
            own = f"{names[cls]}#{order}"
            out.append(f"{out[base]}/{own}" if base >= 0 else own)  # a base is always an earlier object
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
            head = f"{objects[base].stable_name}/{o.class_name}#" if base >= 0 else f"{o.class_name}#"
            order = o.stable_name[len(head):]
            if not o.stable_name.startswith(head) or not order.isdigit() or str(int(order)) != order:
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
        """Every operation's columns, in the fold's order (a row's own, then a later row's), its client
        an index into ``clients`` (-1: none)."""
        index: dict[str | None, int] = {c.id: i for i, c in enumerate(clients)}
        logged = {name: [op[k] for _, op in self.log] for k, name in enumerate(OP_FIELDS)}
        logged["client"] = [index.get(c, -1) for c in logged["client"]]
        logged["name"] = [self.name(n) for n in logged["name"]]
        logged["status"] = [self.name(n) for n in logged["status"]]
        parts = [{name: np.array(values, dtype=np.int64) for name, values in logged.items()}]
        rows = [np.array([row for row, _ in self.log], dtype=np.int64)]
        if self.row_ops is not None:
            remap = np.array([index.get(c, -1) for c in self.row_ops.clients], dtype=np.int64)
            own = dict(self.row_ops.columns)
            own["client"] = remap[own["client"]]
            parts.append({name: own[name].astype(np.int64) for name in OP_FIELDS})
            rows.append(self.row_ops.rows)
        order = np.argsort(np.concatenate(rows), kind="stable")  # rows differ between the two parts
        return {name: np.concatenate([part[name] for part in parts])[order] for name in OP_FIELDS}

    def resolve(self, clients: Sequence[Client]) -> ObjectColumns:
        """Apply the operations as the fold applies them: the objects, and each client's root handles
        (``Client.rm_clients``, ``h_client``) as the fold leaves them (``clients``: the fold's)."""
        ops = self._merged(clients)
        by_handle: dict[tuple[int, int], int] = {}  # the newest object of each (hClient, handle)
        children: dict[tuple[int, int], list[int]] = {}  # handles allocated under each, until it is freed
        siblings: dict[tuple[int, int, int], int] = {}  # (client, base's name, class name): objects so far
        stable: dict[tuple[int, int, int], int] = {}  # (base's name, class name, order) -> a name
        made: list[int] = []  # each object's operation
        name_of: list[int] = []  # each object's stable name (an index into ``stable``)
        bases: list[int] = []
        orders: list[int] = []
        classes: list[int] = []  # each object's class name
        categories: list[int] = []
        copied: dict[int, int] = {}  # a duplicate: the object it copies
        parents: list[tuple[bool, int]] = []
        freed: dict[int, int] = {}  # object -> how it went (``FREED_BY``), and when:
        free_seq: dict[int, int] = {}
        free_ns: dict[int, int] = {}
        rm_clients: dict[int, list[int]] = {}
        root = CATEGORIES.index(Category.ROOT)

        def free_object(h_client: int, handle: int, seq: int, t: int, how: int) -> None:
            index = by_handle.get((h_client, handle))
            if index is None or index in freed:
                return
            for child in children.pop((h_client, handle), ()):
                free_object(h_client, child, seq, t, how)
            has_parent, parent = parents[index]
            if has_parent:
                same = children.get((h_client, parent))
                if same is not None and handle in same:
                    same.remove(handle)
            freed[index], free_seq[index], free_ns[index] = how, seq, t  # again, where it was its own child

        dup_name, other = self.name("DUP"), CATEGORIES.index(Category.OTHER)
        free_op, exit_op, dup_op = int(Op.FREE), int(Op.EXIT), int(Op.DUP)  # an enum member is an attribute lookup
        columns = [ops[name].tolist() for name in ("kind", "client", "h_client", "handle", "parent", "has_parent",
                                                   "category", "name", "seq", "ns", "src_client", "src_handle")]
        for at, (kind, client, h_client, handle, parent, has_parent, category, name, seq, ns, src_client,
                 src_handle) in enumerate(zip(*columns)):
            if kind == free_op:  # rmtrace.session.fold.free; a stray free frees nothing
                if not h_client or h_client == handle:
                    h_client = handle if (handle, handle) in by_handle else h_client
                free_object(h_client, handle, seq, ns, 1)
                continue
            if kind == exit_op:  # the kernel frees what the process left behind (``_exited``)
                for h in rm_clients.get(client, ()):
                    free_object(h, h, seq, ns, 2)
                continue
            if client < 0:  # ``Folder.add_object``: an object of no client is not kept
                continue
            if kind == dup_op:
                src = by_handle.get((src_client, src_handle))
                if src is None:
                    name, category = dup_name, other
                else:
                    copied[len(made)] = src
                    name, category = classes[src], categories[src]
            if category == root:
                rm_clients.setdefault(client, []).append(handle)
            base = by_handle.get((h_client, parent), -1) if has_parent else -1
            base_name = name_of[base] if base >= 0 else -1
            key = (client, base_name, name)
            order = siblings.get(key, 0)
            siblings[key] = order + 1
            name_key = (base_name, name, order)
            own = stable.get(name_key)
            if own is None:
                own = stable[name_key] = len(stable)
            by_handle[(h_client, handle)] = len(made)
            made.append(at)
            name_of.append(own)
            bases.append(base)
            orders.append(order)
            classes.append(name)
            categories.append(category)
            parents.append((has_parent, parent))
            if has_parent:
                children.setdefault((h_client, parent), []).append(handle)
        for client, handles in rm_clients.items():
            clients[client].rm_clients.extend(handles)
            if clients[client].h_client is None:
                clients[client].h_client = handles[0]
        return self._columns(ops, made, bases, orders, classes, categories, copied, (freed, free_seq, free_ns), clients)

    def _columns(self, ops: dict[str, np.ndarray], made: list[int], bases: list[int], orders: list[int],
                 classes: list[int], categories: list[int], copied: dict[int, int], frees: tuple[dict[int, int], ...],
                 clients: Sequence[Client]) -> ObjectColumns:
        """The objects' columns: each of ``made`` (the operations that made them) with its fields."""
        names = tuple(self._names)
        class_name = np.array(classes, dtype=np.int32)
        if any("/" in names[i] or "#" in names[i] for i in np.unique(class_name).tolist()):
            raise Ambiguous("a class name with '/' or '#'")
        at = np.array(made, dtype=np.int64)
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
            client=ops["client"][at].astype(np.int32), h_client=ops["h_client"][at], handle=ops["handle"][at],
            parent=np.where(ops["has_parent"][at] != 0, ops["parent"][at], NONE), has_parent=ops["has_parent"][at] != 0,
            cls=cls, class_name=class_name, category=np.array(categories, dtype=np.int8), alloc_seq=ops["seq"][at],
            alloc_ns=ops["ns"][at], free_seq=free_seq, free_ns=free_ns, freed_by=freed_by,
            status=ops["status"][at].astype(np.int32), base=np.array(bases, dtype=np.int32),
            order=np.array(orders, dtype=np.int32), client_ids=tuple(c.id for c in clients), names=names)


class Ambiguous(ValueError):
    """A class name with '/' or '#': two stable names made of different parts could read the same, so
    the columns' names (by parts) might not be the fold's (by text); the caller folds the objects as objects."""

