"""GSP RPCs built with the same construct definitions the decoder uses, then decoded and paired."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmtrace.decoders import DecoderSet, render
from rmtrace.decoders.context import context
from rmtrace.decoders.gsp import checksum, codec_for
from rmtrace.decoders.profiles import load_profile

from rmtrace.calls import CallState
from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from tests.declarative import common

GET_INFO = 0x20800102  # NV2080_CTRL_CMD_GPU_GET_INFO_V2
FB_INFO = 0x20801303   # NV2080_CTRL_CMD_FB_GET_INFO_V2


@pytest.fixture(scope="module")
def profile():
    return load_profile("580.142")


@pytest.fixture(scope="module")
def codec(profile):
    return codec_for(profile)


@pytest.fixture(scope="module")
def decoders(profile):
    return DecoderSet(profile, user=False)


class Wire:
    """A GSP channel: numbers queue elements as GSP's message queue does and makes records of messages."""

    def __init__(self, codec, fd=0):
        self.codec, self.fd, self.seq_num, self.t = codec, fd, {Phase.SEND: 0, Phase.RECV: 0}, 1000

    def send(self, phase, message, pid=0):
        prefix = self.codec.element_prefix(message, self.seq_num[phase])
        self.seq_num[phase] += 1
        self.t += 700
        function = struct.unpack_from("<I", message, 12)[0]
        return Record(Source.GSP, phase, op=function, time_ns=self.t, pid=pid, tid=pid, fd=self.fd,
                      buffers=(Buffer(Role.PAYLOAD, When.ONCE, message), Buffer(Role.ARG, When.ONCE, prefix)))


def info_params(profile, n=3):
    return context(profile).defs.build_values("NV2080_CTRL_GPU_GET_INFO_V2_PARAMS", {
        "gpuInfoListSize": n, "gpuInfoList": [{"index": i + 1, "data": 0x100 * (i + 1)} for i in range(n)]})


def control_exchange(codec, wire, params, sequence, cmd=GET_INFO, result=0, events=()):
    payload = codec.payload(76, {"hClient": 0xC1D00001, "hObject": 0x5C000001, "cmd": cmd, "params": params})
    request = wire.send(Phase.SEND, codec.build(76, payload, sequence))
    reply = wire.send(Phase.RECV, codec.build(76, payload, sequence, rpc_result=result, rpc_result_private=0))
    return [request, *events, reply]


def test_queue_element_prefix_checksums_to_zero_and_counts_elements(codec, profile):
    message = codec.build(76, codec.payload(76, {"cmd": GET_INFO, "params": info_params(profile)}), 9)
    prefix = codec.element_prefix(message, 41)
    assert len(prefix) == 48 and checksum(prefix + message) == 0
    element = codec.prefix.parse(prefix)
    assert (element.seqNum, element.elemCount) == (41, 1)
    big = codec.build(76, codec.payload(76, {"params": bytes(20000)}), 9)
    assert codec.prefix.parse(codec.element_prefix(big, 0)).elemCount == 5  # ceil((48 + 20072) / 4096)


def test_request_and_response_pair_with_an_event_between(codec, profile, decoders):
    wire = Wire(codec)
    event = wire.send(Phase.RECV, codec.build(0x1003, codec.payload(0x1003, {
        "hClient": 0xC1D00001, "hEvent": 0xBEEF0001, "notifyIndex": 2, "eventData": b"\x01\x02"}), 0, rpc_result=0))
    records = control_exchange(codec, wire, info_params(profile), 17, events=[event])
    calls = list(decoders.calls(records))
    assert [c.state for c in calls] == [CallState.COMPLETE, CallState.SINGLE]
    call, ev = calls
    assert len(call.records) == 2 and call.records[1].phase == Phase.RECV
    d = decoders.decode(call)
    assert (d.name, d.detail, d.status_name, d.known) == ("GSP_RM_CONTROL", "NV2080_CTRL_CMD_GPU_GET_INFO_V2", "NV_OK", True)
    assert d.handles == {"hClient": 0xC1D00001, "hObject": 0x5C000001} and d.extra["sequence"] == 17
    assert not d.notes  # checksums, signature, header version all as expected
    params = [b for b in d.buffers if b.role == Role.PARAMS]
    assert [b.when for b in params] == [When.BEFORE, When.AFTER]
    assert params[0].value.gpuInfoList[2].data == 0x300
    e = decoders.decode(ev)
    assert (e.name, e.status, e.args["hEvent"], e.args["eventData"]) == ("GSP_POST_EVENT", None, 0xBEEF0001, b"\x01\x02")
    assert "← GSP_POST_EVENT(" in render.line(e, ev, 0)


