"""Embedded user pointers in control params, as real CUDA and nvidia-smi traffic uses them."""

from __future__ import annotations

import pytest
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.profiles.pointers import pointer_table

# control -> {pointer field: (count field, element size)}
EXPECTED = {
    "NV0080_CTRL_CMD_GPU_GET_CLASSLIST": {"classList": ("numClasses", 4)},
    "NV2080_CTRL_CMD_GPU_GET_ENGINES": {"engineList": ("engineCount", 4)},
    "NV0080_CTRL_CMD_FIFO_GET_CHANNELLIST": {"pChannelHandleList": ("numChannels", 4),
                                             "pChannelList": ("numChannels", 4)},
    "NV2080_CTRL_CMD_GPU_GET_INFO": {"gpuInfoList": ("gpuInfoListSize", 8)},
    "NV2080_CTRL_CMD_BIOS_GET_INFO": {"biosInfoList": ("biosInfoListSize", 8)},
    "NV2080_CTRL_CMD_FB_GET_INFO": {"fbInfoList": ("fbInfoListSize", 8)},
    "NV2080_CTRL_CMD_GR_GET_INFO": {"grInfoList": ("grInfoListSize", 8)},
    "NV0080_CTRL_CMD_GR_GET_CAPS": {"capsTbl": ("capsTblSize", 1)},
    "NV0080_CTRL_CMD_FIFO_GET_CAPS": {"capsTbl": ("capsTblSize", 1)},
    "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION": {"pDriverVersionBuffer": ("sizeOfStrings", 1),
                                                 "pVersionBuffer": ("sizeOfStrings", 1),
                                                 "pTitleBuffer": ("sizeOfStrings", 1)},
}


def _by_name(profile: DriverProfile, control_name: str) -> dict:
    cmd = profile.lookup("controls", control_name)
    layout = profile.layouts[profile.controls[cmd].params]
    names = {f.offset: f.name for f in layout.fields}
    return {p.name: (names[p.count_offset], p.elem_size, p.offset == layout.field(p.name).offset, p.count_size)
            for p in profile.embedded_pointers(cmd)}


@pytest.mark.parametrize("version", available_profiles())
@pytest.mark.parametrize("control", sorted(EXPECTED))
def test_pointers_real_traffic_uses(version, control):
    got = _by_name(load_profile(version), control)
    for pointer, (count, elem_size) in EXPECTED[control].items():
        assert got[pointer] == (count, elem_size, True, 4), pointer


def test_every_found_pointer_is_an_nvp64_of_its_params_with_a_count_inside():
    profile = load_profile("580.142")
    commands = 0
    for cmd, control in profile.controls.items():
        commands += bool(profile.embedded_pointers(cmd))
        for ptr in profile.embedded_pointers(cmd):
            layout = profile.layouts[control.params]
            field = next(f for f in layout.fields if f.offset == ptr.offset)
            assert field.type == "NvP64" and ptr.elem_size > 0
            count = next(f for f in layout.fields if f.offset == ptr.count_offset)
            assert count.kind in ("uint", "int") and count.size == ptr.count_size
    assert commands >= 40  # 42 in 580.142


def test_commands_without_pointers_have_none():
    profile = load_profile("580.142")
    assert profile.embedded_pointers(profile.lookup("controls", "NV2080_CTRL_CMD_GPU_GET_INFO_V2")) == ()
    assert profile.embedded_pointers(0xDEADBEEF) == ()


def test_kernel_shadow_buffers_are_not_followed():
    profile = load_profile("580.142")
    cmd = profile.lookup("controls", "NVC369_CTRL_CMD_MMU_FAULT_BUFFER_REGISTER_NON_REPLAY_BUF")
    assert profile.embedded_pointers(cmd) == ()


# Per profile: the controls whose params carry pointers, and the pointers in all, as the table built
# control by control before embedded_pointers became lazy found them (bf5c3e9's parent): an oracle the
# lazy path cannot share a mistake with.
POINTERS = {"535.288.01": (39, 46), "550.163.01": (41, 48), "570.211.01": (41, 48), "575.64.05": (42, 49),
            "580.65.06": (42, 49), "580.142": (42, 49), "590.48.01": (42, 49), "595.45.04": (43, 50)}


def test_every_profile_has_its_count_of_pointers():
    assert sorted(POINTERS) == sorted(available_profiles()), "a profile added or gone: count its pointers"


@pytest.mark.parametrize("version", available_profiles())
def test_a_command_asked_for_alone_has_the_whole_tables_pointers(version):
    """embedded_pointers works a command out when first asked for; the same as the whole table, every command."""
    asked, whole = load_profile(version), load_profile(version)
    table = pointer_table(whole)
    assert (len(table), sum(map(len, table.values()))) == POINTERS[version]
    for cmd in [*asked.controls, 0xDEADBEEF]:
        assert asked.embedded_pointers(cmd) == table.get(cmd, ()), hex(cmd)
