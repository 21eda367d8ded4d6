"""The role tables (rmtrace.decoders.roles) agree with every shipped profile's numbers and names.

The tables are keyed by numbers; the header macro each entry names is what the number must
still be in every profile.  Class categories come from numbers too (listed ids, or a family's
low byte), and here they are checked against what the headers call the classes: every class
named like a channel is a channel, and nothing else is.
"""

from __future__ import annotations

import re

import pytest
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.roles import (
    CLASS_FAMILIES,
    CONTROLS,
    ESCAPES,
    GSP_EVENTS,
    GSP_FUNCTIONS,
    UVM_COMMANDS,
    Category,
    UvmRole,
    class_category,
    copy_rank,
    roles,
)

PROFILES = available_profiles()

NAMED_LIKE = (
    (Category.ROOT, r"^NV01_ROOT"),
    (Category.DEVICE, r"^NV01_DEVICE_0$"),
    (Category.SUBDEVICE, r"^NV20_SUBDEVICE_0$"),
    (Category.VASPACE, r"_VASPACE_"),
    (Category.TSG, r"_CHANNEL_GROUP_"),
    (Category.CHANNEL, r"_CHANNEL_GPFIFO"),
    (Category.CE, r"_DMA_COPY_"),
    (Category.COMPUTE, r"_COMPUTE_[A-Z]$"),
    (Category.OTHER, r"_INLINE_TO_MEMORY_"),  # an engine class, not memory
    (Category.MEMORY, r"MEMORY"),
)
"""What the headers call each category's classes: the test's view, never the code's."""


@pytest.fixture(scope="module", params=PROFILES)
def profile(request):
    return load_profile(request.param)


def test_eight_profiles_are_checked():
    assert len(PROFILES) == 8


def _name(value) -> str:
    return value if isinstance(value, str) else value.name


@pytest.mark.parametrize("entries, table", [(ESCAPES, "escapes"), (CONTROLS, "controls"), (UVM_COMMANDS, "uvm"),
                                            (GSP_FUNCTIONS, "gsp_functions"), (GSP_EVENTS, "gsp_events")])
def test_every_numbered_entry_is_its_macro_in_every_profile(profile, entries, table):
    """Where a profile has the number it is the macro; where it lacks it, no other number is that macro
    (an older driver without the command).  Only the UVM tools' _V2 commands are that young."""
    numbers = getattr(profile, table)
    for entry in entries:
        found = numbers.get(entry.number)
        if found is None:
            assert entry.macro.endswith("_V2") and entry.macro not in map(_name, numbers.values()), \
                (profile.version, entry)
        else:
            assert _name(found) == entry.macro, (profile.version, entry)


def test_every_uvm_tools_command_is_a_tools_command(profile):
    table = roles(profile).uvm
    for nr, cmd in profile.uvm.items():
        assert (table.get(nr) is UvmRole.TOOLS) == cmd.name.startswith("UVM_TOOLS_"), cmd


def test_class_categories_agree_with_what_the_headers_call_the_classes(profile):
    categories = roles(profile).categories
    assert set(categories) == set(profile.classes)
    for cid, info in profile.classes.items():
        named = next((c for c, pattern in NAMED_LIKE if re.search(pattern, info.name)), Category.OTHER)
        assert categories[cid] is named, (profile.version, hex(cid), info.name, categories[cid], named)


def test_a_class_has_one_category_in_every_profile():
    seen: dict[int, tuple[Category, str]] = {}
    for version in PROFILES:
        for cid, category in roles(load_profile(version)).categories.items():
            assert seen.setdefault(cid, (category, version))[0] is category, (hex(cid), version, seen[cid])
    # the families the tables list are all used: a stale entry would mean nothing
    used = {category for category, _ in seen.values()}
    assert {f.category for f in CLASS_FAMILIES} <= used


def test_ids_no_profile_has_still_get_their_familys_category():
    assert class_category(0xCF6F) is Category.CHANNEL and class_category(0xCFB5) is Category.CE
    assert class_category(0x6F) is Category.OTHER and class_category(None) is Category.OTHER
    assert class_category(0x1234) is Category.OTHER


def test_copy_engine_ranks_come_from_the_engine_numbers(profile):
    """COPYn is rank n; an older profile names the numbers of COPY10-19 RESERVEDnn (not yet defined)."""
    names = {t: name.removeprefix("NV2080_ENGINE_TYPE_") for t, name in profile.engine_types.items()}
    for engine_type, short in names.items():
        m = re.fullmatch(r"COPY(\d+)", short)
        if m is not None:
            assert copy_rank(engine_type) == int(m.group(1)), (profile.version, short)
        else:
            assert copy_rank(engine_type) is None or short.upper() == f"RESERVED{engine_type:X}", (profile.version, short)
    r = roles(profile)
    assert r.engine(0x0B) == ("COPY2", 2) and r.engine(0x0E) == ("COPY5", 5)
    assert r.engine(0x01) == ("GR0", None) and r.engine(0x7777) == ("engine 0x7777", None)
    assert r.engine(None) == (None, None)


def test_roles_of_different_tables_never_compare_equal():
    """They key one table of readers together (an IntEnum's ALLOC_MEMORY would be GSP's RM_CONTROL)."""
    from rmtrace.decoders.roles import EscapeRole, GspRole
    assert EscapeRole.ALLOC_MEMORY != GspRole.RM_CONTROL and len({EscapeRole.ALLOC_MEMORY, GspRole.RM_CONTROL}) == 2
