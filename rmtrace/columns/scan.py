"""Decompressed chunks into record columns, vectorised: headers, buffer walk, argument members.

``scan_chunks`` takes a batch of chunks in one buffer, with its record headers
read and checked (``rmtrace.columns.batch``), walks the buffers of all records
in one C pass (``rmt_scan_walk`` of kmod_shim/scan_walk.c, loaded by
``rmtrace.columns.native``), and reads the argument
members the call table needs at the offsets ``rmtrace.columns.argspec`` worked
out (``rmt_scan_members``).  It checks what
``rmtrace.record.decode_record`` checks; a record that fails raises the same
``RecordError``.

Records are columns (``Records``: name -> array, one row per record), not a
structured array: every later step reads a few columns at a time, and
contiguous columns are what numpy is fast on.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np

from rmtrace.columns.argspec import MAX_HANDLES, ArgLayout, Kind, Plan
from rmtrace.columns.arrays import distinct
from rmtrace.columns.batch import ByteViews, Where, read_headers
from rmtrace.columns.native import SCAN
from rmtrace.errors import RmtraceError
from rmtrace.record import BufferFlag, Source
from rmtrace.trace import ChunkSpan

Records = dict[str, np.ndarray]
"""Record columns: ``pos`` (position in the file), the header fields, ``time``, ``chunk`` and ``offset``
(where the record is), ``bytes`` (of its buffers), and per argument side ``b`` (read before the
call) and ``a`` (after): ``{side}_arg`` (layout id, or ABSENT / RAW), ``{side}_key``,
``{side}_status`` and ``{side}_h`` (one column per handle slot)."""

ABSENT, RAW = -2, -1
"""``b_arg``/``a_arg`` when a record has no such argument buffer, or has one the decode leaves raw."""

SIDES = ("b", "a")
_COPIED = ("seq", "pid", "tid", "call_id", "op", "fd", "ret", "err", "source", "phase", "flags")
_UNREADABLE = int(BufferFlag.UNREADABLE)
_IOCTL_SOURCES = (int(Source.RM), int(Source.UVM))
_LEN_BITS = 28
_SLOTS = 2 + MAX_HANDLES  # key, status, then the handles


class KeyCache:
    """Values of packed uint64 keys, each computed once by ``lookup`` and then found by binary search."""

    def __init__(self, lookup: Callable[[int], int]) -> None:
        self._lookup = lookup
        self._known: dict[int, int] = {}
        self._keys = np.zeros(0, dtype=np.uint64)
        self._values = np.zeros(0, dtype=np.int32)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(self._keys, keys), max(len(self._keys) - 1, 0))
        if len(self._keys) and (self._keys[at] == keys).all():
            return self._values[at]
        for key in distinct(keys):
            key = int(key)
            if key not in self._known:
                self._known[key] = self._lookup(key)
        self._keys = np.array(sorted(self._known), dtype=np.uint64)
        self._values = np.array([self._known[int(k)] for k in self._keys], dtype=np.int32)
        return self._values[np.searchsorted(self._keys, keys)]


class ArgRegistry:
    """Argument layouts by id, and where each one's members are, as arrays indexed by id."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.layouts: list[ArgLayout] = []
        self._ids: dict[ArgLayout, int] = {}
        self.handle_sets: list[tuple[str, ...]] = []
        """Distinct tuples of handle names, in order of first use."""
        self.handle_set: list[int] = []
        """Per layout id: the index of its handle names in ``handle_sets``."""
        self.has_status: list[bool] = []
        self.offsets = np.zeros((0, _SLOTS), dtype=np.int64)
        """Per layout id (row) and member slot (0 key, 1 status, then the handles): its offset in the argument."""
        self.widths = np.zeros((0, _SLOTS), dtype=np.int64)
        """Its size in bytes (0: the layout has no such member)."""
        self.signed = np.zeros((0, _SLOTS), dtype=np.uint8)
        """Whether it is signed."""
        self.ids = KeyCache(self._id)
        """Layout ids (or RAW) of packed (source, unreadable, op, length) keys."""

    def _id(self, key: int) -> int:
        source, unreadable = key >> 61, (key >> 60) & 1
        op, length = (key >> _LEN_BITS) & 0xFFFFFFFF, key & ((1 << _LEN_BITS) - 1)
        plan = self.plan.op(source, op)
        layout = plan.arg(length) if plan.kind == Kind.IOCTL and not unreadable else None
        return RAW if layout is None else self._add(layout)

    def _add(self, layout: ArgLayout) -> int:
        found = self._ids.get(layout)
        if found is not None:
            return found
        found = self._ids[layout] = len(self.layouts)
        self.layouts.append(layout)
        names = tuple(name for name, _ in layout.handles)
        if names not in self.handle_sets:
            self.handle_sets.append(names)
        self.handle_set.append(self.handle_sets.index(names))
        self.has_status.append(layout.status is not None)
        slots = [layout.key, layout.status] + [s for _, s in layout.handles]
        row = [(s.offset, s.size, s.signed) if s is not None else (0, 0, False) for s in slots]
        row += [(0, 0, False)] * (_SLOTS - len(row))
        offsets, widths, signed = zip(*row)
        self.offsets = np.vstack([self.offsets, np.array([offsets], dtype=np.int64)])
        self.widths = np.vstack([self.widths, np.array([widths], dtype=np.int64)])
        self.signed = np.vstack([self.signed, np.array([signed], dtype=np.uint8)])
        return found


