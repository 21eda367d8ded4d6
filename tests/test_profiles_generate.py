"""The profile generator: gcc probes, DWARF layouts, macro and enum numbers, the table rules.

Runs on a small synthetic header tree (tests/synthetic_ogkm.py) so that CI, which
has no NVIDIA tree, still exercises the whole DWARF path; and on a real tag
where the open-gpu-kernel-modules mirror is present.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.profiles.generate import build_profile, extract_tag
from rmtrace.decoders.profiles.serial import decode, encode, profile_to_dict

from rmtrace.errors import RmtraceError
from tests.synthetic_ogkm import write_tree

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="the profile generator needs gcc")

# A git clone (bare or not) of NVIDIA/open-gpu-kernel-modules with tag 580.142; this workplace keeps one at the default.
MIRROR = Path(os.environ.get("RMTRACE_OGKM_GIT", "/work/.mirror/NVIDIA+open-gpu-kernel-modules/repo"))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return build_profile(write_tree(tmp_path_factory.mktemp("ogkm")))


def test_version_and_branch_come_from_version_mk(synthetic):
    assert (synthetic.version, synthetic.branch) == ("999.1.2", "999")


def test_escapes_structs_devices_and_requests(synthetic):
    ctl = synthetic.escapes[0x2A]
    assert (ctl.name, ctl.struct, ctl.size, ctl.device) == ("NV_ESC_RM_CONTROL", "NVOS54_PARAMETERS", 32, "ctl")
    assert ctl.request == 0xC020462A
    assert synthetic.escapes[0x2B].struct == "NVOS21_PARAMETERS"  # the case handler's first struct
    card = synthetic.escapes[200]
    assert (card.struct, card.size, card.device) == ("nv_ioctl_card_info_t", 8, "gpu")


def test_classes_aliases_and_alloc_params(synthetic):
    assert synthetic.classes[0].name == "NV01_ROOT" and synthetic.lookup("classes", "NV1_ROOT") == 0
    assert synthetic.classes[0].alloc_params == "NV0000_ALLOC_PARAMETERS"  # override of RS_OPTIONAL(NvHandle)
    assert synthetic.classes[0xC56F].alloc_params == "NV_CHANNEL_ALLOC_PARAMS"


def test_controls_finn_convention_twins_and_aliases(synthetic):
    info = synthetic.controls[0x20800101]
    assert (info.name, info.params, info.size) == ("NV2080_CTRL_CMD_GPU_GET_INFO", "NV2080_CTRL_GPU_GET_INFO_PARAMS", 16)
    assert (info.cls, info.category, info.index) == (0x2080, 0x01, 0x01)
    assert synthetic.controls[0x20800102].params == "NV2080_CTRL_GPU_GET_FLAGS_PARAMS"  # by naming convention
    assert synthetic.controls[0x20800103].params == "NV2080_CTRL_GPU_GET_FLAGS_PARAMS"  # SET takes its GET twin's
    assert synthetic.lookup("controls", "NV2080_CTRL_CMD_GPU_LEGACY_INFO") == 0x20800101
    assert synthetic.lookup("controls", "NV2080_CTRL_CMD_GPU_GET_FLAGS_MODE_FAST") is None  # a value, not a command
    assert set(synthetic.controls) == {0x20800000, 0x20800101, 0x20800102, 0x20800103, 0x20800B01, 0xCB330000}


def test_engine_types_numbered_names_first(synthetic):
    engines = synthetic.engine_types
    assert (engines[0x1], engines[0x9], engines[0x13]) == \
        ("NV2080_ENGINE_TYPE_GR0", "NV2080_ENGINE_TYPE_COPY0", "NV2080_ENGINE_TYPE_NVDEC0")
    assert engines[0x23] == "NV2080_ENGINE_TYPE_CIPHER"  # no numbered name: the first defined
    assert engines[0x34] == "NV2080_ENGINE_TYPE_COPY10" and engines[0xFFFFFFFF] == "NV2080_ENGINE_TYPE_ALLENGINES"
    assert synthetic.lookup("engine_types", "NV2080_ENGINE_TYPE_GRAPHICS") == 1  # an alias
    assert synthetic.lookup("engine_types", "NV2080_ENGINE_TYPE_TSEC") == 0x23
    # counts (NVENC_SIZE 3) and the end marker (LAST 0x35) are not engine types
    assert 3 not in engines and 0x35 not in engines
    assert not any(n.endswith(("_SIZE", "_LAST")) for n in engines.values())
    assert set(engines) == {0, 1, 9, 0xA, 0x13, 0x23, 0x34, 0xFFFFFFFF}


def test_control_categories_and_interface_prefixes(synthetic):
    assert dict(synthetic.categories) == {
        (0x2080, 0x00): "RESERVED", (0x2080, 0x01): "GPU", (0x2080, 0x26): "PMGR", (0x2080, 0x3D): "OS_UNIX",
        (0x2080, 0x0B): "INTERNAL_2",  # no define: its commands' FINN interface less the class part
        (0xCB33, 0x00): "RESERVED", (0xCB33, 0x01): "CONF_COMPUTE"}
    # after a block's end (NV2080_CTRL_CMD_NULL, NVCB33_CTRL_SLOTS 16) nothing is a category:
    # not NV2080_CTRL_MAX_THINGS (0x10), not NVCB33_CTRL_SLOT_DEFAULT (0x02)
    assert dict(synthetic.interface_prefixes) == {0x2080: "NV2080", 0xCB33: "NV_SYN_CC"}


def test_bitfields(synthetic):
    fields = {f.name: f for f in synthetic.layouts["NV2080_CTRL_GPU_GET_FLAGS_PARAMS"].fields}
    assert [(f.offset, f.size, f.bit_offset, f.bit_size) for f in (fields["enabled"], fields["mode"], fields["level"])] \
        == [(0, 4, 0, 1), (0, 4, 1, 3), (0, 4, 8, 8)]
    assert (fields["tail"].offset, fields["tail"].bit_size) == (2, None)
    assert "" not in fields  # the unnamed padding bitfield is not a member


def test_nested_arrays_unions_and_anonymous_structs(synthetic):
    layout = synthetic.layouts["NV_CHANNEL_ALLOC_PARAMS"]
    mem = layout.field("mem")
    assert (mem.offset, mem.size, mem.dims, mem.count, mem.elem, mem.elem_kind, mem.type) == \
        (40, 144, (2, 3), 6, "NV_MEMORY_DESC_PARAMS", "struct", "NV_MEMORY_DESC_PARAMS[2][3]")
    assert synthetic.layouts["NV_MEMORY_DESC_PARAMS"].size == 24
    route = layout.field("route")
    assert route.kind == "union" and synthetic.layouts[route.type].kind == "union"
    assert {f.offset for f in synthetic.layouts[route.type].fields} == {0}
    window = layout.field("window")
    assert window.type == "NV_CHANNEL_ALLOC_PARAMS.window" and synthetic.layouts[window.type].size == 4
    name = synthetic.layouts["NV0000_ALLOC_PARAMETERS"].field("processName")
    assert (name.kind, name.elem, name.elem_kind, name.count) == ("array", "char", "char", 100)


def test_uvm(synthetic):
    assert synthetic.uvm[5].params == "UVM_REGISTER_THING_PARAMS" and synthetic.uvm[5].size == 24
    assert synthetic.uvm[0x30000001].size == 16
    assert synthetic.uvm[0x30000002].params is None
    assert synthetic.lookup("uvm", "UVM_MAX_THINGS") is None


def test_gsp_tables_payloads_and_constants(synthetic):
    assert dict(synthetic.gsp_functions) == {0: "NOP", 10: "FREE", 11: "NUM_FUNCTIONS"}
    assert synthetic.gsp_events[0x1003] == "POST_EVENT"
    assert dict(synthetic.gsp_payloads) == {10: "rpc_free_v03_00", 0x1003: "rpc_post_event_v17_00"}
    event_data = synthetic.layouts["rpc_post_event_v17_00"].field("eventData")
    assert (event_data.offset, event_data.size, event_data.count) == (29, 0, 0)  # flexible array member
    assert synthetic.layouts["GSP_MSG_QUEUE_ELEMENT"].field("rpc").type == "rpc_message_header_v03_00"
    c = synthetic.constants
    assert (c["rpc_signature"], c["rpc_header_version"], c["msgq_prefix_size"], c["max_rpc_size"]) == \
        (0x43505256, 0x03000000, 48, 65488)
    assert dict(synthetic.status) == {0: "NV_OK", 0x1F: "NV_ERR_INVALID_ARGUMENT", 0xFFFF: "NV_ERR_GENERIC",
                                      0x10001: "NV_WARN_NOTHING_TO_DO"}


def test_embedded_pointer_and_round_trip(synthetic):
    (ptr,) = synthetic.embedded_pointers(0x20800101)
    assert (ptr.name, ptr.offset, ptr.count_offset, ptr.count_size, ptr.elem_size) == ("gpuInfoList", 8, 0, 4, 8)
    assert decode(encode(synthetic), "synthetic") == synthetic


def test_a_header_that_does_not_compile_is_reported(tmp_path):
    tree = write_tree(tmp_path)
    (tree / "src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080gpu.h").write_text("typedef struct { no_such_type x; } broken;\n")
    with pytest.raises(RmtraceError, match="probe ctrl.*do not compile"):
        build_profile(tree)


def test_not_a_tree_is_an_rmtrace_error(tmp_path):
    with pytest.raises(RmtraceError, match="not an open-gpu-kernel-modules tree"):
        build_profile(tmp_path)
    with pytest.raises(RmtraceError, match="no such directory"):
        build_profile(tmp_path / "absent")


NO_MIRROR = ("needs a clone of open-gpu-kernel-modules: git clone --bare https://github.com/NVIDIA/open-gpu-kernel-modules DIR;"
             " then RMTRACE_OGKM_GIT=DIR")


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason=NO_MIRROR)
def test_real_tag_regenerates_the_shipped_profile(tmp_path):
    tree = extract_tag(MIRROR, "580.142", tmp_path / "ogkm")
    assert profile_to_dict(build_profile(tree)) == profile_to_dict(load_profile("580.142"))
