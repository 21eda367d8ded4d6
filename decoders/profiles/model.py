"""What a driver profile holds: frozen facts about one NVIDIA driver version.

A profile is data, read from NVIDIA's public headers by ``generate.py`` and
shipped compressed under ``data/``.  It holds the *numbers* (RM escapes, class
ids, control commands and their categories, UVM ioctls, GSP RPC functions and
events, status codes, NV2080 engine types, a few constants) and the *layouts*
(size, field offsets and types) of the structs those numbers carry.  Decoders
are built from a profile; their bodies never ask which driver version they are
decoding.

The layouts are ``rmtrace.layout``'s ``Layout`` and ``Field`` (its docstring
gives their conventions), the types the DWARF reader builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from rmtrace.layout import Field, Layout  # noqa: F401 -- a profile's layouts are these, imported from here


@dataclass(frozen=True)
class Escape:
    """An RM ioctl escape (``_IOC_NR`` of the request on /dev/nvidia*).

    ``device`` says which node RM accepts it on: ``ctl`` (/dev/nvidiactl only),
    ``gpu`` (a /dev/nvidiaN node only) or ``any``.  ``request`` is the full
    ``_IOWR('F', nr, size)`` value where the size is fixed.
    """

    nr: int
    name: str
    struct: str | None
    size: int | None
    request: int | None
    device: str


@dataclass(frozen=True)
class Control:
    """An RM control command: ``cmd = class << 16 | category << 8 | index``."""

    cmd: int
    name: str
    params: str | None
    size: int | None

    @property
    def cls(self) -> int:
        return self.cmd >> 16

    @property
    def category(self) -> int:
        return (self.cmd >> 8) & 0xFF

    @property
    def index(self) -> int:
        return self.cmd & 0xFF


@dataclass(frozen=True)
class UvmCommand:
    """A UVM ioctl; on Linux its number is the raw ioctl request."""

    nr: int
    name: str
    params: str | None
    size: int | None


@dataclass(frozen=True)
class ClassInfo:
    id: int
    name: str
    alloc_params: str | None


@dataclass(frozen=True)
class PointerField:
    """A user pointer (NvP64) inside a control's params, and where its length lives.

    The pointed-to buffer holds ``count * elem_size`` bytes, where ``count`` is
    read from the ``count_size``-byte unsigned field at ``count_offset`` of the
    same params, or is ``fixed_count`` when the header fixes it.
    """

    offset: int
    count_offset: int | None
    count_size: int
    elem_size: int
    fixed_count: int | None
    name: str


@dataclass(frozen=True)
class DriverProfile:
    version: str
    branch: str
    escapes: Mapping[int, Escape]
    classes: Mapping[int, ClassInfo]
    controls: Mapping[int, Control]
    uvm: Mapping[int, UvmCommand]
    status: Mapping[int, str]
    gsp_functions: Mapping[int, str]
    gsp_events: Mapping[int, str]
    gsp_payloads: Mapping[int, str]
    layouts: Mapping[str, Layout]
    constants: Mapping[str, int]
    # NV2080 engine type -> its macro (NV2080_ENGINE_TYPE_COPY2); a numbered instance name
    # (GR0, COPY0, NVDEC0) where several names share the value, the others are aliases.
    engine_types: Mapping[int, str] = field(default_factory=dict)
    # (interface class, category & 0x3f) -> the category's name (GPU, FIFO, OS_UNIX) as the
    # class's NVxxxx_CTRL_<NAME> category defines give it.
    categories: Mapping[tuple[int, int], str] = field(default_factory=dict)
    # interface class -> the prefix its control commands are named with (NV2080, NV_CONF_COMPUTE).
    interface_prefixes: Mapping[int, str] = field(default_factory=dict)
    # Other names the headers give the same number (e.g. NV1_ROOT for NV01_ROOT):
    # name -> number, for lookups by name; the mappings above hold one name each.
    aliases: Mapping[str, Mapping[str, int]] = field(default_factory=dict, compare=False, repr=False)

    def __hash__(self) -> int:
        return hash((self.version, self.branch))

    def embedded_pointers(self, cmd: int) -> tuple[PointerField, ...]:
        """User pointers (NvP64) inside control ``cmd``'s params, with where their element count lives:
        worked out for each command when first asked for (the whole table reads every control's layout:
        some 30 ms, where a trace asks for a few commands)."""
        found = self._pointers.get(cmd)
        if found is None:
            from rmtrace.decoders.profiles.pointers import control_pointers  # pointers.py reads this module's types

            found = self._pointers[cmd] = control_pointers(self, cmd)
        return found

    @cached_property
    def _pointers(self) -> dict[int, tuple[PointerField, ...]]:
        """``embedded_pointers``' answers so far."""
        return {}

    def lookup(self, table: str, name: str) -> int | None:
        """The number called ``name`` in ``table`` (escapes, classes, controls, uvm, status,
        gsp_functions, gsp_events, engine_types), aliases included; None if the profile has no such name."""
        return self._names.get(table, {}).get(name)

    @cached_property
    def _names(self) -> Mapping[str, Mapping[str, int]]:
        index: dict[str, dict[str, int]] = {}
        for table in NAMED_TABLES:
            names = {name: number for name, number in self.aliases.get(table, {}).items()}
            for number, value in getattr(self, table).items():
                names[value if isinstance(value, str) else value.name] = number
            index[table] = names
        return index


NAMED_TABLES = ("escapes", "classes", "controls", "uvm", "status", "gsp_functions", "gsp_events", "engine_types")
