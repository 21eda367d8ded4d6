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
import mmap
import tempfile
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from rmtrace.columns.arrays import distinct, group_rows
from rmtrace.columns.store import release_rows
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
        """Write the arrays as ``directory/{prefix}.{field}.npy`` (``np.save``'s bytes), a part at a time,
        the pages of a mapped array let go after each part (a fold's columns are in files: writing them
        must not hold them all); returns what ``load`` needs besides."""
        for name in ARRAYS:
            values = getattr(self, name)
            with open(directory / f"{prefix}.{name}.npy", "wb") as out:
                np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(values))
                for start in range(0, len(values), SAVE_ROWS):
                    out.write(np.ascontiguousarray(values[start:start + SAVE_ROWS]).data)
                    release_rows(values, start, start + SAVE_ROWS)
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


SAVE_ROWS = 1 << 18
"""Items of a column ``ObjectColumns.save`` writes at a time."""


class _Column:
    """A column of the fold's objects that only grows, in a file of its own (unlinked: it goes with the
    column), mapped; ``release`` lets go of its pages (the kernel keeps them in its page cache, and maps
    them again when read).  Only the newest objects of the handles, and the live ones, are read or
    written again once made: their pages alone come back after a release, where arrays in memory held
    some 90 bytes an object (70 MB of a 10M-record trace's fold)."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self.dtype = np.dtype(dtype)
        self._file = tempfile.TemporaryFile(prefix="rmtrace-objects.")
        self._size = 0
        self._capacity = 0
        self._map: mmap.mmap | None = None
        self._items = _items(b"", self.dtype)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, i: int) -> Any:
        return self._items[i]

    def __setitem__(self, i: int, value: Any) -> None:
        self._items[i] = value

    def extend(self, values: np.ndarray) -> None:
        """Add ``values`` at the end."""
        end = self._size + len(values)
        if end > self._capacity:
            # a new, larger mapping of the same file (the old one stays valid for views made of it, which
            # hold it: an exported mapping cannot be resized)
            self._capacity = max(end, 2 * self._capacity, COLUMN_ITEMS)
            self._file.truncate(self._capacity * self.dtype.itemsize)
            self._map = mmap.mmap(self._file.fileno(), self._capacity * self.dtype.itemsize)
            self._items = _items(self._map, self.dtype)
        self._size = end
        self.view()[end - len(values):] = values

    def view(self) -> np.ndarray:
        """The column, writable."""
        if self._map is None:
            return np.zeros(0, dtype=self.dtype)
        return np.frombuffer(self._map, dtype=self.dtype, count=self._size)

    def release(self) -> None:
        """Let go of the pages read or written so far."""
        if self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED)

    def array(self) -> np.ndarray:
        """The column, read-only and mapped (``release_rows`` lets go of the pages a reader has read)."""
        if not self._size:
            return np.zeros(0, dtype=self.dtype)
        return np.memmap(self._file, dtype=self.dtype, mode="r", shape=(self._size,))


def _items(buffer: bytes | mmap.mmap, dtype: np.dtype[Any]) -> memoryview:
    """``buffer`` as items of ``dtype`` (a memoryview's item is read and written as fast as an ``array``'s)."""
    format_: str = dtype.char
    return memoryview(buffer).cast(format_)  # type: ignore[call-overload]  # a format known at run time


COLUMN_ITEMS = 1 << 16
"""Items a column's file first holds."""


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
    times as much, and a 10M-record trace has a million objects.  Each object's fields are in columns of
    the widths ``ObjectColumns`` holds (some 90 bytes an object), in files (``_Column``: their pages let go
    after each block), which become its columns, mapped, without a copy.
    Which operations make an object is known before they are applied (an allocation or copy of a client),
    so the fields an object takes from its operation (``FROM_OPS``) and its parent are put in with numpy
    first; one loop then applies the operations in order, each reading what those before it left (the
    newest object of each handle, the children under each, what is freed), and notes each object's base;
    the stable names are worked out after, with numpy (``_name``): an allocation's name depends on the
    objects before it, never on a free.  Sixteen appends and the names' dicts per object in the loop were
    most of the objects' fold."""

    def __init__(self) -> None:
        self.by_handle: dict[int, int] = {}  # the newest object of each (hClient, handle)
        self.children: dict[int, list[int]] = {}  # handles allocated under each, until it is freed (``_loop``'s)
        self.live: np.ndarray | None = np.zeros(0, dtype=np.int64)
        """The objects not freed, in order, while they are a tree (``_at_once``); None once they are not, and
        ``children`` is kept instead."""
        self.siblings = _Siblings()
        self.stable: dict[int, int] = {}  # (base's name, class name, order) -> a name
        self.rm_clients: dict[int, list[int]] = {}  # each client's root handles
        self.name_of = _Column(np.int32)  # each object's stable name (an index into ``stable``; -1: not numbered yet)
        self.fields = {name: _Column(dtype) for name, dtype in ARRAYS.items()}
        """``ObjectColumns``' arrays, in its order (``freed_by``: 0 until the object is freed)."""

    def apply(self, ops: dict[str, np.ndarray], dup_name: int) -> None:
        """Apply ``ops`` (``ObjectsFold._merged``'s) in order: at once where the objects so far and the
        block keep to a tree (``_at_once``), else one by one (``_loop``)."""
        f = self.fields
        first = len(self.name_of)
        made = np.flatnonzero((ops["kind"] <= Op.DUP) & (ops["client"] >= 0))  # ``Folder.add_object`` keeps
        for name, op_field in FROM_OPS.items():  # no object of no client
            f[name].extend(ops[op_field][made])
        f["parent"].extend(np.where(ops["has_parent"][made], ops["parent"][made].astype(np.int64), NONE))
        for column in FREES:  # zeros a free writes over
            f[column].extend(np.zeros(len(made), dtype=ARRAYS[column]))
        bases = self._at_once(ops, made, first) if self.live is not None else None
        if bases is None:
            if self.live is not None:  # the children lists the tree stood for
                self.children, self.live = self._live_children(self.live), None
            bases = self._loop(ops, dup_name, first)
            self._name(first, bases)
            self.live = self._tree()
        else:
            self._name(first, bases)
        for kept in (self.name_of, *f.values()):
            kept.release()

    def _at_once(self, ops: dict[str, np.ndarray], made: np.ndarray, first: int) -> np.ndarray | None:
        """Apply ``ops`` with numpy, where the objects before the block were a tree (``live``) and the
        block keeps to it: no copy; an object allocated where no live object has its handle, under a live
        parent.  Then the children under a handle are its live object's live children, a free of a live
        object frees its subtree, and an object goes with the first free (or exit) of it or of an
        ancestor.  Each object's base, as ``_loop`` gives it; None, with nothing applied, where the block
        does not keep to the tree (``made``: the operations that make an object, numbered from ``first``)."""
        kind, client, handle = ops["kind"], ops["client"], ops["handle"]
        if (kind[made] == Op.DUP).any():
            return None
        f = self.fields
        shifted = ops["h_client"].astype(np.uint64) << np.uint64(32)
        written = (shifted | handle)[made]
        newest = _Newest(written, made, first, self.by_handle, len(kind))
        with_parent = ops["has_parent"][made]
        bases = np.full(len(made), -1, dtype=np.int64)
        bases[with_parent] = newest((shifted | ops["parent"])[made[with_parent]], made[with_parent])
        del shifted
        frees = np.flatnonzero(kind == Op.FREE)  # rmtrace.session.fold.free: a root client named by itself
        h_client, freed = ops["h_client"][frees].astype(np.uint64), handle[frees].astype(np.uint64)
        rootless = np.flatnonzero((h_client == 0) | (h_client == freed))
        alone = newest((freed[rootless] << np.uint64(32)) | freed[rootless], frees[rootless]) >= 0
        h_client[rootless[alone]] = freed[rootless[alone]]
        root = CATEGORIES.index(Category.ROOT)
        roots = made[ops["category"][made] == root]
        added: dict[int, list[tuple[int, int]]] = {}  # each client's root handles of the block, at their places
        for at, c, h in zip(roots.tolist(), client[roots].tolist(), handle[roots].tolist()):
            added.setdefault(c, []).append((at, h))
        exits = np.flatnonzero(kind == Op.EXIT)  # ``_exited``: each root handle of the client, as it stood
        exit_at: list[int] = []
        exit_handle: list[int] = []
        for at, c in zip(exits.tolist(), client[exits].tolist()):
            for h in [*self.rm_clients.get(c, ()), *(h for when, h in added.get(c, ()) if when < at)]:
                exit_at.append(at)
                exit_handle.append(h)
        gone = np.array(exit_handle, dtype=np.uint64)
        events = np.concatenate([frees, np.array(exit_at, dtype=np.int64)])
        order = np.argsort(events, kind="stable")  # a free and an exit are never one operation
        places = events[order]
        targets = np.concatenate([newest((h_client << np.uint64(32)) | freed, frees),
                                  newest((gone << np.uint64(32)) | gone, events[len(frees):])])[order]
        how = np.concatenate([np.ones(len(frees), dtype=np.int8), np.full(len(gone), 2, dtype=np.int8)])[order]
        del h_client, freed, gone
        live = self.live
        assert live is not None
        objects = np.concatenate([live, first + np.arange(len(made), dtype=np.int64)])
        parents = np.concatenate([f["base"].view()[live].astype(np.int64), bases])
        up = _place(objects, parents)
        never = len(places)
        death = np.full(len(objects), never, dtype=np.int64)  # the first event it goes with (never: none)
        hit = _place(objects, targets)
        np.minimum.at(death, hit[hit >= 0], np.flatnonzero(hit >= 0))  # events in order: the first is the least
        child = np.flatnonzero(up >= 0)
        while True:  # down the tree, a generation a step
            inherited = np.minimum(death[child], death[up[child]])
            if (inherited == death[child]).all():
                break
            death[child] = inherited
        ends = np.append(places, len(kind))[death]  # where each object goes (the block's end: it does not)

        def alive(obj: np.ndarray, at: np.ndarray) -> np.ndarray:
            found = _place(objects, obj)
            return (found >= 0) & (ends[np.maximum(found, 0)] > at)
        previous = newest(written, made)  # the object that had the handle: gone before it is given again
        if alive(previous, made).any() or not alive(bases[with_parent], made[with_parent]).all():
            return None
        went = np.flatnonzero(death < never)
        event = death[went]
        for column, values in (("freed_by", how[event]), ("free_seq", ops["seq"][places[event]]),
                               ("free_ns", ops["ns"][places[event]])):
            f[column].view()[objects[went]] = values
        self.by_handle.update(zip(written.tolist(), range(first, first + len(made))))  # the newest: the last
        for c, given in added.items():
            self.rm_clients.setdefault(c, []).extend(h for _, h in given)
        self.live = objects[death == never]
        return bases

    def _live_children(self, live: np.ndarray) -> dict[int, list[int]]:
        """The children lists of ``_loop`` that the tree of ``live`` objects stands for: each live object's
        handle under its parent's handle, in allocation order."""
        f = self.fields
        with_parent = f["has_parent"].view()[live]
        kept = live[with_parent]
        keys = (f["h_client"].view()[kept].astype(np.uint64) << np.uint64(32)) | \
            f["parent"].view()[kept].astype(np.uint64)
        children: dict[int, list[int]] = {}
        for key, h in zip(keys.tolist(), f["handle"].view()[kept].tolist()):
            children.setdefault(key, []).append(h)
        return children

    def _tree(self) -> np.ndarray | None:
        """The live objects, where what ``_loop`` left is a tree ``_at_once`` can go on from (None where it is
        not): no two live objects of one handle, each the newest of its handle; each one's base (its parent) a
        live object; the children lists those of the live objects alone (``_live_children``)."""
        f = self.fields
        live = np.flatnonzero(f["freed_by"].view() == 0)
        keys = ((f["h_client"].view()[live].astype(np.uint64) << np.uint64(32))
                | f["handle"].view()[live].astype(np.uint64))
        if len(distinct(keys)) != len(keys):
            return None
        if any(self.by_handle.get(k) != obj for k, obj in zip(keys.tolist(), live.tolist())):
            return None
        with_parent = f["has_parent"].view()[live]
        bases = f["base"].view()[live[with_parent]].astype(np.int64)
        if (_place(live, bases) < 0).any():
            return None
        if {k: v for k, v in self.children.items() if v} != self._live_children(live):
            return None
        self.children = {}
        return live

    def _loop(self, ops: dict[str, np.ndarray], dup_name: int, first: int) -> np.ndarray:
        """Apply ``ops`` in order to the handles, children, root handles and frees (the objects they make
        numbered from ``first``); each object's base (the newest object of its parent's handle as it was
        allocated, -1: none)."""
        f = self.fields
        by_handle, children, rm_clients = self.by_handle, self.children, self.rm_clients
        class_names, categories, clss = f["class_name"], f["category"], f["cls"]
        bases = array("q")
        put_base = bases.append
        other, root = CATEGORIES.index(Category.OTHER), CATEGORIES.index(Category.ROOT)
        free_op, exit_op, dup_op = int(Op.FREE), int(Op.EXIT), int(Op.DUP)  # an enum member is an attribute lookup
        free_object = self.free
        h_client = ops["h_client"].astype(np.uint64) << np.uint64(32)
        keys = {"key": h_client | ops["handle"], "parent_key": h_client | ops["parent"],
                "root_key": (ops["handle"].astype(np.uint64) << np.uint64(32)) | ops["handle"],
                "src_key": (ops["src_client"].astype(np.uint64) << np.uint64(32)) | ops["src_handle"]}
        del h_client
        obj = first
        for (kind, client, key, parent_key, has_parent, h_client, handle, root_key, category, seq, ns,
             src_key) in in_blocks(*(ops[k] if k in ops else keys[k] for k in LOOP_FIELDS)):
            if kind == free_op:  # rmtrace.session.fold.free; a stray free frees nothing
                if not h_client or h_client == handle:
                    h_client = handle if root_key in by_handle else h_client
                free_object(h_client, handle, seq, ns, 1)
                continue
            if kind == exit_op:  # the kernel frees what the process left behind (``_exited``)
                for h in rm_clients.get(client, ()):
                    free_object(h, h, seq, ns, 2)
                continue
            if client < 0:
                continue
            if kind == dup_op:  # a copy of nothing known has no class; a copy of a copy, what its source copied
                src = by_handle.get(src_key)
                if src is None:
                    class_names[obj], categories[obj], clss[obj] = dup_name, other, -1
                else:
                    class_names[obj], categories[obj], clss[obj] = class_names[src], categories[src], clss[src]
                category = categories[obj]
            if category == root:
                rm_clients.setdefault(client, []).append(handle)
            if has_parent:
                put_base(by_handle.get(parent_key, -1))
                children.setdefault(parent_key, []).append(handle)
            else:
                put_base(-1)
            by_handle[key] = obj
            obj += 1
        return np.frombuffer(bases, dtype=np.int64).copy()

    def _name(self, first: int, bases: np.ndarray) -> None:
        """The stable names of the objects from ``first`` on (``bases``: each one's base): its base's name,
        its class name and its order among its client's objects of those two (``Folder.add_object``).  An
        object's base is older, so the names go a generation at a time: those of no base or an older base
        first, then those whose base is one of those, and so on; each generation's objects are grouped by
        client, base's name and class name with numpy, and the dicts are read once a group.  That orders
        an object among the objects of its own generation only, which are all of its group where every base
        is its object's client's (a client's names are distinct: the same base's name is the same base);
        otherwise they go one by one.  A name is numbered (``stable``) only once it is a base's: most
        objects are no object's base."""
        f = self.fields
        m = len(bases)
        client = f["client"].view()[first:].astype(np.int64)
        names = f["class_name"].view()[first:].astype(np.int64)
        inner = bases >= first  # a base made in this block
        outer = np.flatnonzero((bases >= 0) & ~inner)
        local = np.where(inner, bases - first, 0)
        base_client = np.where(inner, client[local], -1)
        base_client[outer] = f["client"].view()[bases[outer]]
        base_name = np.full(m, -1, dtype=np.int64)
        base_name[outer] = self._names_of(bases[outer])
        if ((bases >= 0) & (base_client != client)).any():
            own, order = self._name_each(first, bases, client, names)
        else:
            own, order = self._name_generations(inner, local, base_name, client, names)
        self.name_of.extend(own)
        f["base"].extend(bases)
        f["order"].extend(order)

    def _names_of(self, objects: np.ndarray) -> np.ndarray:
        """The stable names (``stable``) of ``objects``, made before the block: numbered now where they were
        not (a base's was, when the object was named)."""
        view = self.name_of.view()
        got = view[objects].astype(np.int64)
        missing = np.flatnonzero(got < 0)
        if missing.size:
            f = self.fields
            wanted = distinct(objects[missing])
            base = f["base"].view()[wanted]
            base_name = np.where(base >= 0, view[np.maximum(base, 0)], -1)
            view[wanted] = self._numbered(base_name, f["class_name"].view()[wanted],
                                          f["order"].view()[wanted])
            got[missing] = view[objects[missing]]
        return got

    def _numbered(self, base_name: np.ndarray, names: np.ndarray, order: np.ndarray) -> list[int]:
        """The number of each stable name of base's name, class name and order (``stable``; a new one: the next)."""
        stable = self.stable
        return [stable.setdefault(((b + 1) << 32 | n) << 32 | o, len(stable))
                for b, n, o in zip(base_name.tolist(), names.tolist(), order.tolist())]

    def _name_generations(self, inner: np.ndarray, local: np.ndarray, base_name: np.ndarray, client: np.ndarray,
                          names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_name``'s names (-1: not numbered) and orders a generation at a time (``inner``: the objects whose
        base is in the block, ``local`` its place there; ``base_name``: the others' bases' names)."""
        siblings = self.siblings
        m = len(inner)
        own = np.full(m, -1, dtype=np.int64)
        order = np.full(m, -1, dtype=np.int64)
        ready = ~inner
        while ready.any():
            at = np.flatnonzero(ready)
            bases = distinct(local[at[inner[at]]])  # of the last generation: named now
            own[bases] = self._numbered(base_name[bases], names[bases], order[bases])
            base_name[at] = np.where(inner[at], own[local[at]], base_name[at])
            grouped, bounds = group_rows((client[at], base_name[at], names[at]), stable=True)
            sizes = np.diff(bounds)
            heads = at[grouped[bounds[:-1]]]
            keys = siblings.keys(client[heads], base_name[heads], names[heads])  # distinct: one a group
            before = siblings.get(keys)
            siblings.put(keys, before + sizes)
            rank = np.arange(len(at)) - np.repeat(bounds[:-1], sizes)
            order[at[grouped]] = np.repeat(before, sizes) + rank
            ready = inner & (order < 0) & (order[local] >= 0)
        return own, order

    def _name_each(self, first: int, bases: np.ndarray, client: np.ndarray, names: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """``_name``'s names and orders one object at a time, in order (each numbered)."""
        siblings, stable = self.siblings, self.stable
        outer = distinct(bases[(bases >= 0) & (bases < first)])
        named = dict(zip(outer.tolist(), self._names_of(outer).tolist()))
        own: list[int] = []
        order: list[int] = []
        counts: dict[int, int] = {}  # the block's keys: their counts, put back after
        for c, base, n in zip(client.tolist(), bases.tolist(), names.tolist()):
            b = -1 if base < 0 else own[base - first] if base >= first else named[base]
            key = siblings.key(c, b, n)
            o = counts.get(key)
            if o is None:
                o = int(siblings.get(np.array([key], dtype=np.int64))[0])
            counts[key] = o + 1
            own.append(stable.setdefault(((b + 1) << 32 | n) << 32 | o, len(stable)))
            order.append(o)
        siblings.put(np.fromiter(counts, dtype=np.int64, count=len(counts)),
                     np.fromiter(counts.values(), dtype=np.int64, count=len(counts)))
        return np.array(own, dtype=np.int64), np.array(order, dtype=np.int64)

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
        arrays = {name: column.array() for name, column in self.fields.items()}
        if any("/" in names[i] or "#" in names[i] for i in distinct(arrays["class_name"]).tolist()):
            raise Ambiguous("a class name with '/' or '#'")
        return ObjectColumns(**arrays, client_ids=client_ids, names=names)


