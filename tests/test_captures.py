"""The committed H200 captures (captures/*.trace) are whole: every RM and UVM call has its
enter and its exit, and each carries the buffers the driver read and wrote, before and after."""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import pytest
from rmtrace.decoders.profiles import load_profile

from rmtrace.capture import ctab
from rmtrace.record import MarkOp, Phase, Role, Source, SysOp, When
from rmtrace.trace import TraceReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
TRACES = sorted(CAPTURES.glob("*.trace"))
RM_CONTROL, RM_ALLOC, CARD_INFO = 0x2A, 0x2B, 200
FINN_SERIALIZED = 0x4
NVOS_ALLOC_PARAMS = {32: (16, 24), 48: (16, 32)}  # arg size -> (pAllocParms, paramsSize) offsets


@pytest.fixture(scope="module")
def profile():
    return load_profile("580.142")


def load(path: Path):
    with TraceReader(path) as reader:
        assert reader.recovery.complete
        return reader.meta, list(reader)


def pairs(records):
    exits = {(r.pid, r.call_id): r for r in records if r.phase == Phase.EXIT}
    return [(r, exits.get((r.pid, r.call_id))) for r in records if r.phase == Phase.ENTER]


def u32(data: bytes, offset: int) -> int:
    return struct.unpack_from("<I", data, offset)[0]


def u64(data: bytes, offset: int) -> int:
    return struct.unpack_from("<Q", data, offset)[0]


def both(enter, exit_, role, size, slot=None):
    """The buffer is in the enter (read before) and the exit (read after), whole."""
    before, after = enter.buffer(role, When.BEFORE, slot), exit_.buffer(role, When.AFTER, slot)
    assert before is not None and after is not None, (enter.op, role, slot)
    assert len(before.data) == len(after.data) == size == before.orig_len, (enter.op, role, size)


def test_there_are_captures():
    assert {p.stem for p in TRACES} >= {"nvidia-smi-q", "torch-one-kernel", "cuda-streams",
                                        "cuda-streams-3x-sequential", "cuda-streams-2-together"}


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_capture_is_whole(path, profile):
    meta, records = load(path)
    assert meta["driver_version"] == "580.159.04" and meta["backend"] == "preload"
    assert meta["profile"] == "580.142" and "H200" in meta["gpus"][0]["name"]
    stop, = [r for r in records if r.source == Source.MARK and r.op == MarkOp.STOP]
    assert not [r for r in records if r.source == Source.MARK and r.op != MarkOp.STOP]  # nothing in flight or lost
    assert b'"reason": "exited"' in stop.buffer(Role.TEXT).data and b'"exit_status": 0' in stop.buffer(Role.TEXT).data
    assert [r.seq for r in records] == list(range(len(records)))
    assert all(b.flags == 0 for r in records for b in r.buffers)  # nothing cut short or unreadable
    calls = pairs(records)
    assert all(x is not None for _, x in calls)
    assert len(calls) * 2 == sum(r.phase in (Phase.ENTER, Phase.EXIT) for r in records)
    ioctls = [(e, x) for e, x in calls if e.source in (Source.RM, Source.UVM)]
    assert ioctls
    for enter, exit_ in ioctls:
        if enter.source == Source.UVM:
            command = profile.uvm.get(enter.op)
            if command is not None and command.size:
                both(enter, exit_, Role.ARG, command.size)
            else:  # a command without params (UVM_DEINITIALIZE): the op alone
                assert enter.buffer(Role.ARG) is None, hex(enter.op)
            continue
        arg = enter.buffer(Role.ARG, When.BEFORE).data
        escape = profile.escapes[enter.op]
        if enter.op == CARD_INFO:
            assert len(arg) % escape.size == 0
        elif enter.op != RM_ALLOC:
            assert len(arg) == escape.size, escape.name
        both(enter, exit_, Role.ARG, len(arg))
        if enter.op == RM_CONTROL:
            size, cmd = u32(arg, 24), u32(arg, 8)
            if size:
                both(enter, exit_, Role.PARAMS, size)
            if u32(arg, 12) & FINN_SERIALIZED or not size:
                continue
            params = enter.buffer(Role.PARAMS, When.BEFORE).data
            for slot, field in enumerate(profile.embedded_pointers(cmd)):
                count = field.fixed_count or int.from_bytes(
                    params[field.count_offset:field.count_offset + field.count_size], "little")
                if u64(params, field.offset) and count:
                    both(enter, exit_, Role.NESTED, count * field.elem_size, slot)
        elif enter.op == RM_ALLOC:
            # RM reads as many alloc params bytes as the class's params struct has, whatever paramsSize says
            ptr_off, size_off = NVOS_ALLOC_PARAMS[len(arg)]
            size = class_sizes(profile).get(u32(arg, 12), u32(arg, size_off))
            if u64(arg, ptr_off) and size:
                both(enter, exit_, Role.ALLOC_PARAMS, size)


@functools.cache
def class_sizes(profile) -> dict[int, int]:
    """Bytes of alloc params RM copies per class: what the shim's capture table says."""
    return dict(ctab.table_from_profile(profile).classes)


def cuda_spans(records):
    """(first, last) time of RM/UVM traffic of each process that ran cuda_streams."""
    spans = {}
    for r in records:
        if r.source in (Source.RM, Source.UVM):
            first, last = spans.get(r.pid, (r.time_ns, r.time_ns))
            spans[r.pid] = (min(first, r.time_ns), max(last, r.time_ns))
    return sorted(spans.values())


def test_three_in_a_row_are_three_processes_one_after_another():
    _meta, records = load(CAPTURES / "cuda-streams-3x-sequential.trace")
    spans = cuda_spans(records)
    assert len(spans) == 3 and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    execs = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXEC and r.phase == Phase.ENTER]
    assert len(execs) == 3  # sh forked and exec'd each one


def test_two_started_together_overlap():
    _meta, records = load(CAPTURES / "cuda-streams-2-together.trace")
    (a0, a1), (b0, b1) = cuda_spans(records)
    assert b0 < a1  # the second began before the first was done
