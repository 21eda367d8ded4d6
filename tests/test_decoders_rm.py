"""RM and UVM ioctls decoded with the shipped profiles: names, classes, controls, statuses, handles."""

from __future__ import annotations

import errno
import struct
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rmtrace.decoders import DecoderSet, Level, render
from rmtrace.decoders.context import context
from rmtrace.decoders.craft import Crafter
from rmtrace.decoders.names import ControlNaming, names
from rmtrace.decoders.profiles import load_profile

from rmtrace.calls import Call, CallState
from rmtrace.record import Buffer, BufferFlag, Phase, Record, Role, Source, When
from tests.strategies import records
from tests.traffic import cuda_session


@pytest.fixture(scope="module")
def profile():
    return load_profile("580.142")


@pytest.fixture(scope="module")
def decoders(profile):
    return DecoderSet(profile, user=False)


def one_call(profile, records):
    calls = list(DecoderSet(profile, user=False).calls(records))
    assert len(calls) == 1
    return calls[0]


def test_rm_alloc_named_by_class_with_alloc_params_and_new_handle(profile, decoders):
    records = Crafter(profile).rm_alloc(0xC1D00001, 0xCAF00001, 0, "HOPPER_CHANNEL_GPFIFO_A",
                                        {"gpFifoEntries": 1024, "engineType": 1}, new_handle=0xCAF000D4,
                                        duration_ns=240_000)
    call = one_call(profile, records)
    assert decoders.label(call.first).detail == "HOPPER_CHANNEL_GPFIFO_A"
    d = decoders.decode(call)
    assert (d.name, d.detail, d.status_name, d.ok, d.known) == ("RM_ALLOC", "HOPPER_CHANNEL_GPFIFO_A", "NV_OK", True, True)
    assert d.handles["hClient"] == 0xC1D00001 and d.handles["hParent"] == 0xCAF00001
    assert d.handles["hObject"] == 0xCAF000D4  # RM's new handle, from the AFTER copy
    params = next(b for b in d.buffers if b.role == Role.ALLOC_PARAMS and b.when == When.AFTER)
    assert params.layout.name == "NV_CHANNEL_ALLOC_PARAMS" and params.value.gpFifoEntries == 1024
    line = render.line(d, call, 0)
    assert "RM_ALLOC(hClient=0xc1d00001, hParent=0xcaf00001, hObject=0xcaf000d4, " in line
    assert "HOPPER_CHANNEL_GPFIFO_A{…}) = NV_OK <240µs>" in line


def test_rm_alloc_argument_size_picks_nvos64(profile, decoders):
    defs = context(profile).defs
    nvos64 = defs.build_values("NVOS64_PARAMETERS", {"hRoot": 1, "hObjectParent": 1, "hObjectNew": 2, "hClass": 0x80,
                                                     "paramsSize": 56, "flags": 4})
    rights = bytes(12)
    enter = Record(Source.RM, Phase.ENTER, op=0x2B, call_id=1, buffers=(
        Buffer(Role.ARG, When.BEFORE, nvos64), Buffer(Role.RIGHTS, When.BEFORE, rights)))
    d = decoders.decode(enter)
    assert d.detail == "NV01_DEVICE_0"
    arg = next(b for b in d.buffers if b.role == Role.ARG)
    assert arg.layout.name == "NVOS64_PARAMETERS" and arg.value.flags == 4
    assert any(b.role == Role.RIGHTS and b.title == "rights requested" for b in d.buffers)


def test_control_full_name_params_and_nested_array(profile, decoders):
    records = Crafter(profile).rm_control(1, 2, "NV0080_CTRL_CMD_FIFO_GET_CHANNELLIST", {"numChannels": 2},
                                          nested=(struct.pack("<2I", 0xCAF000D4, 0xCAF000D5), struct.pack("<2I", 7, 8)))
    d = decoders.decode(one_call(profile, records))
    assert d.detail == "NV0080_CTRL_CMD_FIFO_GET_CHANNELLIST" and d.known
    nested = [b for b in d.buffers if b.role == Role.NESTED]
    assert [b.value for b in nested] == [[0xCAF000D4, 0xCAF000D5], [7, 8]]
    assert nested[0].title == "pChannelHandleList[]"
    params = next(b for b in d.buffers if b.role == Role.PARAMS)
    assert params.value.numChannels == 2


