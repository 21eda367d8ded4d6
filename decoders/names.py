"""Names from a profile: control commands, classes, status codes, and how op names are spelled.

A control command the profile lacks is named by what the profile does know,
never guessed: the interface class's control prefix (``NV2080``), the
category's name, then the index: ``NV2080_CTRL_CMD_GPU_0x45``.  The category
name is the profile's own (``profile.categories``, from the headers' category
defines); for the few categories the headers leave unnamed but have commands
in, it is the first word that most of those commands share.  A category
neither way names keeps its number: ``NV2081_CTRL_CMD_0x01_0x08``.
"""

from __future__ import annotations

import enum
import weakref
from collections import Counter, defaultdict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rmtrace.decoders.base import Label
from rmtrace.decoders.profiles.model import DriverProfile

CTRL_INFIX = "_CTRL_CMD_"
CATEGORY_MASK = 0x3F
"""The category is 6 bits; the top two bits of its byte mark legacy (non-)privileged commands."""

NAME_PREFIXES = ("NV_ESC_", "NV_VGPU_MSG_FUNCTION_", "NV_VGPU_MSG_EVENT_")
"""Prefixes the headers put on escape and RPC names; rmtrace shows names without them."""


class ControlNaming(enum.IntEnum):
    """How completely a control command is named (ordered: more is better)."""

    NUMBER = 0    # not even the class is known
    CLASS = 1     # interface class only: NV2080_CTRL_CMD_0x7f_0x01
    CATEGORY = 2  # class and category: NV2080_CTRL_CMD_GPU_0x45
    FULL = 3      # the profile's own name


def short_name(name: str) -> str:
    """An escape or RPC name without the header's prefix."""
    for prefix in NAME_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def gsp_name(name: str) -> str:
    """How a GSP function or event is shown: always with a ``GSP_`` prefix (GSP_FREE, GSP_RM_CONTROL)."""
    name = short_name(name)
    return name if name.startswith("GSP_") else "GSP_" + name


class Names:
    """Name lookups for one profile, with the control categories indexed once."""

    def __init__(self, profile: DriverProfile) -> None:
        self.profile = profile
        self._control_labels: dict[int | None, Label] = {}
        self._class_labels: dict[int | None, Label] = {}
        self._prefix: dict[int, str] = {}
        self._category: dict[tuple[int, int], str] = {}
        groups: dict[tuple[int, int], list[list[str]]] = defaultdict(list)
        prefixes: dict[int, Counter] = defaultdict(Counter)
        for control in profile.controls.values():
            head, sep, tail = control.name.partition(CTRL_INFIX)
            if not sep:
                continue
            prefixes[control.cls][head] += 1
            groups[(control.cls, control.category & CATEGORY_MASK)].append(tail.split("_"))
        for cls, counts in prefixes.items():
            self._prefix[cls] = counts.most_common(1)[0][0]
        for key, names in groups.items():
            name = _category_name(names)
            if name is not None:
                self._category[key] = name
        for (cls, category), name in profile.categories.items():
            self._category[(cls, category & CATEGORY_MASK)] = name

    @property
    def prefixes(self) -> Mapping[int, str]:
        """Interface class -> the prefix its commands are named with (``control`` uses it for unnamed commands)."""
        return MappingProxyType(self._prefix)

    @property
    def category_names(self) -> Mapping[tuple[int, int], str]:
        """(interface class, category & 0x3f) -> the category's name, as ``control`` names unnamed commands."""
        return MappingProxyType(self._category)

    def status(self, code: int | None) -> str | None:
        if code is None:
            return None
        name = self.profile.status.get(code)
        return name if name is not None else f"{code:#010x}"

    def status_ok(self, code: int | None) -> bool | None:
        """Success, or a warning (NV_WARN_*): not a failure."""
        if code is None:
            return None
        return code == 0 or self.profile.status.get(code, "").startswith("NV_WARN_")

    def class_label(self, class_id: int | None) -> Label:
        label = self._class_labels.get(class_id)
        if label is None:
            if class_id is None:
                return Label("?", known=False)
            info = self.profile.classes.get(class_id)
            label = Label(f"class {class_id:#06x}", known=False) if info is None else Label(info.name)
            self._class_labels[class_id] = label
        return label

    def control(self, cmd: int) -> tuple[str, ControlNaming]:
        """The command's name and how completely the profile names it."""
        control = self.profile.controls.get(cmd)
        if control is not None:
            return control.name, ControlNaming.FULL
        cls, category, index = cmd >> 16, (cmd >> 8) & 0xFF, cmd & 0xFF
        prefix = self._prefix.get(cls)
        if prefix is None and cls not in self.profile.classes and cls != 0:
            return f"CTRL_CMD_{cmd:#010x}", ControlNaming.NUMBER
        prefix = prefix or f"NV{cls:04X}"
        name = self._category.get((cls, category & CATEGORY_MASK))
        if name is None:
            return f"{prefix}{CTRL_INFIX}{category:#04x}_{index:#04x}", ControlNaming.CLASS
        return f"{prefix}{CTRL_INFIX}{name}_{index:#04x}", ControlNaming.CATEGORY

    def control_label(self, cmd: int | None) -> Label:
        label = self._control_labels.get(cmd)
        if label is None:
            if cmd is None:
                return Label("?", known=False)
            name, naming = self.control(cmd)
            label = self._control_labels[cmd] = Label(name, known=naming is ControlNaming.FULL)
        return label


def _category_name(names: list[list[str]]) -> str | None:
    """The first word most (over half) of a category's known commands start with, if there is one."""
    word, n = Counter(words[0] for words in names).most_common(1)[0]
    return word if 2 * n > len(names) else None


_NAMES: weakref.WeakKeyDictionary[Any, Names] = weakref.WeakKeyDictionary()


def names(profile: DriverProfile) -> Names:
    """The (cached) name lookups of ``profile``."""
    found = _NAMES.get(profile)
    if found is None:
        found = _NAMES[profile] = Names(profile)
    return found
