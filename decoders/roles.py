"""What calls and objects are *for*, keyed by the numbers NVIDIA's headers give them.

The decoders name a call; these tables say what it is: which escape allocates, which UVM
command registers a GPU, which class is a channel, which control hands out a channel's
work-submit token, which engine type is which copy engine.  They are data keyed by numbers
(escape numbers, UVM ioctl numbers, GSP function numbers, class ids, control commands of an
interface class such as C36F or A06F, NV2080 engine types), never by display strings, and
:func:`roles` computes them once per driver profile.  Each entry also names the header
macro the number is, so ``tests/test_decoders_roles.py`` can check, in every shipped
profile, that the number still means what the table says (and that every class the
headers name like a channel is categorised as one).

``rmtrace.semantics`` turns calls into events with these roles; nothing else reads them.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from rmtrace.decoders.profiles.model import DriverProfile


class Category(enum.IntEnum):
    """What kind of RM object a class makes (what the session model and the host model need to know)."""

    OTHER = 0
    ROOT = 1
    DEVICE = 2
    SUBDEVICE = 3
    VASPACE = 4
    TSG = 5
    CHANNEL = 6
    CE = 7
    COMPUTE = 8
    MEMORY = 9


class EscapeRole(enum.Enum):
    """What an RM escape does.  (Role enums are plain enums: two roles of different tables never
    compare equal, as IntEnums of equal value would.)"""

    OTHER = 0
    ALLOC = 1
    ALLOC_MEMORY = 2
    FREE = 3
    CONTROL = 4
    DUP_OBJECT = 5
    MAP_MEMORY = 6
    UNMAP_MEMORY = 7
    MAP_MEMORY_DMA = 8
    UNMAP_MEMORY_DMA = 9


class ControlRole(enum.Enum):
    """What an RM control command does to a channel."""

    OTHER = 0
    WORK_SUBMIT_TOKEN = 1
    BIND = 2
    SCHEDULE = 3


class UvmRole(enum.Enum):
    """What a UVM ioctl does."""

    OTHER = 0           # needs an initialized VA space on its fd (UVM's own init check)
    INITIALIZE = 1
    MM_INITIALIZE = 2   # these three need no VA space
    DEINITIALIZE = 3
    TOOLS = 4
    REGISTER_GPU = 5
    UNREGISTER_GPU = 6
    REGISTER_CHANNEL = 7
    UNREGISTER_CHANNEL = 8


class GspRole(enum.Enum):
    """What a GSP RPC function or event is."""

    OTHER = 0
    RM_ALLOC = 1
    RM_CONTROL = 2
    FREE = 3
    DUP_OBJECT = 4
    INIT_DONE = 5       # the boot handshake's event: a new GSP client session


R = TypeVar("R", bound=enum.Enum)


@dataclass(frozen=True)
class Numbered(Generic[R]):
    """One table entry: a number, what it is for, and the header macro that defines it."""

    number: int
    role: R
    macro: str


ESCAPES: tuple[Numbered[EscapeRole], ...] = (
    Numbered(0x2B, EscapeRole.ALLOC, "NV_ESC_RM_ALLOC"),
    Numbered(0x27, EscapeRole.ALLOC_MEMORY, "NV_ESC_RM_ALLOC_MEMORY"),
    Numbered(0x29, EscapeRole.FREE, "NV_ESC_RM_FREE"),
    Numbered(0x2A, EscapeRole.CONTROL, "NV_ESC_RM_CONTROL"),
    Numbered(0x34, EscapeRole.DUP_OBJECT, "NV_ESC_RM_DUP_OBJECT"),
    Numbered(0x4E, EscapeRole.MAP_MEMORY, "NV_ESC_RM_MAP_MEMORY"),
    Numbered(0x4F, EscapeRole.UNMAP_MEMORY, "NV_ESC_RM_UNMAP_MEMORY"),
    Numbered(0x57, EscapeRole.MAP_MEMORY_DMA, "NV_ESC_RM_MAP_MEMORY_DMA"),
    Numbered(0x58, EscapeRole.UNMAP_MEMORY_DMA, "NV_ESC_RM_UNMAP_MEMORY_DMA"),
)
"""RM escapes (``_IOC_NR``, nv_escape.h).  IOCTL_XFER_CMD carries one of these: the decoders
report the inner escape (``Decoded.extra["escape"]``)."""

CONTROLS: tuple[Numbered[ControlRole], ...] = (
    Numbered(0xC36F0108, ControlRole.WORK_SUBMIT_TOKEN, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN"),
    Numbered(0xA06F0104, ControlRole.BIND, "NVA06F_CTRL_CMD_BIND"),
    Numbered(0xA06F0103, ControlRole.SCHEDULE, "NVA06F_CTRL_CMD_GPFIFO_SCHEDULE"),
    Numbered(0xA06C0101, ControlRole.SCHEDULE, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE"),
)
"""Channel controls, by command (interface class << 16 | category << 8 | index): every GPFIFO
channel class from Volta on answers the C36F interface, every one from Kepler on A06F, a
channel group A06C."""

UVM_COMMANDS: tuple[Numbered[UvmRole], ...] = (
    Numbered(0x30000001, UvmRole.INITIALIZE, "UVM_INITIALIZE"),
    Numbered(0x0000004B, UvmRole.MM_INITIALIZE, "UVM_MM_INITIALIZE"),
    Numbered(0x30000002, UvmRole.DEINITIALIZE, "UVM_DEINITIALIZE"),
    Numbered(0x25, UvmRole.REGISTER_GPU, "UVM_REGISTER_GPU"),
    Numbered(0x26, UvmRole.UNREGISTER_GPU, "UVM_UNREGISTER_GPU"),
    Numbered(0x1B, UvmRole.REGISTER_CHANNEL, "UVM_REGISTER_CHANNEL"),
    Numbered(0x1C, UvmRole.UNREGISTER_CHANNEL, "UVM_UNREGISTER_CHANNEL"),
    *(Numbered(nr, UvmRole.TOOLS, macro) for nr, macro in (
        (0x38, "UVM_TOOLS_INIT_EVENT_TRACKER"), (0x39, "UVM_TOOLS_SET_NOTIFICATION_THRESHOLD"),
        (0x3A, "UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS"), (0x3B, "UVM_TOOLS_EVENT_QUEUE_DISABLE_EVENTS"),
        (0x3C, "UVM_TOOLS_ENABLE_COUNTERS"), (0x3D, "UVM_TOOLS_DISABLE_COUNTERS"),
        (0x3E, "UVM_TOOLS_READ_PROCESS_MEMORY"), (0x3F, "UVM_TOOLS_WRITE_PROCESS_MEMORY"),
        (0x40, "UVM_TOOLS_GET_PROCESSOR_UUID_TABLE"), (0x43, "UVM_TOOLS_FLUSH_EVENTS"),
        (0x4C, "UVM_TOOLS_INIT_EVENT_TRACKER_V2"), (0x4D, "UVM_TOOLS_GET_PROCESSOR_UUID_TABLE_V2"),
    )),
)
"""UVM ioctls (uvm_ioctl.h; on Linux the number is the request itself).  The tools commands work
on a tools fd, not a VA space."""

GSP_FUNCTIONS: tuple[Numbered[GspRole], ...] = (
    Numbered(0x67, GspRole.RM_ALLOC, "GSP_RM_ALLOC"),
    Numbered(0x4C, GspRole.RM_CONTROL, "GSP_RM_CONTROL"),
    Numbered(0x0A, GspRole.FREE, "FREE"),
    Numbered(0x15, GspRole.DUP_OBJECT, "DUP_OBJECT"),
)
"""GSP RPC functions that carry an RM call (NV_VGPU_MSG_FUNCTION_*, vgpu_rpc_global_enums.h)."""

GSP_EVENTS: tuple[Numbered[GspRole], ...] = (
    Numbered(0x1001, GspRole.INIT_DONE, "GSP_INIT_DONE"),
)
"""GSP events (NV_VGPU_MSG_EVENT_*)."""

GSP_NUMBERS: Mapping[GspRole, int] = {e.role: e.number for e in GSP_FUNCTIONS + GSP_EVENTS}
"""The number of each GSP role, for building RPCs (the host model's exchanges)."""


@dataclass(frozen=True)
class ClassFamily:
    """Classes of one category: listed ids, or every class whose low byte is ``low_byte`` (the
    headers number each family that way: xx6F GPFIFO channels, xxB5 copy engines, xxC0 compute)."""

    category: Category
    ids: frozenset[int] = frozenset()
    low_byte: int | None = None
    macros: str = ""
    """The header macros the ids are (or the family's pattern), for the documentation and the test."""

    def has(self, class_id: int) -> bool:
        return class_id in self.ids or (self.low_byte is not None and class_id & 0xFF == self.low_byte
                                        and class_id > 0xFF)


CLASS_FAMILIES = (
    ClassFamily(Category.ROOT, frozenset({0x0000, 0x0001, 0x0041}),
                macros="NV01_ROOT, NV01_ROOT_NON_PRIV, NV01_ROOT_CLIENT"),
    ClassFamily(Category.DEVICE, frozenset({0x0080}), macros="NV01_DEVICE_0"),
    ClassFamily(Category.SUBDEVICE, frozenset({0x2080}), macros="NV20_SUBDEVICE_0"),
    ClassFamily(Category.VASPACE, frozenset({0x00F2, 0x00FC, 0x90F1}),
                macros="IO_VASPACE_A, FABRIC_VASPACE_A, FERMI_VASPACE_A"),
    ClassFamily(Category.TSG, frozenset({0xA06C}), macros="KEPLER_CHANNEL_GROUP_A"),
    ClassFamily(Category.CHANNEL, low_byte=0x6F, macros="*_CHANNEL_GPFIFO*: NV50 (506F) to Blackwell (CA6F)"),
    ClassFamily(Category.CE, low_byte=0xB5, macros="*_DMA_COPY_*: Maxwell (B0B5) to Blackwell (CAB5)"),
    ClassFamily(Category.COMPUTE, low_byte=0xC0, macros="*_COMPUTE_*: Turing (C5C0) to Blackwell (CEC0)"),
    ClassFamily(Category.MEMORY, frozenset({
        0x003E, 0x003F, 0x0040, 0x0042, 0x0070, 0x0071, 0x0076, 0x0081, 0x0082, 0x0083, 0x00B1, 0x00C2, 0x00C3,
        0x00E0, 0x00F3, 0x00F8, 0x00F9, 0x00FB, 0x00FD, 0x00FE, 0x50A0, 0x90CE}),
        macros="NV01_MEMORY_*, NV_MEMORY_*, NV50_MEMORY_VIRTUAL: the memory classes of cl003e.h to cl90ce.h"),
)
"""Class id -> category, first family that has it wins."""

COPY_ENGINES = ((0x09, 0), (0x34, 10))
"""NV2080_ENGINE_TYPE_COPY(i): COPY0..COPY9 from 0x09, COPY10..COPY19 from 0x34 (ten of each)."""
COPY_ENGINE_RUN = 10
ENGINE_PREFIX = "NV2080_ENGINE_TYPE_"


def class_category(class_id: int | None) -> Category:
    """The category of a class id (OTHER for an id no family has, or None)."""
    if class_id is None:
        return Category.OTHER
    return next((f.category for f in CLASS_FAMILIES if f.has(class_id)), Category.OTHER)


def copy_rank(engine_type: int) -> int | None:
    """The copy-engine instance an NV2080 engine type is (COPY2 -> 2), None when it is no copy engine."""
    for first, rank in COPY_ENGINES:
        if first <= engine_type < first + COPY_ENGINE_RUN:
            return rank + engine_type - first
    return None


@dataclass(frozen=True, eq=False)
class Roles:
    """The tables above for one profile, looked up once.

    The escape, control, UVM and GSP numbers are ABI: the same in every shipped profile (the
    test proves it), so their tables are shared.  Categories are computed for every class the
    profile defines; an id it lacks still gets its family's category."""

    profile: DriverProfile
    escapes: Mapping[int, EscapeRole]
    controls: Mapping[int, ControlRole]
    uvm: Mapping[int, UvmRole]
    gsp: Mapping[int, GspRole]
    categories: Mapping[int, Category]
    """Class id -> category, for every class of the profile."""

    def category(self, class_id: int | None) -> Category:
        if class_id is None:
            return Category.OTHER
        found = self.categories.get(class_id)
        return found if found is not None else class_category(class_id)

    def engine(self, engine_type: int | None) -> tuple[str | None, int | None]:
        """(engine name, CE rank) of an NV2080 engine type: ``("COPY2", 2)``, ``("GR0", None)``."""
        if engine_type is None:
            return None, None
        name = self.profile.engine_types.get(engine_type)
        if name is None:
            return f"engine {engine_type:#x}", None
        return name.removeprefix(ENGINE_PREFIX), copy_rank(engine_type)


def _table(entries: tuple[Numbered[R], ...]) -> dict[int, R]:
    return {e.number: e.role for e in entries}


def _build(profile: DriverProfile) -> Roles:
    return Roles(profile, _table(ESCAPES), _table(CONTROLS), _table(UVM_COMMANDS),
                 _table(GSP_FUNCTIONS + GSP_EVENTS),
                 {cid: class_category(cid) for cid in profile.classes})


_ROLES: weakref.WeakKeyDictionary[DriverProfile, Roles] = weakref.WeakKeyDictionary()


def roles(profile: DriverProfile) -> Roles:
    """The (cached) role tables of ``profile``."""
    found = _ROLES.get(profile)
    if found is None:
        found = _ROLES[profile] = _build(profile)
    return found
