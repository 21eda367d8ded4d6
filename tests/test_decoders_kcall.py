"""The nvUvmInterface* calls rmtrace.ko records (UVM op KCALL_BASE + n), decoded by name.

The records are shaped as rmtrace_probe.c writes them (tests/kernel records
real ones from the stand-in driver): an ARG buffer of the argument registers
with kernel addresses zeroed, NESTED slot 0 the GPU's UUID, the return value
in the EXIT.
"""

from __future__ import annotations

import struct

import pytest
from rmtrace.decoders import DecoderSet, render
from rmtrace.decoders.profiles import load_profile

from rmtrace.capture.kmod import KCALL_BASE, KCALLS, KCall
from rmtrace.record import Buffer, Phase, Record, Role, Source, When

UUID = bytes(range(0xA0, 0xB0))
NV_ERR_INVALID_ARGUMENT = 0x1F


@pytest.fixture(scope="module")
def decoders():
    return DecoderSet(load_profile("580.142"), user=False)


def kcall(call: KCall, regs: tuple[int, ...], ret: int | None, *, uuid: bool = False, t: int = 1000) -> list[Record]:
    buffers = [Buffer(Role.ARG, When.BEFORE, struct.pack(f"<{len(regs)}Q", *regs))]
    if uuid:
        buffers.append(Buffer(Role.NESTED, When.BEFORE, UUID))
    enter = Record(Source.UVM, Phase.ENTER, op=KCALL_BASE + call, time_ns=t, pid=7, tid=7, call_id=call,
                   buffers=tuple(buffers))
    if ret is None:
        return [enter]
    return [enter, Record(Source.UVM, Phase.EXIT, op=KCALL_BASE + call, time_ns=t + 21_000, pid=7, tid=7,
                          call_id=call, ret=ret)]


def decoded(decoders, records: list[Record]):
    (call,) = decoders.calls(records)
    return decoders.decode(call), call


def shown(decoders, records: list[Record], end_ns: int | None = None) -> str:
    d, call = decoded(decoders, records)
    return render.line(d, call, 0, end_ns)


def test_every_kernel_call_has_its_symbol_as_its_name(decoders):
    for number, call in KCALLS.items():
        assert decoders.label(kcall(number, (0,) * len(call.args), 0)[0]).name == call.symbol


def test_register_gpu_shows_the_uuid_as_nvidia_smi_writes_it_and_its_nv_status(decoders):
    line = shown(decoders, kcall(KCall.REGISTER_GPU, (0, 0), 0, uuid=True))
    assert line == '[7/7] +0.001ms nvUvmInterfaceRegisterGpu(uuid="GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf") = NV_OK <21µs>'
    failed, _ = decoded(decoders, kcall(KCall.REGISTER_GPU, (0, 0), NV_ERR_INVALID_ARGUMENT))
    assert (failed.status_name, failed.ok) == ("NV_ERR_INVALID_ARGUMENT", False)


def test_retain_channel_shows_its_rm_handles_and_never_a_kernel_address(decoders):
    regs = (0xFFFF888001234000, 0xC1D00001, 0xCAF000D4, 0xFFFF888005678000, 0xFFFF888009ABC000)
    d, _ = decoded(decoders, kcall(KCall.RETAIN_CHANNEL, regs, 0))
    assert d.args == {"hClient": 0xC1D00001, "hChannel": 0xCAF000D4} and d.handles == d.args
    assert "ffff8880" not in render.summary(d).lower()


def test_a_void_call_that_returned_says_void_and_one_that_did_not_is_in_flight(decoders):
    line = shown(decoders, kcall(KCall.UNREGISTER_GPU, (0,), 0, uuid=True))
    assert line.endswith(') = void <21µs>'), line
    assert decoded(decoders, kcall(KCall.UNREGISTER_GPU, (0,), 0))[0].ok is True
    blocked = shown(decoders, kcall(KCall.UNREGISTER_GPU, (0,), None, uuid=True), end_ns=3_000_000_000)
    assert "nvUvmInterfaceUnregisterGpu(" in blocked and "= ? <in flight since +0.001ms" in blocked, blocked
