"""The capture table: what the shim must know of the running driver to find buffers.

The recorder builds it from the driver profile (``rmtrace.decoders.profiles``)
and writes it into the session directory as ``capture.tab``; every traced
process maps it read-only.  It holds each UVM command's params size (UVM
request numbers are raw, so the size is not in them) and, for every control
whose params carry user pointers, where those pointers and their element
counts are (the shim records the arrays as NESTED buffers, slot = the
pointer's index).  The byte layout is ``struct rmt_ctab_*`` in
``kmod_shim/rmtrace_ring.h``, mirrored in ``rmtrace.capture.shm``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from rmtrace.capture.shm import (
    CTAB_CLASS,
    CTAB_CTRL,
    CTAB_HEADER,
    CTAB_MAGIC,
    CTAB_PTR,
    CTAB_UVM,
    CTAB_VERSION,
    RING_MIN_SIZE,
    CtabFlag,
)
from rmtrace.errors import RmtraceError
from rmtrace.flat import FlatStruct

if TYPE_CHECKING:  # importing the decoders costs a recorder most of its start-up: types only
    from rmtrace.decoders.profiles.model import DriverProfile, PointerField

DEFAULT_RING_SIZE = 4 << 20
"""Data bytes per thread ring (only the pages a thread fills use memory)."""
MAX_RING_SIZE = 1 << 30
DEFAULT_MAX_BUFFER = 1 << 20
"""Most bytes captured of one buffer: RM's own limit on control params (RMAPI_PARAM_COPY_MAX_PARAMS_SIZE)."""
DEFAULT_RIGHTS_SIZE = 4
"""RM_ALLOC's pRightsRequested points to an RS_ACCESS_MASK: one 32-bit limb in every driver so far."""
USER_ALLOC_TYPES = {"NV01_ROOT": "NvHandle", "NV01_ROOT_NON_PRIV": "NvHandle", "NV01_ROOT_CLIENT": "NvHandle"}
"""Classes whose alloc params RM copies from user space by another type than the profile decodes them
with: resource_list.h declares the root classes RS_OPTIONAL(NvHandle), and RM copies that many bytes
(rmapiGetClassAllocParamSize), while the profile decodes them as NV0000_ALLOC_PARAMETERS, the form
the GSP path sends."""
_SCALAR_SIZES = {"NvHandle": 4}


class TablePointer(NamedTuple):
    """One user pointer inside a params struct (struct rmt_ctab_ptr)."""

    offset: int
    count_offset: int
    count_size: int
    elem_size: int
    fixed_count: int


class CaptureTable(NamedTuple):
    """A capture table as data (what ``encode`` writes and ``decode`` reads).  The two value types here are
    NamedTuples, not frozen dataclasses: making one of those costs a recorder ~1.5 ms of its start."""

    ring_size: int
    lossy: bool
    max_buffer: int
    rights_size: int
    uvm: Mapping[int, tuple[int, tuple[TablePointer, ...]]]
    """UVM request number -> (params size, pointers)."""
    controls: Mapping[int, tuple[TablePointer, ...]]
    """Control command -> its pointers (only controls that have some)."""
    classes: Mapping[int, int]
    """Class id -> bytes of its alloc params: what RM_ALLOC really reads (RM ignores paramsSize)."""
    tsc: bool = False
    """The shim times records by the TSC, extrapolated from CLOCK_MONOTONIC (the kernel's clocksource
    is the TSC: ``host.clocksource``); else by clock_gettime."""


def check_ring_size(size: int) -> int:
    """``size`` if it is a usable ring size, else RmtraceError saying why."""
    if size < RING_MIN_SIZE or size > MAX_RING_SIZE or size & (size - 1):
        raise RmtraceError(f"ring size {size} must be a power of two from {RING_MIN_SIZE} to {MAX_RING_SIZE} bytes")
    return size


def _pointer(field: PointerField) -> TablePointer | None:
    """A profile PointerField as a table entry; None when its count cannot be found."""
    if field.fixed_count:
        return TablePointer(field.offset, 0, 0, field.elem_size, field.fixed_count)
    if field.count_offset is None or field.count_size not in (1, 2, 4, 8) or not field.elem_size:
        return None
    return TablePointer(field.offset, field.count_offset, field.count_size, field.elem_size, 0)


def _pointers(fields: Sequence[PointerField]) -> tuple[TablePointer, ...]:
    """Keep each pointer's index (its slot) stable: an unusable one stays as a zero-size entry."""
    out = [_pointer(f) for f in fields]
    return tuple(p if p is not None else TablePointer(0, 0, 0, 0, 0) for p in out) if any(out) else ()


