"""The column reader's C (kmod_shim/scan_walk.c, built by the install as ``librmtrace_scan.so``), loaded with ctypes.

What the library reads of the record format (struct rmt_buffer's size, the
offsets and sizes of the fields it walks by, the role/when/alignment
constants) is checked at import against the construct mirror
(``rmtrace.record``): a library built from another header is refused before
any walk.  Everything else it is handed as arguments: header and argument
layouts' sizes and offsets come from the mirror and the driver profile
(``rmtrace.columns.argspec``), never from C.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from rmtrace.errors import RmtraceError
from rmtrace.record import ALIGN, BUFFER_LAYOUT, Role, When

_P, _N = ctypes.c_void_p, ctypes.c_int64


@dataclass(frozen=True)
class ScanLibrary:
    """The library's functions, their argument types set (see scan_walk.c for each)."""

    walk: Any
    """rmt_scan_walk: every record's buffers, the bytes they hold and the first ARG / PATH ones."""
    members: Any
    """rmt_scan_members: the argument members at the offsets a layout table gives."""
    rows: Any
    """rmt_scan_rows: fixed-size rows at byte positions (the record headers)."""


def buffer_layout() -> tuple[int, ...]:
    """What scan_walk.c takes from rmtrace_record.h, as ``rmt_scan_buffer_layout`` lists it, from the
    construct mirror: sizeof(struct rmt_buffer), offset and size of the fields it reads, and the constants."""
    fields = [BUFFER_LAYOUT[name] for name in ("role", "when", "flags", "len")]
    constants = (Role.ARG, Role.PATH, When.BEFORE, When.AFTER, ALIGN)
    return (BUFFER_LAYOUT.size, *(v for f in fields for v in (f.offset, f.codec.size)), *map(int, constants))


def load() -> ScanLibrary:
    """The library the install builds (kmod_shim/shim_build.py), once its view of the record format is
    checked against the construct mirror's."""
    from rmtrace.kmod_shim import HERE
    from rmtrace.kmod_shim.shim_build import SCAN_LIBRARY

    path = HERE / SCAN_LIBRARY
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise RmtraceError(f"the record walk is not built ({e}): reinstall rmtrace with a C compiler present "
                           f"(pip install -e . builds kmod_shim/{SCAN_LIBRARY})") from None
    size = ctypes.c_int64.in_dll(lib, "rmt_scan_buffer_layout_len").value
    theirs = tuple((ctypes.c_int64 * size).in_dll(lib, "rmt_scan_buffer_layout"))
    ours = buffer_layout()
    if theirs != ours:
        raise RmtraceError(f"{path} was built from another record format than rmtrace.record's (struct rmt_buffer "
                           f"and constants {list(theirs)}, the mirror's {list(ours)}): reinstall rmtrace")
    walk = lib.rmt_scan_walk
    walk.argtypes = [_P, _N, *[_P] * 7, ctypes.POINTER(_N)]
    walk.restype = ctypes.c_int
    members = lib.rmt_scan_members
    members.argtypes = [_P, _N, _N, _P, _P, _N, *[_P] * 6]
    members.restype = _N
    rows = lib.rmt_scan_rows
    rows.argtypes = [_P, _N, _N, _P, _N, _P]
    rows.restype = _N
    return ScanLibrary(walk, members, rows)


SCAN = load()