class _Siblings:
    """How many objects each (client, base's name, class name) has had so far (``Folder.add_object``'s
    siblings), as two arrays: a key per (client, pair), the pair (base's name, class name) numbered
    (``pairs``: few, where the clients are many), sorted, and its count.  A dict of the three in one
    int held some 75 bytes a key, and a replicated 10M-record trace has 300,000 (new clients in every
    copy): 22 MB, freed at the fold's end into pages the process kept."""

    def __init__(self) -> None:
        self.pairs: dict[int, int] = {}  # (base's name + 1) << 32 | class name -> its number
        self.sorted = np.zeros(0, dtype=np.int64)  # client << 32 | pair's number
        self.counts = np.zeros(0, dtype=np.int64)

    def key(self, client: int, base_name: int, name: int) -> int:
        """The key of one (client, base's name (-1: none), class name); exact: each index is below 2**31."""
        pair = (base_name + 1) << 32 | name
        number = self.pairs.get(pair)
        if number is None:
            number = self.pairs[pair] = len(self.pairs)
        return client << 32 | number

    def keys(self, client: np.ndarray, base_name: np.ndarray, name: np.ndarray) -> np.ndarray:
        """``key`` of each."""
        return np.fromiter(map(self.key, client.tolist(), base_name.tolist(), name.tolist()), dtype=np.int64,
                           count=len(client))

    def _at(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.searchsorted(self.sorted, keys)
        found = at < len(self.sorted)
        found[found] = self.sorted[at[found]] == keys[found]
        return at, found

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The count of each of ``keys`` (0: none yet)."""
        at, found = self._at(keys)
        out = np.zeros(len(keys), dtype=np.int64)
        out[found] = self.counts[at[found]]
        return out

    def put(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Set the counts of ``keys`` (distinct)."""
        at, found = self._at(keys)
        self.counts[at[found]] = counts[found]
        new = np.flatnonzero(~found)
        if len(new):
            order = new[np.argsort(keys[new], kind="stable")]
            places = np.searchsorted(self.sorted, keys[order])
            self.sorted = np.insert(self.sorted, places, keys[order])
            self.counts = np.insert(self.counts, places, counts[order])


class _Newest:
    """The newest object of each (hClient, handle) key at a place among a block's operations, as the
    operations before it left it: the last of the block's allocations of the key before it (``keys``, at
    their places ``at``, the objects numbered from ``first``), else the one ``by_handle`` holds."""

    def __init__(self, keys: np.ndarray, at: np.ndarray, first: int, by_handle: dict[int, int], places: int) -> None:
        order = np.argsort(keys, kind="stable")  # a key's allocations in their order
        self.keys = keys[order]
        self.objects = first + order
        starts = np.ones(len(order), dtype=bool)
        np.not_equal(self.keys[1:], self.keys[:-1], out=starts[1:])
        self.group = np.cumsum(starts) - 1
        self.places = places + 1
        self.sorted = self.group * self.places + at[order]  # ascending: by key, then by place
        self.by_handle = by_handle

    def __call__(self, keys: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The newest object of each of ``keys`` just before place ``at`` (-1: none)."""
        lo = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        known = (lo < len(self.keys)) & (self.keys[lo] == keys) if len(self.keys) else np.zeros(len(keys), dtype=bool)
        last = np.searchsorted(self.sorted, self.group[lo] * self.places + at) - 1 if len(self.keys) else lo
        found = known & (last >= lo)
        out = np.where(found, self.objects[np.maximum(last, 0)] if len(self.keys) else -1, -1)
        rest = np.flatnonzero(~found)
        get = self.by_handle.get
        out[rest] = [get(k, -1) for k in keys[rest].tolist()]
        return out


def _place(objects: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each of ``values`` is in ``objects`` (sorted, distinct), -1 where it is not."""
    at = np.minimum(np.searchsorted(objects, values), max(len(objects) - 1, 0))
    if not len(objects):
        return np.full(len(values), -1, dtype=np.int64)
    return np.where(objects[at] == values, at, -1)


LOOP_FIELDS = ("kind", "client", "key", "parent_key", "has_parent", "h_client", "handle", "root_key", "category",
               "seq", "ns", "src_key")
"""What ``_Objects._loop`` reads of every operation: its columns, and the keys (``hClient << 32 | handle``)
of its object, its parent, its handle as a root client, and its source."""
FROM_OPS = {"client": "client", "h_client": "h_client", "handle": "handle", "has_parent": "has_parent", "cls": "cls",
            "class_name": "name", "category": "category", "alloc_seq": "seq", "alloc_ns": "ns", "status": "status"}
"""The fields of an object that are its operation's columns (``ObjectColumns``' name: the operation's), as they
are but for a copy's class, class name and category (its source's: ``_Objects._loop``)."""
FREES = ("free_seq", "free_ns", "freed_by")
"""The fields of an object that a free writes."""


class Ambiguous(ValueError):
    """What ``resolve``'s keys cannot tell apart: a class name with '/' or '#' (two stable names of different
    parts could read the same: the fold's siblings are counted by the text), a handle of more than 32 bits
    (two in one number).  The caller folds the objects as ``RmObject``\\ s (``Folder``)."""

