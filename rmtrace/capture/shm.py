"""The shared-memory files between the capture shim and the recorder, mirrored once.

``kmod_shim/rmtrace_ring.h`` is the definition (read its comment for the ring
protocol and the memory-ordering table); the construct ``Struct``s below are
its mirror, checked field by field against the header's DWARF layout by
tests/test_ring_abi.py.  Offsets the recorder needs on its hot path are
derived from these definitions, never written twice.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from rmtrace.flat import FlatStruct, lazy_mirrors

if TYPE_CHECKING:
    from construct import Struct

RING_MAGIC = 0x474E5252
RING_VERSION = 3
RING_CTL_SIZE = 4096
RING_MIN_SIZE = 4096

SESSION_MAGIC = 0x53455352
SESSION_VERSION = 1

CTAB_MAGIC = 0x42544352
CTAB_VERSION = 2


class RingState(enum.IntEnum):
    """enum rmt_ring_state"""

    LIVE = 1
    CLOSED = 2


class SessionState(enum.IntEnum):
    """enum rmt_session_state"""

    RECORDING = 1
    STOPPED = 2


class CtabFlag(enum.IntFlag):
    """enum rmt_ctab_flag"""

    LOSSY = 1 << 0
    TSC = 1 << 1


def _ring_control() -> Struct:
    """struct rmt_ring_ctl, 256 bytes at the start of each ring file."""
    from construct import Array, Bytes, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Int32ul,
        "version" / Int16ul,
        "ctl_size" / Int16ul,
        "data_size" / Int64ul,
        "pid" / Int32ul,
        "tid" / Int32ul,
        "image_id" / Int64ul,
        "flags" / Int32ul,
        "state" / Int32ul,
        "reserved0" / Bytes(24),
        "head" / Int64ul,
        "writing" / Int64ul,
        "read_copy" / Int64ul,
        "lost_full" / Int64ul,
        "lost_nested" / Int64ul,
        "lost_stopped" / Int64ul,
        "trunc_big" / Int64ul,
        "read_unreadable" / Int64ul,
        "tail" / Int64ul,
        "reserved2" / Bytes(56),
        "read_syscall" / Int64ul,
        "waits" / Int64ul,
        "wait_ns" / Int64ul,
        "reserved3" / Array(5, Int64ul),
    )


def _session_control() -> Struct:
    """struct rmt_session_ctl, the file session.ctl."""
    from construct import Array, Const, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(SESSION_MAGIC, Int32ul),
        "version" / Int16ul,
        "size" / Int16ul,
        "recorder_pid" / Int32ul,
        "state" / Int32ul,
        "next_image" / Int64ul,
        "lost_noring" / Int64ul,
        "reserved" / Array(4, Int64ul),
    )


def _ctab_header() -> Struct:
    """struct rmt_ctab_header, at the start of capture.tab."""
    from construct import Const, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(CTAB_MAGIC, Int32ul),
        "version" / Int16ul,
        "header_size" / Int16ul,
        "total_size" / Int32ul,
        "flags" / Int32ul,
        "ring_size" / Int64ul,
        "max_buffer" / Int32ul,
        "rights_size" / Int32ul,
        "n_uvm" / Int32ul,
        "uvm_off" / Int32ul,
        "n_ctrl" / Int32ul,
        "ctrl_off" / Int32ul,
        "n_ptr" / Int32ul,
        "ptr_off" / Int32ul,
        "n_class" / Int32ul,
        "class_off" / Int32ul,
    )


def _ctab_uvm() -> Struct:
    """struct rmt_ctab_uvm"""
    from construct import Int32ul, Struct
    return Struct(
        "nr" / Int32ul,
        "size" / Int32ul,
        "first_ptr" / Int32ul,
        "n_ptr" / Int32ul,
    )


def _ctab_ctrl() -> Struct:
    """struct rmt_ctab_ctrl"""
    from construct import Int32ul, Struct
    return Struct(
        "cmd" / Int32ul,
        "first_ptr" / Int32ul,
        "n_ptr" / Int32ul,
        "reserved" / Int32ul,
    )


def _ctab_ptr() -> Struct:
    """struct rmt_ctab_ptr"""
    from construct import Int32ul, Struct
    return Struct(
        "offset" / Int32ul,
        "count_offset" / Int32ul,
        "elem_size" / Int32ul,
        "fixed_count" / Int32ul,
        "count_size" / Int32ul,
        "reserved" / Int32ul,
    )


def _ctab_class() -> Struct:
    """struct rmt_ctab_class"""
    from construct import Int32ul, Struct
    return Struct(
        "cls" / Int32ul,
        "size" / Int32ul,
    )


RING_COUNTERS = ("lost_full", "lost_nested", "lost_stopped", "trunc_big", "waits", "wait_ns")
"""The ring's named counters, reported in the recording's MARK LOST record."""
READ_COUNTERS = ("read_copy", "read_syscall", "read_unreadable")
"""How the shim read the program's buffers: by its fault-tolerant copy, by a system call (the slow
path, for a thread that blocks SIGSEGV or SIGBUS), or not at all (a bad pointer); in MARK STOP."""

RING = FlatStruct.lazy(_ring_control, "rmt_ring_ctl")
"""The ring control page's fields, each read or written in place (``RING["head"].get(mm)``)."""
SESSION = FlatStruct.lazy(_session_control, "rmt_session_ctl")
CTAB_HEADER = FlatStruct.lazy(_ctab_header, "rmt_ctab_header")
CTAB_UVM = FlatStruct.lazy(_ctab_uvm, "rmt_ctab_uvm")
CTAB_CTRL = FlatStruct.lazy(_ctab_ctrl, "rmt_ctab_ctrl")
CTAB_PTR = FlatStruct.lazy(_ctab_ptr, "rmt_ctab_ptr")
CTAB_CLASS = FlatStruct.lazy(_ctab_class, "rmt_ctab_class")
LAYOUTS = {flat.name: flat for flat in (RING, SESSION, CTAB_HEADER, CTAB_UVM, CTAB_CTRL, CTAB_PTR, CTAB_CLASS)}
"""C struct name -> its FlatStruct; ``MIRRORS`` has their construct mirrors (the ABI test walks it)."""
_mirror = lazy_mirrors(__name__, {"RingControl": RING, "SessionControl": SESSION, "CtabHeader": CTAB_HEADER,
                                  "CtabUvm": CTAB_UVM, "CtabCtrl": CTAB_CTRL, "CtabPtr": CTAB_PTR,
                                  "CtabClass": CTAB_CLASS})


def __getattr__(name: str) -> Any:
    """The construct mirrors, made on first use: the recorder needs only the FlatStructs, and construct's
    import is a fifth of its start-up."""
    if name == "MIRRORS":
        return {c_name: flat.definition for c_name, flat in LAYOUTS.items()}
    return _mirror(name)