@pytest.mark.parametrize("cmd, expect, naming", [
    (0x20800102, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", ControlNaming.FULL),
    (0x20800145, "NV2080_CTRL_CMD_GPU_0x45", ControlNaming.CATEGORY),
    (0x20810102, "NV2081_CTRL_CMD_0x01_0x02", ControlNaming.CLASS),
    (0xFEED0102, "CTRL_CMD_0xfeed0102", ControlNaming.NUMBER),
])
def test_controls_are_named_only_as_far_as_the_profile_knows(profile, cmd, expect, naming):
    assert names(profile).control(cmd) == (expect, naming)


def test_unknown_control_params_are_kept_raw_with_a_note(profile, decoders):
    d = decoders.decode(one_call(profile, Crafter(profile).rm_control(1, 2, 0x20800145, raw_size=24)))
    params = [b for b in d.buffers if b.role == Role.PARAMS]
    assert params and all(b.layout is None and "does not define" in b.note for b in params)
    assert not d.known


def test_status_names_come_from_the_branch_profile():
    """0x8B is NV_ERR_DMA_XFER_FAILED up to 590 and NV_ERR_OPERATION_ABORTED in 595."""
    for version, expect in (("580.142", "NV_ERR_DMA_XFER_FAILED"), ("595.45.04", "NV_ERR_OPERATION_ABORTED")):
        p = load_profile(version)
        records = Crafter(p).rm_control(1, 2, "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", status=0x8B)
        d = DecoderSet(p, user=False).decode(one_call(p, records))
        assert (d.status, d.status_name, d.ok) == (0x8B, expect, False)


def test_failed_ioctl_reports_errno(profile, decoders):
    defs = context(profile).defs
    arg = defs.build_values("NVOS00_PARAMETERS", {"hRoot": 1, "hObjectOld": 2})
    calls = list(decoders.calls([
        Record(Source.RM, Phase.ENTER, op=0x29, call_id=3, buffers=(Buffer(Role.ARG, When.BEFORE, arg),)),
        Record(Source.RM, Phase.EXIT, op=0x29, call_id=3, ret=-1, err=errno.EFAULT),
    ]))
    d = decoders.decode(calls[0])
    assert (d.ok, d.errno, d.status_name) == (False, errno.EFAULT, "EFAULT")
    assert render.line(d, calls[0], 0).endswith("RM_FREE(hClient=0x1, hParent=0x0, hObject=0x2) = EFAULT <0ns>")


@pytest.mark.parametrize("escape", ["NV_ESC_ALLOC_OS_EVENT", "NV_ESC_FREE_OS_EVENT"])
def test_os_event_escapes_report_their_nv_status(profile, decoders, escape):
    """Their ``Status`` member is an NV_STATUS: named as one, not shown as the number 0."""
    c = Crafter(profile, pid=9)
    for status, name, ok in ((0, "NV_OK", True), (0x1F, "NV_ERR_INVALID_ARGUMENT", False)):
        records = c.escape(escape, {"hClient": 0xC1D00001, "hDevice": 0x5C000001, "fd": 12}, {"Status": status})
        d = decoders.decode(Call(tuple(records), CallState.COMPLETE))
        assert (d.status, d.status_name, d.ok) == (status, name, ok), escape
        assert "Status" not in d.args


def test_xfer_is_decoded_as_the_inner_escape(profile, decoders):
    defs = context(profile).defs
    inner = defs.build_values("NVOS54_PARAMETERS", {"hClient": 5, "hObject": 6, "cmd": 0x20801801, "paramsSize": 16})
    xfer = defs.build_values("nv_ioctl_xfer_t", {"cmd": 0x2A, "size": 32, "ptr": 0x7000})
    d = decoders.decode(Record(Source.RM, Phase.ENTER, op=211, call_id=1, buffers=(
        Buffer(Role.ARG, When.BEFORE, xfer), Buffer(Role.XFER, When.BEFORE, inner))))
    assert (d.name, d.detail, d.op) == ("RM_CONTROL", "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", 211)
    assert "via IOCTL_XFER_CMD" in d.notes and d.handles["hClient"] == 5
    assert decoders.label(Record(Source.RM, Phase.ENTER, op=211, buffers=(
        Buffer(Role.ARG, When.BEFORE, xfer), Buffer(Role.XFER, When.BEFORE, inner)))).detail == \
        "NV2080_CTRL_CMD_BUS_GET_PCI_INFO"


def test_unknown_escape_and_truncated_buffers_stay_raw_with_notes(decoders, profile):
    d = decoders.decode(Record(Source.RM, Phase.ENTER, op=0x7F, buffers=(Buffer(Role.ARG, When.BEFORE, b"\1\2"),)))
    assert d.name == "RM_OP_0x7f" and not d.known and "no decoder" in d.notes[0]
    assert d.buffers[0].data == b"\1\2"
    cut = Buffer(Role.ARG, When.BEFORE, bytes(20), flags=BufferFlag.TRUNCATED, orig_len=32)
    d = decoders.decode(Record(Source.RM, Phase.ENTER, op=0x2A, buffers=(cut,)))
    assert d.name == "RM_CONTROL" and not d.known and "cut at the capture limit" in d.notes[0]


def test_uvm_register_gpu(profile, decoders):
    records = Crafter(profile).uvm("UVM_REGISTER_GPU", {"gpu_uuid": {"uuid": bytes(range(16))}, "rmCtrlFd": 3,
                                                         "hClient": 0xC1D00001}, status=0x1F)
    d = decoders.decode(one_call(profile, records))
    assert (d.name, d.status_name, d.ok) == ("UVM_REGISTER_GPU", "NV_ERR_INVALID_ARGUMENT", False)
    assert d.handles == {"hClient": 0xC1D00001, "hSmcPartRef": 0} and d.args["rmCtrlFd"] == 3


def test_the_whole_synthetic_session_is_named_with_no_raw_fallback_but_the_undefined_controls(profile, decoders):
    unknown = set()
    for call in decoders.calls(cuda_session(profile)):
        d = decoders.decode(call)
        assert "exception" not in d.extra
        if not d.known:
            unknown.add(d.detail)
    assert unknown == {"NV2080_CTRL_CMD_GPU_0x45", "NV2081_CTRL_CMD_0x01_0x02", "NV2080_CTRL_CMD_PERF_0xf0"}


KNOWN_OPS = [(src, op) for src, table in DecoderSet(load_profile("580.142"), user=False).tables.items() for op in table]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(records, st.tuples(st.sampled_from(KNOWN_OPS), records).map(
    lambda pair: replace(pair[1], source=pair[0][0], op=pair[0][1]))))
def test_any_record_decodes_without_raising(decoders, record):
    """Random bytes under every known (source, op) and random ops: raw fallbacks, never an exception."""
    for level in Level:
        d = decoders.decode(record, level)
        assert "exception" not in d.extra, d.extra
        d.to_dict()
        render.tree(d)