def test_params_inside_an_rpc_decode_exactly_as_in_the_ioctl(codec, profile, decoders):
    from rmtrace.decoders.craft import Crafter
    params = info_params(profile, 5)
    gsp = decoders.decode(list(decoders.calls(control_exchange(codec, Wire(codec), params, 3)))[0])
    records = Crafter(profile).rm_control(0xC1D00001, 0x5C000001, GET_INFO, {"gpuInfoListSize": 5, "gpuInfoList": [
        {"index": i + 1, "data": 0x100 * (i + 1)} for i in range(5)]})
    ioctl = decoders.decode(list(decoders.calls(records))[0])
    def pick(d):
        return [(b.layout.name, render.plain(b.value, b.layout, b.layouts)) for b in d.buffers if b.role == Role.PARAMS]

    assert pick(gsp) == pick(ioctl)


def test_a_large_control_goes_as_a_continuation_chain_both_ways(codec, profile, decoders):
    wire = Wire(codec)
    params = bytes(range(256)) * 600  # 153600 bytes: three records each way
    payload = codec.payload(76, {"hClient": 1, "hObject": 2, "cmd": FB_INFO, "params": params})
    request = [wire.send(Phase.SEND, m) for m in codec.split(76, payload, 40)]
    replies = codec.split(76, payload, 40)
    event = wire.send(Phase.RECV, codec.build(0x1001, codec.payload(0x1001, {}), 0, rpc_result=0))
    response = [wire.send(Phase.RECV, codec.message.build({**codec.message.parse(m), "rpc_result": 0}))
                for m in replies]
    assert [r.op for r in request] == [76, 71, 71]
    assert [struct.unpack_from("<I", r.buffers[0].data, 24)[0] for r in request] == [40, 41, 42]
    assert len(request[0].buffers[0].data) == 65488
    calls = list(decoders.calls(request + [event] + response))
    assert [len(c.records) for c in calls] == [6, 1] and calls[0].state is CallState.COMPLETE
    d = decoders.decode(calls[0])
    assert (d.extra["parts"], d.extra["reply_parts"], d.status_name) == (3, 3, "NV_OK")
    payloads = [b for b in d.buffers if b.title == "rpc_gsp_rm_control_v03_00"]
    assert [b.value.params for b in payloads] == [params, params]
    fb = [b for b in d.buffers if b.role == Role.PARAMS]
    assert fb and fb[0].note.startswith("152572 bytes after")  # FB_GET_INFO_V2 is 1028 bytes: the rest is kept
    assert decoders.decode(calls[1]).name == "GSP_INIT_DONE"  # the event between, on its own


def test_the_570_and_575_control_layouts_come_from_the_profile(profile):
    """rpc_gsp_rm_control_v03_00 is 24 bytes in 570 and 40 in 575; the same decoder reads both."""
    for version, offset in (("570.211.01", 24), ("575.64.05", 40)):
        p = load_profile(version)
        codec = codec_for(p)
        params = info_params(p, 2)
        payload = codec.payload(76, {"hClient": 7, "hObject": 8, "cmd": GET_INFO, "params": params})
        assert payload[offset:] == params
        decoders = DecoderSet(p, user=False)
        d = decoders.decode(list(decoders.calls(control_exchange(codec, Wire(codec), params, 5)))[0])
        assert (d.detail, d.handles["hClient"], d.known) == ("NV2080_CTRL_CMD_GPU_GET_INFO_V2", 0xC1D00001, True)
        assert [b.value.gpuInfoList[1].data for b in d.buffers if b.role == Role.PARAMS] == [0x200, 0x200]


