"""User pointers inside control params, and where each one's length lives.

Some controls carry a user pointer (``NvP64``) in their params: RM copies the
pointed-to array in and out as well, so a recorder must capture it and a
decoder must show it.  From a profile's layouts, for each top-level
``NvP64`` member of a control's params, we find

* the **count**: the field named in ``OVERRIDES``, else the first field whose
  name (compared without case) is one of ``COUNT_NAMES`` filled in with the
  pointer's name and its stems (``pChannelList`` gives ``ChannelList``,
  ``Channel``, ``Channels``...), else the params' only count-like field
  (``COUNT_LIKE``: ``num*``, ``*Count``, ``*Size``, ``*Length``, ``sizeOf*``...);
* the **element**: from ``OVERRIDES``, else the first ``ELEMENT_RULES`` row
  whose pattern matches the pointer's name (``{prefix}`` is the params'
  ``NVxxxx``, ``{STEM}`` the matched stem in upper snake case: ``gpuInfoList``
  gives ``NV2080_CTRL_GPU_INFO``), else a byte (``NvU8``) when the count field
  is a byte count by its name (``BYTE_COUNTS``).

A pointer whose count or element the rules cannot find is left out rather
than guessed; so are pointers inside nested structs and unions, and the
pointers RM hands back rather than reads (``NOT_BUFFERS``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rmtrace.decoders.profiles.model import DriverProfile, Field, Layout, PointerField

# Prefixes and suffixes a pointer's name wears around the thing it counts.
POINTER_PREFIXES = ("ph", "p")
POINTER_SUFFIXES = ("List", "Tbl", "Table", "Buffer", "Buff", "Buf", "Ptr", "Array")
COUNT_NAMES = ("{name}Size", "{name}Count", "{name}Length", "{stem}Count", "{stem}Size", "{stem}Length",
               "num{stem}", "num{stem}s", "num{stem}es", "{single}Count", "num{single}s")
COUNT_LIKE = re.compile(r"^(num[A-Z0-9]|count$|size$|length$|sizeOf)|(Count|Size|Length|Entries)$")
BYTE_COUNTS = re.compile(r"^(size|length|sizeOf)|(Size|Length)$")

# (pattern on the pointer's name, element type); the first match wins.
ELEMENT_RULES = (
    (re.compile(r"^(?P<stem>\w+)InfoList$"), "{prefix}_CTRL_{STEM}_INFO"),
    (re.compile(r"^(classList|engineList)$"), "NvU32"),
    (re.compile(r"^p?(Channel)?HandleList$|^ph[A-Z]"), "NvHandle"),
    (re.compile(r"^pChannelList$"), "NvU32"),
    (re.compile(r"^capsTbl$"), "NvU8"),
)

# (params struct, pointer field) -> {"count": field name, "elem": type} where the rules fail.
OVERRIDES: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("NV2080_CTRL_GPU_GET_NVENC_SW_SESSION_INFO_PARAMS", "sessionInfoTbl"):
        {"count": "sessionInfoTblEntry", "elem": "NV2080_CTRL_NVENC_SW_SESSION_INFO"},
    ("NVA0BC_CTRL_NVENC_SW_SESSION_UPDATE_INFO_PARAMS", "timestampBuffer"):
        {"count": "timestampBufferSize", "elem": "NVA0BC_CTRL_NVENC_TIMESTAMP"},
}
# Pointers RM hands back (kernel shadow buffers of the fault-buffer classes): nothing to copy.
NOT_BUFFERS = frozenset(("NVC369_CTRL_MMU_FAULT_BUFFER_REGISTER_NON_REPLAY_BUF_PARAMS",
                         "NVC369_CTRL_MMU_FAULT_BUFFER_UNREGISTER_NON_REPLAY_BUF_PARAMS",
                         "NVC369_CTRL_MMU_FAULT_BUFFER_REGISTER_REPLAY_BUF_PARAMS",
                         "NVC369_CTRL_MMU_FAULT_BUFFER_UNREGISTER_REPLAY_BUF_PARAMS"))

SCALAR_SIZES = {"NvU8": 1, "NvS8": 1, "char": 1, "NvU16": 2, "NvS16": 2, "NvU32": 4, "NvS32": 4, "NvHandle": 4,
                "NvV32": 4, "NvU64": 8, "NvS64": 8, "NvP64": 8}


def pointer_table(profile: DriverProfile) -> dict[int, tuple[PointerField, ...]]:
    """Control command -> the pointers its params carry (only commands that have any)."""
    return {cmd: found for cmd in profile.controls if (found := control_pointers(profile, cmd))}


def control_pointers(profile: DriverProfile, cmd: int) -> tuple[PointerField, ...]:
    """The pointers control ``cmd``'s params carry (none for a command the profile does not know)."""
    control = profile.controls.get(cmd)
    layout = profile.layouts.get(control.params) if control is not None and control.params else None
    if layout is None or layout.name in NOT_BUFFERS:
        return ()
    return tuple(p for p in (_pointer(profile, layout, f) for f in layout.fields if f.type == "NvP64") if p)


def _pointer(profile: DriverProfile, layout: Layout, ptr: Field) -> PointerField | None:
    override = OVERRIDES.get((layout.name, ptr.name), {})
    count = _field_named(layout, override["count"]) if "count" in override else _count_field(layout, ptr)
    if count is None:
        return None
    elem = override.get("elem") or _element(layout, ptr, count)
    size = _size_of(profile, elem) if elem else None
    if not size:
        return None
    return PointerField(offset=ptr.offset, count_offset=count.offset, count_size=count.size, elem_size=size,
                        fixed_count=None, name=ptr.name)


def _stems(name: str) -> list[str]:
    stems = [name]
    for prefix in POINTER_PREFIXES:
        if name.startswith(prefix) and name[len(prefix):len(prefix) + 1].isupper():
            stems.append(name[len(prefix):])
            break
    for stem in list(stems):
        for suffix in POINTER_SUFFIXES:
            if stem.endswith(suffix) and len(stem) > len(suffix):
                stems.append(stem[: -len(suffix)])
    return stems


def _count_field(layout: Layout, ptr: Field) -> Field | None:
    by_lower = {f.name.lower(): f for f in layout.fields if f.kind in ("uint", "int")}
    for stem in _stems(ptr.name):
        single = stem[:-1] if stem.endswith("s") else stem
        for template in COUNT_NAMES:
            candidate = template.format(name=ptr.name, stem=stem, single=single).lower()
            if candidate in by_lower:
                return by_lower[candidate]
    counts = [f for f in by_lower.values() if COUNT_LIKE.search(f.name)]
    return counts[0] if len(counts) == 1 else None


def _element(layout: Layout, ptr: Field, count: Field) -> str | None:
    prefix = layout.name.split("_CTRL_")[0]
    for pattern, elem in ELEMENT_RULES:
        m = pattern.search(ptr.name)
        if m:
            stem = m.groupdict().get("stem") or ""
            return elem.format(prefix=prefix, STEM=_upper_snake(stem))
    return "NvU8" if BYTE_COUNTS.search(count.name) else None


def _upper_snake(camel: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", camel).upper()


def _field_named(layout: Layout, name: str) -> Field | None:
    return next((f for f in layout.fields if f.name == name), None)


def _size_of(profile: DriverProfile, type_name: str) -> int | None:
    layout = profile.layouts.get(type_name)
    return layout.size if layout else SCALAR_SIZES.get(type_name)
