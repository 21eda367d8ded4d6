"""Engine types and control categories in every shipped profile, and what the session model and
the decoders' naming make of them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rmtrace.decoders.names import ControlNaming, Names
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.roles import roles

VERSIONS = available_profiles()
ENGINE = "NV2080_ENGINE_TYPE_"
# The second copy-engine range (COPY10..COPY19 at 0x34..0x3d) arrived in 570; 550 reserved those values.
SECOND_CE_RANGE = [v for v in VERSIONS if tuple(map(int, v.split("."))) >= (570,)]


@pytest.fixture(params=VERSIONS)
def profile(request):
    return load_profile(request.param)


def engine_info(profile, engine_type):
    return roles(profile).engine(engine_type)


def test_engine_numbers(profile):
    assert profile.lookup("engine_types", ENGINE + "GR0") == 0x1
    assert profile.engine_types[0x1] == ENGINE + "GR0"  # the numbered name, not GRAPHICS
    assert profile.lookup("engine_types", ENGINE + "GRAPHICS") == 0x1
    for n in range(10):
        assert profile.engine_types[0x9 + n] == f"{ENGINE}COPY{n}"
    assert profile.engine_types[0x13] == ENGINE + "NVDEC0" and profile.lookup("engine_types", ENGINE + "BSP") == 0x13
    assert not any(name.endswith(("_SIZE", "_LAST")) for name in profile.engine_types.values())


@pytest.mark.parametrize("version", SECOND_CE_RANGE)
def test_copy10_to_19_live_in_a_second_range(version):
    profile = load_profile(version)
    copy9, copy10 = (profile.lookup("engine_types", f"{ENGINE}COPY{n}") for n in (9, 10))
    assert (copy9, copy10) == (0x12, 0x34)
    between = {profile.engine_types[v] for v in range(copy9 + 1, copy10)}
    assert ENGINE + "NVJPEG7" in between and not any("COPY" in name for name in between)
    assert [profile.lookup("engine_types", f"{ENGINE}COPY{n}") for n in range(10, 20)] == list(range(0x34, 0x3E))
    assert engine_info(profile, 0x34) == ("COPY10", 10) and engine_info(profile, 0x3D) == ("COPY19", 19)


def test_session_names_engines_and_ce_ranks(profile):
    assert engine_info(profile, 0xB) == ("COPY2", 2)
    assert engine_info(profile, 0x1) == ("GR0", None)
    assert engine_info(profile, 0x13) == ("NVDEC0", None)
    assert engine_info(profile, 0x7777) == ("engine 0x7777", None)


def test_categories(profile):
    c = profile.categories
    assert (c[(0x2080, 0x01)], c[(0x2080, 0x11)], c[(0x2080, 0x3D)]) == ("GPU", "FIFO", "OS_UNIX")
    assert (c[(0x0000, 0x01)], c[(0x0080, 0x02)], c[(0xA06F, 0x01)]) == ("SYSTEM", "GPU", "GPFIFO")
    assert all(category <= 0x3F for _, category in c)  # legacy (non-)privileged variants fold into theirs
    # most commands are named after their category: the names and the ids agree
    named = [ctl for ctl in profile.controls.values() if (ctl.cls, ctl.category & 0x3F) in c]
    agree = [ctl for ctl in named if ctl.name.partition("_CTRL_CMD_")[2].startswith(c[(ctl.cls, ctl.category & 0x3F)])]
    assert len(named) > 0.95 * len(profile.controls) and len(agree) > 0.7 * len(named)
    assert profile.interface_prefixes[0x2080] == "NV2080" and profile.interface_prefixes[0xA06F] == "NVA06F"


def test_categories_only_finn_names_and_other_prefixes():
    profile = load_profile("580.142")
    assert profile.categories[(0x2080, 0x0B)] == "INTERNAL_2"  # FINN_NV20_SUBDEVICE_0_INTERNAL_2_INTERFACE_ID
    assert profile.categories[(0xB0CC, 0x03)] == "POWER"  # FINN_MAXWELL_PROFILER_POWER_INTERFACE_ID
    assert profile.interface_prefixes[0xCB33] == "NV_CONF_COMPUTE"  # NV_CONF_COMPUTE_CTRL_CMD_NULL
    assert profile.interface_prefixes[0xC56F] == "NVC56F"  # its NULL command is NVC36F's: the categories' prefix


def test_unknown_commands_are_named_by_the_profiles_categories():
    profile = load_profile("580.142")
    names = Names(profile)
    assert names.control(0x20800145) == ("NV2080_CTRL_CMD_GPU_0x45", ControlNaming.CATEGORY)
    # VOLT has no command in the headers: only the profile's category table names it
    assert not any(ctl.cls == 0x2080 and ctl.category & 0x3F == 0x32 for ctl in profile.controls.values())
    assert names.control(0x20803245) == ("NV2080_CTRL_CMD_VOLT_0x45", ControlNaming.CATEGORY)
    assert names.control(0x2080B245)[0] == "NV2080_CTRL_CMD_VOLT_0x45"  # the legacy privilege bit set
    without = Names(replace(profile, categories={}))
    assert without.control(0x20803245) == ("NV2080_CTRL_CMD_0x32_0x45", ControlNaming.CLASS)


def test_diff_shows_the_second_copy_range_arriving():
    from rmtrace.decoders.profiles.diff import diff_profiles

    engines = diff_profiles(load_profile("550.163.01"), load_profile("570.211.01"))["engine_types"]
    assert [0x34, ENGINE + "RESERVED34", ENGINE + "COPY10"] in engines["reused"]
    assert ENGINE + "COPY10" in engines["added"] and ENGINE + "RESERVED34" in engines["removed"]