_FOUND = ("b", "a", "path")
"""What ``rmt_scan_walk`` finds, in the order of its FOUND_* rows."""
_WALK_ERRORS = {1: "a buffer header runs past the record's end", 2: "a buffer runs past the record's end"}
"""``rmt_scan_walk``'s WALK_* codes: what a record it stops at has wrong."""


def scan_chunks(buffer: bytearray, spans: Sequence[ChunkSpan], args: ArgRegistry, first_pos: int,
                path_prefix: bytes = b"") -> Records:
    """The record columns of consecutive chunks, in file order, that ``TraceReader.read_chunks`` put in
    ``buffer``.  Several chunks at once: numpy's cost per call is paid per batch, not per chunk, and the
    gathers read the buffer in place.  With ``path_prefix``, the column ``path_match`` says whether a
    record's first PATH buffer starts with it."""
    headers = read_headers(buffer, spans)
    data, where, off, head = headers.data, headers.where, headers.off, headers.head
    n = len(off)
    out: Records = {name: head[name].copy() for name in _COPIED}
    out["time"] = head["time_ns"].astype(np.int64)
    out["pos"] = np.arange(first_pos, first_pos + n, dtype=np.int64)
    out["chunk"] = where.chunk
    out["offset"] = where.local.astype(np.uint32)
    found = walk_buffers(data, where, off + headers.header_size, off + headers.total, head["nbufs"].astype(np.int64), out)
    ioctl = np.isin(out["source"], _IOCTL_SOURCES)
    for side in SIDES:
        start, length, flags = found[side]
        _arg_members(data, args, out, ioctl, side, start, length, (flags & _UNREADABLE) != 0)
    if path_prefix:
        start, length, _ = found["path"]
        out["path_match"] = data.starts_with(start, length, path_prefix)
    return out


def walk_buffers(data: ByteViews, where: Where, pos: np.ndarray, limit: np.ndarray, nbufs: np.ndarray,
                  out: Records) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every record's buffers, walked in C (``rmt_scan_walk``, kmod_shim/scan_walk.c): the bytes they hold
    (``out["bytes"]``), and where the first ARG buffer before the call ("b") and after it ("a"), and the
    first PATH buffer ("path") are: the data's start (-1: none), its length and its flags."""
    n = len(pos)
    total = np.empty(n, dtype=np.int64)
    start, length, flags = (np.empty((len(_FOUND), n), dtype=np.int64) for _ in range(3))
    bad = ctypes.c_int64(-1)
    pos, limit, nbufs = (np.ascontiguousarray(a, dtype=np.int64) for a in (pos, limit, nbufs))
    code = SCAN.walk(data.u1.ctypes.data, n, *(a.ctypes.data for a in (pos, limit, nbufs, total, start, length, flags)),
                 ctypes.byref(bad))
    if code:
        where.fail(bad.value, _WALK_ERRORS[code])
    out["bytes"] = total
    return {kind: (start[k], length[k], flags[k]) for k, kind in enumerate(_FOUND)}


def _arg_members(data: ByteViews, args: ArgRegistry, out: Records, ioctl: np.ndarray, side: str, start: np.ndarray,
                 length: np.ndarray, unreadable: np.ndarray) -> None:
    """Which layout each ioctl record's argument decodes as, and the members read from it (in C,
    ``rmt_scan_members``, at the offsets ``args`` holds per layout)."""
    layout = np.where(start >= 0, RAW, ABSENT).astype(np.int32)
    rows = np.flatnonzero(ioctl & (start >= 0))
    if rows.size:
        keys = ((out["source"][rows].astype(np.uint64) << np.uint64(61))
                | (unreadable[rows].astype(np.uint64) << np.uint64(60))
                | (out["op"][rows].astype(np.uint64) << np.uint64(_LEN_BITS))
                | np.minimum(length[rows], (1 << _LEN_BITS) - 1).astype(np.uint64))
        layout[rows] = args.ids(keys)
    out[f"{side}_arg"] = layout
    out[f"{side}_key"], out[f"{side}_status"], out[f"{side}_h"] = read_members(data, args, start, layout)


def read_members(data: ByteViews, args: ArgRegistry, start: np.ndarray, layout: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The key, status and handles (uint32, one row of ``MAX_HANDLES`` per record) of each record's
    argument at ``start`` decoded as layout id ``layout`` (< 0: none, then 0s)."""
    n = len(start)
    key, status = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    handles = np.empty((n, MAX_HANDLES), dtype=np.uint32)
    start = np.ascontiguousarray(start, dtype=np.int64)
    layout = np.ascontiguousarray(layout, dtype=np.int32)
    # row l * slots + k of these C-contiguous tables is layout l's slot k, as the C reads them
    tables = [np.ascontiguousarray(a) for a in (args.offsets, args.widths, args.signed)]
    bad = SCAN.members(data.u1.ctypes.data, len(data.u1), n, start.ctypes.data, layout.ctypes.data, _SLOTS,
                   *(a.ctypes.data for a in tables), key.ctypes.data, status.ctypes.data, handles.ctypes.data)
    if bad >= 0:
        raise RmtraceError(f"record {bad} of the batch: an argument member of layout "
                           f"{args.layouts[layout[bad]].name} lies past the batch's bytes")
    return key, status, handles
