"""rmtrace profiles list / show / diff / select / build."""

from __future__ import annotations

import json
import shutil

import pytest
from rmtrace.decoders.profiles import available_profiles
from rmtrace.decoders.profiles.serial import decode

from rmtrace.cli.main import main
from tests.synthetic_ogkm import write_tree


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["profiles", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_list(capsys):
    rc, out, _ = run(capsys, "list", "--json")
    rows = {o["version"]: o["counts"] for o in map(json.loads, out.splitlines())}
    assert rc == 0 and list(rows) == available_profiles()
    assert rows["580.142"]["escapes"] == 41 and rows["580.142"]["rpc_functions"] == 230
    rc, out, _ = run(capsys, "list")
    assert rc == 0 and out.splitlines()[0].split()[:4] == ["version", "escapes", "classes", "controls"]
    assert len(out.splitlines()) == len(available_profiles()) + 1


def test_show_control_by_name_and_by_id(capsys):
    rc, out, _ = run(capsys, "show", "580.142", "--control", "NV2080_CTRL_CMD_GPU_GET_INFO", "--json")
    data = json.loads(out)
    assert rc == 0 and data["control"]["hex"] == "0x20800101" and data["control"]["category"] == "0x01"
    assert data["control"]["embedded_pointers"][0]["name"] == "gpuInfoList"
    assert data["layouts"]["NV2080_CTRL_GPU_GET_INFO_PARAMS"]["size"] == 16
    rc, out, _ = run(capsys, "show", "580.142", "--control", "0x20800101")
    assert rc == 0 and "gpuInfoList" in out and "pointer gpuInfoList@8: count u32@0 x 8 bytes" in out


def test_show_class_uvm_layout_and_summary(capsys):
    rc, out, _ = run(capsys, "show", "570.211.01", "--class", "0xc56f", "--uvm", "UVM_REGISTER_GPU",
                     "--layout", "rpc_gsp_rm_control_v03_00")
    assert rc == 0
    assert "NV_CHANNEL_ALLOC_PARAMS  (368 bytes)" in out and "UVM_REGISTER_GPU_PARAMS  (40 bytes)" in out
    assert "rpc_gsp_rm_control_v03_00  (24 bytes)" in out
    rc, out, _ = run(capsys, "show", "595.45.04", "--json")
    assert rc == 0 and json.loads(out)["constants"]["max_rpc_size"] == 65488


@pytest.mark.parametrize("argv, message", [
    (("show", "580.142", "--control", "NV_NO_SUCH_CMD"), "no control named 'NV_NO_SUCH_CMD'"),
    (("show", "580.142", "--control", "0x12345678"), "no controls entry 0x12345678"),
    (("show", "580.142", "--layout", "nope"), "no layout 'nope'"),
    (("show", "1.2.3"), "no shipped profile for driver 1.2.3"),
    (("select", "580.142", "--driver", "9.9"), "no such shipped profile"),
    (("build", "--from", "/nonexistent/tree"), "no such directory"),
])
def test_bad_input_is_a_clear_error(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and message in err and "Traceback" not in err


def test_select(capsys):
    rc, out, _ = run(capsys, "select", "580.159.04")
    assert rc == 0 and out.splitlines() == [
        "driver 580.159.04: profile 580.142",
        "warning: driver 580.159.04 has no shipped profile; using 580.142, the nearest of branch 580"]
    rc, out, _ = run(capsys, "select", "575.64.05")
    assert out.splitlines() == ["driver 575.64.05: profile 575.64.05"]


def test_diff_shows_the_traps(capsys):
    rc, out, _ = run(capsys, "diff", "570.211.01", "575.64.05")
    assert rc == 0
    assert ("layout changed GSP_RM_CONTROL (rpc_gsp_rm_control_v03_00): 24 -> 40 bytes; added rmapiRpcFlags, "
            "rmctrlFlags, rmctrlAccessRight, reserved0; removed flags; params @24/0B -> @40/0B") in out
    assert "gsp function number 0xbe reused: SET_SYSMEM_DIRTY_PAGE_TRACKING_BUFFER -> RESERVED_190" in out
    rc, out, _ = run(capsys, "diff", "590.48.01", "595.45.04")
    assert "status 0x8b changed meaning: NV_ERR_DMA_XFER_FAILED -> NV_ERR_OPERATION_ABORTED" in out
    assert "status renumbered NV_ERR_DMA_XFER_FAILED: 0x8b -> 0x8c" in out
    rc, out, _ = run(capsys, "diff", "535.288.01", "550.163.01")
    assert "gsp event renumbered NVLINK_FAULT_UP: 0x101c -> 0x101b" in out
    rc, out, _ = run(capsys, "diff", "575.64.05", "580.142", "--json")
    data = json.loads(out)
    assert ["NV003E_CTRL_CMD_GET_SURFACE_PHYS_ATTR", 0x003E0101, 0x00410103] in data["controls"]["renumbered"]
    assert ["NV2080_CTRL_CMD_GPU_GET_INFO_V2", 532, 564] in data["controls"]["resized"]
    rc, out, _ = run(capsys, "diff", "580.142", "580.142")
    assert out.splitlines() == ["profile 580.142 -> 580.142", "no differences"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the profile generator needs gcc")
def test_build_writes_a_loadable_profile(capsys, tmp_path):
    tree = write_tree(tmp_path / "tree")
    out_file = tmp_path / "p.json.zst"
    rc, out, _ = run(capsys, "build", "--from", str(tree), "--out", str(out_file))
    assert rc == 0 and out.startswith("profile 999.1.2: 3 escapes, 2 classes, 6 controls")
    profile = decode(out_file.read_bytes(), str(out_file))
    assert profile.version == "999.1.2" and profile.controls[0x20800101].size == 16
