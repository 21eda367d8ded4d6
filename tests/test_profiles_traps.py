"""The cross-version traps (SUMMARY.md of the ABI reference) show up in the shipped profiles.

These facts are written out here on purpose: each is a way a decoder keyed by
the wrong driver branch would silently misread a trace.
"""

from __future__ import annotations

import pytest
from rmtrace.decoders.profiles import load_profile


def _sizes(layout_name: str) -> dict[str, int | None]:
    out = {}
    for version in ("535.288.01", "550.163.01", "570.211.01", "575.64.05", "580.65.06", "580.142", "590.48.01",
                    "595.45.04"):
        layout = load_profile(version).layouts.get(layout_name)
        out[version] = layout.size if layout else None
    return out


def test_status_0x8b_means_different_things_per_branch():
    assert 0x8B not in load_profile("580.65.06").status
    assert load_profile("580.142").status[0x8B] == "NV_ERR_DMA_XFER_FAILED"
    assert load_profile("590.48.01").status[0x8B] == "NV_ERR_DMA_XFER_FAILED"
    p595 = load_profile("595.45.04")
    assert p595.status[0x8B] == "NV_ERR_OPERATION_ABORTED"
    assert p595.status[0x8C] == "NV_ERR_DMA_XFER_FAILED"


def test_gsp_events_renumbered_between_535_and_550():
    p535, p550 = load_profile("535.288.01"), load_profile("550.163.01")
    assert p535.gsp_events[0x101B] == "GSP_SEND_USER_SHARED_DATA"
    for name, old, new in (("NVLINK_FAULT_UP", 0x101C, 0x101B), ("GSP_LOCKDOWN_NOTICE", 0x101D, 0x101C),
                           ("MIG_CI_CONFIG_UPDATE", 0x101E, 0x101D)):
        assert p535.gsp_events[old] == name and p550.gsp_events[new] == name
        assert load_profile("580.142").gsp_events[new] == name


@pytest.mark.parametrize("version, count", [("535.288.01", 203), ("550.163.01", 211), ("570.211.01", 227),
                                            ("575.64.05", 227), ("580.65.06", 228), ("580.142", 229),
                                            ("590.48.01", 228), ("595.45.04", 229)])
def test_num_functions_per_version(version, count):
    profile = load_profile(version)
    assert profile.lookup("gsp_functions", "NUM_FUNCTIONS") == count
    has_crash_buffer = profile.lookup("gsp_functions", "INIT_GSP_TRACE_CRASH_BUFFER") == 228
    assert has_crash_buffer == (version in ("580.142", "595.45.04"))


def test_function_numbers_reused():
    assert load_profile("570.211.01").gsp_functions[190] == "SET_SYSMEM_DIRTY_PAGE_TRACKING_BUFFER"
    assert load_profile("575.64.05").gsp_functions[190] == "RESERVED_190"
    assert load_profile("575.64.05").gsp_functions[223] == "SETUP_HIBERNATION_BUFFER"
    assert load_profile("535.288.01").gsp_functions[201] == "RESERVED_201"
    assert load_profile("550.163.01").gsp_functions[201] == "CTRL_GPU_QUERY_ECC_STATUS"


def test_gsp_rm_control_changed_layout_but_not_its_name():
    sizes = _sizes("rpc_gsp_rm_control_v03_00")
    assert [sizes[v] for v in ("535.288.01", "550.163.01", "570.211.01")] == [24, 24, 24]
    assert all(sizes[v] == 40 for v in ("575.64.05", "580.65.06", "580.142", "590.48.01", "595.45.04"))
    old, new = load_profile("570.211.01"), load_profile("575.64.05")
    control = old.lookup("gsp_functions", "GSP_RM_CONTROL")
    assert old.gsp_payloads[control] == new.gsp_payloads[control] == "rpc_gsp_rm_control_v03_00"
    assert old.layouts["rpc_gsp_rm_control_v03_00"].field("params").offset == 24
    assert new.layouts["rpc_gsp_rm_control_v03_00"].field("params").offset == 40


def test_event_payloads_grew():
    assert _sizes("rpc_rc_triggered_v17_02")["550.163.01"] == 28
    assert _sizes("rpc_rc_triggered_v17_02")["570.211.01"] == 48
    assert _sizes("rpc_os_error_log_v17_00")["550.163.01"] == 268
    assert _sizes("rpc_os_error_log_v17_00")["570.211.01"] == 272
    assert load_profile("580.142").layouts["rpc_post_event_v17_00"].field("eventData").offset == 29


def test_controls_renumbered():
    name = "NV003E_CTRL_CMD_GET_SURFACE_PHYS_ATTR"
    assert load_profile("575.64.05").lookup("controls", name) == 0x003E0101
    assert load_profile("580.142").lookup("controls", name) == 0x00410103
    for name, v580, v595 in (("NV2080_CTRL_CMD_FB_GET_CPU_COHERENT_RANGE", 0x20801361, 0x20801363),
                             ("NV2080_CTRL_CMD_GPU_FORCE_GSP_UNLOAD", 0x208001EB, 0x208001EC)):
        assert load_profile("580.142").lookup("controls", name) == v580
        assert load_profile("595.45.04").lookup("controls", name) == v595


@pytest.mark.parametrize("control, sizes", [
    ("NV2080_CTRL_CMD_GPU_GET_INFO_V2", (516, 524, 524, 532, 564)),
    ("NV2080_CTRL_CMD_FB_GET_INFO_V2", (436, 444, 460, 460, 1028)),
    ("NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2", (644, 700, 404, 404, 804)),
    ("NVA06C_CTRL_CMD_GPFIFO_SCHEDULE", (2, 2, 2, 3, 3)),
])
def test_control_params_resized(control, sizes):
    for version, size in zip(("535.288.01", "550.163.01", "570.211.01", "575.64.05", "580.142"), sizes):
        profile = load_profile(version)
        assert profile.controls[profile.lookup("controls", control)].size == size, version


def test_alloc_and_escape_structs_resized():
    assert _sizes("NV_CHANNEL_ALLOC_PARAMS")["550.163.01"] == 360
    assert _sizes("NV_CHANNEL_ALLOC_PARAMS")["570.211.01"] == 368
    assert _sizes("NVOS46_PARAMETERS")["575.64.05"] == 56
    assert _sizes("NVOS46_PARAMETERS")["580.65.06"] == 64
    assert load_profile("590.48.01").uvm[34].size == 16 and load_profile("580.142").uvm[34].size == 24  # UVM_FREE