def table_from_profile(profile: DriverProfile, *, ring_size: int = DEFAULT_RING_SIZE, lossy: bool = False,
                       max_buffer: int = DEFAULT_MAX_BUFFER,
                       uvm_pointers: Mapping[int, Sequence[PointerField]] | None = None) -> CaptureTable:
    """The capture table for a driver profile: its UVM params sizes, the pointers inside its
    controls' params, and its classes' alloc params sizes.  ``uvm_pointers`` adds pointers
    inside UVM params, by request number."""
    uvm_pointers = uvm_pointers or {}
    uvm = {nr: (cmd.size, _pointers(uvm_pointers.get(nr, ()))) for nr, cmd in profile.uvm.items() if cmd.size}
    controls = {}
    for cmd in profile.controls:
        pointers = _pointers(profile.embedded_pointers(cmd))
        if pointers:
            controls[cmd] = pointers
    layouts = profile.layouts
    rights = layouts.get("RS_ACCESS_MASK")
    classes = {}
    for cls, info in profile.classes.items():
        user_type = USER_ALLOC_TYPES.get(info.name)
        if user_type is not None:
            classes[cls] = _SCALAR_SIZES[user_type]
        elif info.alloc_params and info.alloc_params in layouts and layouts[info.alloc_params].size:
            classes[cls] = layouts[info.alloc_params].size
    return CaptureTable(check_ring_size(ring_size), lossy, max_buffer,
                        rights.size if rights is not None else DEFAULT_RIGHTS_SIZE, uvm, controls, classes)


_UVM_ROWS, _CTRL_ROWS, _PTR_ROWS, _CLASS_ROWS = CTAB_UVM, CTAB_CTRL, CTAB_PTR, CTAB_CLASS
"""The row arrays' codecs (rmtrace.flat): a table has hundreds of rows, and construct builds or parses
each in tens of microseconds, which was most of a recorder's start-up."""


def _rows(rows: FlatStruct, data: bytes, offset: int, count: int, *names: str) -> list[tuple]:
    """count rows of one array at offset, each the named fields in that order (plain tuples: a named-tuple
    type a row array costs more to make than its rows take to read); RmtraceError when they run past the data."""
    end = offset + count * rows.size
    if offset < 0 or end > len(data):
        raise RmtraceError(f"capture table: {rows.name} rows at byte {offset} run past its {len(data)} bytes")
    get = rows.getter(*names)
    return [get(values) for values in rows.codec.iter_unpack(data[offset:end])]


_pack_uvm = _UVM_ROWS.packer("nr", "size", "first_ptr", "n_ptr")
_pack_ctrl = _CTRL_ROWS.packer("cmd", "first_ptr", "n_ptr")
_pack_ptr = _PTR_ROWS.packer(attrs=("offset", "count_offset", "elem_size", "fixed_count", "count_size"))
_pack_class = _CLASS_ROWS.packer("cls", "size")
"""Each row by one call of its codec (FlatStruct.packer): a recorder encodes its table at every start,
hundreds of rows, and packing them by keyword took a millisecond or two of it."""


def encode(table: CaptureTable) -> bytes:
    """capture.tab's bytes."""
    pointers: list[TablePointer] = []
    uvm_rows, ctrl_rows = [], []
    for nr in sorted(table.uvm):
        size, ptrs = table.uvm[nr]
        uvm_rows.append(_pack_uvm(nr, size, len(pointers), len(ptrs)))
        pointers.extend(ptrs)
    for cmd in sorted(table.controls):
        ptrs = table.controls[cmd]
        ctrl_rows.append(_pack_ctrl(cmd, len(pointers), len(ptrs)))
        pointers.extend(ptrs)
    ptr_rows = [_pack_ptr(p) for p in pointers]
    class_rows = [_pack_class(cls, size) for cls, size in sorted(table.classes.items())]
    uvm_off = CTAB_HEADER.size
    ctrl_off = uvm_off + _UVM_ROWS.size * len(uvm_rows)
    ptr_off = ctrl_off + _CTRL_ROWS.size * len(ctrl_rows)
    class_off = ptr_off + _PTR_ROWS.size * len(ptr_rows)
    total = class_off + _CLASS_ROWS.size * len(class_rows)
    header = CTAB_HEADER.pack(
        version=CTAB_VERSION, header_size=CTAB_HEADER.size, total_size=total,
        flags=(CtabFlag.LOSSY if table.lossy else 0) | (CtabFlag.TSC if table.tsc else 0),
        ring_size=table.ring_size, max_buffer=table.max_buffer,
        rights_size=table.rights_size, n_uvm=len(uvm_rows), uvm_off=uvm_off, n_ctrl=len(ctrl_rows),
        ctrl_off=ctrl_off, n_ptr=len(ptr_rows), ptr_off=ptr_off, n_class=len(class_rows), class_off=class_off)
    return b"".join([header, *uvm_rows, *ctrl_rows, *ptr_rows, *class_rows])