def test_alloc_free_dup_and_common_events(codec, profile, decoders):
    wire = Wire(codec)
    alloc_params = context(profile).defs.build_values("NV0080_ALLOC_PARAMETERS", {"deviceId": 0, "hClientShare": 5})
    alloc = codec.payload(103, {"hClient": 5, "hParent": 5, "hObject": 0xCAF00001, "hClass": 0x80, "params": alloc_params})
    free = codec.payload(10, {"params": {"hRoot": 5, "hObjectParent": 0, "hObjectOld": 0xCAF00001}})
    dup = codec.payload(21, {"params": {"hClient": 6, "hParent": 0xCAF10001, "hObject": 0xCAF10002,
                                        "hClientSrc": 5, "hObjectSrc": 0xCAF00001}})
    lookup = profile.lookup
    events = {
        "GSP_INIT_DONE": {}, "GSP_RUN_CPU_SEQUENCER": {"bufferSizeDWord": 2, "cmdIndex": 1, "commandBuffer": [7, 9]},
        "RC_TRIGGERED": {"nv2080EngineType": 1, "chid": 4, "exceptType": 31},
        "OS_ERROR_LOG": {"exceptType": 13, "errString": b"Xid 13: Graphics Exception".ljust(256, b"\0")},
    }
    records = [wire.send(Phase.SEND, codec.build(103, alloc, 1)), wire.send(Phase.RECV, codec.build(103, alloc, 1, rpc_result=0)),
               wire.send(Phase.SEND, codec.build(10, free, 2)), wire.send(Phase.RECV, codec.build(10, free, 2, rpc_result=0x57)),
               wire.send(Phase.SEND, codec.build(21, dup, 3)), wire.send(Phase.RECV, codec.build(21, dup, 3, rpc_result=0))]
    records += [wire.send(Phase.RECV, codec.build(lookup("gsp_events", n), codec.payload(lookup("gsp_events", n), v), 0,
                                                  rpc_result=0)) for n, v in events.items()]
    decoded = [decoders.decode(c) for c in decoders.calls(records)]
    alloc_d, free_d, dup_d, *event_ds = decoded
    assert (alloc_d.detail, alloc_d.handles["hObject"], alloc_d.known) == ("NV01_DEVICE_0", 0xCAF00001, True)
    assert any(b.role == Role.ALLOC_PARAMS and b.value.hClientShare == 5 for b in alloc_d.buffers)
    assert (free_d.name, free_d.status_name, free_d.handles) == (
        "GSP_FREE", "NV_ERR_OBJECT_NOT_FOUND", {"hClient": 5, "hParent": 0, "hObject": 0xCAF00001})
    assert (dup_d.name, dup_d.status_name, dup_d.handles["hClientSrc"], dup_d.handles["hObjectSrc"]) == (
        "GSP_DUP_OBJECT", "NV_OK", 5, 0xCAF00001)
    assert [d.name for d in event_ds] == ["GSP_INIT_DONE", "GSP_RUN_CPU_SEQUENCER", "GSP_RC_TRIGGERED", "GSP_OS_ERROR_LOG"]
    assert all(d.known and not d.notes for d in event_ds)
    assert event_ds[1].args["commandBuffer"] == [7, 9]
    assert event_ds[3].args["errString"] == "Xid 13: Graphics Exception"


def test_bad_checksum_signature_and_length_are_notes_not_errors(codec, profile, decoders):
    message = codec.build(76, codec.payload(76, {"cmd": GET_INFO, "params": info_params(profile)}), 1)
    prefix = bytearray(codec.element_prefix(message, 0))
    prefix[32] ^= 0xFF
    bad_sig = message[:4] + b"XXXX" + message[8:]
    for payload, pre, expect in ((message, bytes(prefix), "checksum"), (bad_sig, None, "signature"),
                                 (message[:-10], None, "length")):
        bufs = (Buffer(Role.PAYLOAD, When.ONCE, payload),) + ((Buffer(Role.ARG, When.ONCE, pre),) if pre else ())
        d = decoders.decode(Record(Source.GSP, Phase.SEND, op=76, buffers=bufs))
        assert d.name == "GSP_RM_CONTROL" and any(expect in n for n in d.notes), d.notes


@settings(max_examples=150, deadline=None)
@given(function=st.sampled_from([10, 76, 103, 0x1001, 0x1003]), sequence=st.integers(0, 2**32 - 1),
       result=st.integers(0, 2**32 - 1), payload=st.binary(max_size=300))
def test_rpc_messages_round_trip(codec, function, sequence, result, payload):
    message = codec.build(function, payload, sequence, rpc_result=result)
    parsed = common(codec.message, message)
    assert (parsed.function, parsed.sequence, parsed.rpc_result, parsed.rpc_message_data) == (
        function, sequence, result, payload)
    assert parsed.length == len(message)
    element = codec.element.build({"authTagBuffer": bytes(16), "aadBuffer": bytes(16), "seqNum": 3, "rpc": parsed})
    common(codec.element, element, compiled=False)  # its checksum Rebuild is a function: not compilable by design
    assert checksum(element) == 0
