"""Every shipped profile against the reference facts extracted independently from the same tags."""

from __future__ import annotations

import re

import pytest
from rmtrace.decoders.profiles import available_profiles, load_profile

from tests.nvidia_abi import reference

VERSIONS = available_profiles()
_HEX_CLASS = re.compile(r"^NV([0-9A-F]{4})_")


@pytest.fixture(params=VERSIONS)
def pair(request):
    version = request.param
    return load_profile(version), reference(f"versions/{version}.json")


def test_escapes(pair):
    profile, ref = pair
    for name, (nr, size, struct) in ref["escapes"].items():
        esc = profile.escapes[nr]
        assert (esc.name, esc.size) == (name, size), name
        # the profile names a struct by its typedef; the reference sometimes by its tag
        assert esc.struct in (struct, f"{struct}_t"), name
        if size is not None:
            assert esc.request == (3 << 30) | (size << 16) | (0x46 << 8) | nr
    # 535's reference misses the NUMA escapes that kernel-open/common/inc/nv-ioctl-numa.h defines
    extra = {e.name for e in profile.escapes.values()} - set(ref["escapes"])
    assert extra <= {"NV_ESC_NUMA_INFO", "NV_ESC_SET_NUMA_STATUS"}


def test_class_ids(pair):
    profile, ref = pair
    for name, hex_id in ref["class_ids"].items():
        assert profile.lookup("classes", name) == int(hex_id, 16), name
    assert {c.id for c in profile.classes.values()} == {int(h, 16) for h in ref["class_ids"].values()}


def test_controls(pair):
    profile, ref = pair
    for name, (hex_id, params, size) in ref["ctrl"].items():
        cmd = int(hex_id, 16)
        prefix = _HEX_CLASS.match(name)
        if prefix and int(prefix.group(1), 16) != cmd >> 16 and not params:
            continue  # the reference also lists a few non-command constants spelled like commands
        control = profile.controls[cmd]
        assert profile.lookup("controls", name) == cmd, name
        if params:
            assert (control.params, control.size) == (params, size), name


def test_uvm_ioctls(pair):
    profile, ref = pair
    for name, (nr, size) in ref["uvm_ioctls"].items():
        cmd = profile.uvm[nr]
        assert (cmd.name, cmd.size) == (name, size), name
    assert len(profile.uvm) == len(ref["uvm_ioctls"])


def test_gsp_numbers(pair):
    profile, ref = pair
    assert {name: n for n, name in profile.gsp_functions.items()} == ref["gsp_functions"]
    assert {name: n for n, name in profile.gsp_events.items()} == ref["gsp_events"]


def test_gsp_payloads(pair):
    profile, ref = pair
    for key, (number, struct, size) in ref["gsp_rpc_structs"].items():
        assert profile.gsp_payloads[number] == struct, key
        assert profile.layouts[struct].size == size, key
    assert len(profile.gsp_payloads) == len(ref["gsp_rpc_structs"])


def test_status_codes(pair):
    profile, ref = pair
    assert {name: code for code, name in profile.status.items()} == {n: int(h, 16) for n, h in ref["status"].items()}


def _check_layout(profile, name: str, ref_layout: dict) -> None:
    layout = profile.layouts[name]
    assert layout.size == ref_layout["size"], name
    mine = [(f.offset, f.size, f.name) for f in layout.fields]
    assert mine == [tuple(row[:3]) for row in ref_layout["fields"]], name
    for field, row in zip(layout.fields, ref_layout["fields"]):
        if field.kind not in ("struct", "union") and field.elem_kind not in ("struct", "union"):
            assert field.type == row[3], f"{name}.{field.name}"


@pytest.mark.parametrize("section", ["rm_layouts", "alloc_params", "uvm_layouts", "gsp_key_layouts"])
def test_key_layouts_field_by_field(pair, section):
    profile, ref = pair
    checked = 0
    for name, ref_layout in ref[section].items():
        if name not in profile.layouts:
            # the reference files aliases and helper unions of its own; our tables point at these
            assert name in ("NvHandle", "NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS", "rpc_message_generic_union"), name
            continue
        _check_layout(profile, name, ref_layout)
        checked += 1
    assert checked >= len(ref[section]) - 3


@pytest.mark.parametrize("name", ["NVOS00_PARAMETERS", "NVOS21_PARAMETERS", "NVOS54_PARAMETERS", "NVOS64_PARAMETERS",
                                  "NVOS02_PARAMETERS", "NVOS33_PARAMETERS", "NVOS55_PARAMETERS"])
def test_nvos_structs_present(pair, name):
    profile, ref = pair
    _check_layout(profile, name, ref["rm_layouts"][name])


def test_channel_alloc_params(pair):
    profile, ref = pair
    _check_layout(profile, "NV_CHANNEL_ALLOC_PARAMS", ref["alloc_params"]["NV_CHANNEL_ALLOC_PARAMS"])
    cls = profile.classes[profile.lookup("classes", "AMPERE_CHANNEL_GPFIFO_A")]
    assert profile.layouts[cls.alloc_params].size == ref["alloc_params"]["NV_CHANNEL_ALLOC_PARAMS"]["size"]