def decode(data: bytes) -> CaptureTable:
    """Read capture.tab's bytes back (the user's cache, tests, and checking what a session used)."""
    if len(data) < CTAB_HEADER.size:
        raise RmtraceError(f"not a capture table: {len(data)} bytes, a header is {CTAB_HEADER.size}")
    h = CTAB_HEADER.unpack(data)
    if h.magic != CTAB_MAGIC:
        raise RmtraceError(f"not a capture table: magic {h.magic:#x}, not {CTAB_MAGIC:#x}")
    if h.version != CTAB_VERSION or h.total_size != len(data):
        raise RmtraceError(f"capture table version {h.version}, {h.total_size} bytes claimed, {len(data)} present")
    table_ptrs = [TablePointer._make(p) for p in _rows(_PTR_ROWS, data, h.ptr_off, h.n_ptr, *TablePointer._fields)]
    uvm = {nr: (size, tuple(table_ptrs[first:first + n]))
           for nr, size, first, n in _rows(_UVM_ROWS, data, h.uvm_off, h.n_uvm, "nr", "size", "first_ptr", "n_ptr")}
    controls = {cmd: tuple(table_ptrs[first:first + n])
                for cmd, first, n in _rows(_CTRL_ROWS, data, h.ctrl_off, h.n_ctrl, "cmd", "first_ptr", "n_ptr")}
    classes = dict(_rows(_CLASS_ROWS, data, h.class_off, h.n_class, "cls", "size"))
    return CaptureTable(h.ring_size, bool(h.flags & CtabFlag.LOSSY), h.max_buffer, h.rights_size, uvm, controls,
                        classes, bool(h.flags & CtabFlag.TSC))


# --------------------------------------------------------------------------- the user's cache

CACHE_ENV = "RMTRACE_CACHE_DIR"


def _cache_dir() -> str:
    """$RMTRACE_CACHE_DIR, else $XDG_CACHE_HOME/rmtrace, else ~/.cache/rmtrace."""
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rmtrace")


def _profile_files() -> list[os.DirEntry[str]]:
    """The shipped profiles' files (rmtrace.decoders.profiles' data/), found without importing the
    decoders: their import is most of a cold recorder's start-up, and a cache hit needs none of them."""
    spec = importlib.util.find_spec("rmtrace.decoders")
    if spec is None or not spec.submodule_search_locations:
        raise RmtraceError("rmtrace.decoders is not installed: no driver profiles")
    with os.scandir(os.path.join(list(spec.submodule_search_locations)[0], "profiles", "data")) as entries:
        return list(entries)


def cache_key(driver_version: str | None) -> str:
    """What a cached table depends on: the driver, this rmtrace, and the shipped profiles as files.

    The whole text, kept in the entry and compared on reading (``cached``): its CRC only names the
    file, so a cryptographic hash (hashlib loads OpenSSL, a few ms of every start) is not needed."""
    from rmtrace import __version__
    stamp = sorted((e.name, st.st_size, st.st_mtime_ns) for e in _profile_files() for st in [e.stat()])
    return json.dumps([driver_version, __version__, CTAB_VERSION, stamp])


def _cache_file(key: str) -> str:
    return os.path.join(_cache_dir(), f"capture-table-{zlib.crc32(key.encode()):08x}.json")


def cached(key: str) -> tuple[CaptureTable, str, str | None] | None:
    """(table, profile version, warning) stored under key, or None (missing, unreadable, foreign, or
    another key's whose name's CRC is the same)."""
    try:
        with open(_cache_file(key)) as f:
            entry = json.load(f)
        if entry["key"] != key:
            return None
        return decode(bytes.fromhex(entry["table"])), entry["profile"], entry["warning"]
    except (OSError, ValueError, KeyError, TypeError, RmtraceError):
        return None


def store(key: str, table: CaptureTable, profile: str, warning: str | None) -> None:
    """Keep a table for the next recording; a cache that cannot be written is no error."""
    path = _cache_file(key)
    tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"key": key, "profile": profile, "warning": warning, "table": encode(table).hex()}, f)
        os.replace(tmp, path)
    except OSError:
        pass


__all__ = ["CaptureTable", "TablePointer", "table_from_profile", "encode", "decode", "check_ring_size",
           "cache_key", "cached", "store", "DEFAULT_RING_SIZE", "DEFAULT_MAX_BUFFER", "CTAB_MAGIC"]