@pytest.mark.parametrize("name", ["rpc_message_header_v03_00", "GSP_MSG_QUEUE_ELEMENT", "rpc_gsp_rm_alloc_v03_00",
                                  "rpc_gsp_rm_control_v03_00", "rpc_post_event_v17_00", "rpc_rc_triggered_v17_02",
                                  "rpc_os_error_log_v17_00", "rpc_run_cpu_sequencer_v17_00", "rpc_free_v03_00",
                                  "rpc_dup_object_v03_00"])
def test_gsp_layouts(pair, name):
    profile, ref = pair
    if name not in ref["gsp_key_layouts"]:  # e.g. 595 dropped rpc_run_cpu_sequencer_v17_00
        assert name not in profile.gsp_payloads.values()
        return
    _check_layout(profile, name, ref["gsp_key_layouts"][name])


def test_gsp_constants(pair):
    profile, _ = pair
    consts = reference("history.json")["gsp_constants"][profile.version]
    c = profile.constants
    assert c["rpc_signature"] == consts["NV_VGPU_MSG_SIGNATURE_VALID"] == 0x43505256
    assert c["rpc_header_version"] == consts["NV_VGPU_MSG_HEADER_VERSION_MAJOR_TOT"] << 24
    assert c["msgq_prefix_size"] == consts["offsetof(GSP_MSG_QUEUE_ELEMENT,rpc)"]
    assert c["rpc_header_size"] == consts["sizeof(rpc_message_header_v)"]
    # 595 sets the queue sizes at run time (the reference has no macro for them): same values
    assert c["msgq_element_size"] == (consts.get("GSP_MSG_QUEUE_ELEMENT_SIZE_MIN") or 4096)
    assert c["max_rpc_size"] == (consts.get("GSP_MSG_QUEUE_RPC_SIZE_MAX") or 65488)
    assert (c["nv_ioctl_magic"], c["nv_ioctl_base"]) == (ord("F"), 200)


def test_escape_devices_match_top_level_reference():
    top = reference("escapes.json")
    profile = load_profile(top["meta"]["driver_version"])
    for row in top["escapes"]:
        esc = profile.escapes[row["nr"]]
        assert esc.device == {"actual": "gpu", "ctl": "ctl"}.get(row.get("device"), "any"), row["name"]
        if row.get("ioctl_request_IOWR"):
            assert esc.request == int(row["ioctl_request_IOWR"], 16), row["name"]


def test_alloc_params_match_resource_list():
    classes = reference("classes.json")
    profile = load_profile(classes["meta"]["driver_version"])
    roots = {"NV01_ROOT", "NV01_ROOT_NON_PRIV", "NV01_ROOT_CLIENT"}  # profile overrides: NV0000_ALLOC_PARAMETERS
    for row in classes["resource_list"]:
        info = profile.classes[row["id"]]
        expected = "NV0000_ALLOC_PARAMETERS" if row["class_name"] in roots else row["alloc_params"]
        assert info.alloc_params == expected, row["class_name"]


# Interfaces FINN names otherwise than the header's category define, and interfaces with
# no category define at all (the reference gives them FINN's interface name).
FINN_RENAMED = {(0x0050, 0x01): ("UTILS", "MEMORY"), (0x00FD, 0x01): ("FABRIC", "MULTICAST_FABRIC"),
                (0xCBCA, 0x01): ("CCU", "COUNTER_COLLECTION_UNIT")}
NO_CATEGORY_DEFINE = {(0x0076, 0x01), (0x0090, 0x01), (0x00DA, 0x00), (0x00DE, 0x00), (0x00F1, 0x00), (0x00FE, 0x01),
                      (0x0000, 0x10)}  # NV0050_CTRL_CMD_NULL is 0x5000 (the header drops a byte): not NV01_ROOT's


def test_control_categories_match_finn():
    top = reference("ctrl.json")
    profile = load_profile(top["meta"]["driver_version"])
    finn: dict[tuple[int, int], set[str]] = {}
    for row in top["commands"]:
        if row["finn_category"]:
            finn.setdefault((int(row["iface_class"], 16), row["category"] & 0x3F), set()).add(row["finn_category"])
    for key, interfaces in finn.items():
        mine = profile.categories.get(key)
        if key in NO_CATEGORY_DEFINE:
            assert mine is None, key
        elif key in FINN_RENAMED:
            assert (interfaces, mine) == ({FINN_RENAMED[key][0]}, FINN_RENAMED[key][1])
        else:
            # FINN's interface name may carry a class part (NV50_DISPLAY_CHNCTL for CHNCTL); a few
            # commands sit in another interface than their category's (NV2080's HSHUB in GPU)
            assert any(i == mine or i.endswith("_" + mine) for i in interfaces if mine), (key, interfaces, mine)
    assert len(finn) - len(NO_CATEGORY_DEFINE) - len(FINN_RENAMED) > 180
