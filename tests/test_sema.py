"""Sema-service messages: the mirror matches rmtrace_sema.h (DWARF), messages build, decode and round-trip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmtrace.decoders import DecoderSet, render
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.sema import (
    HEADER_SIZE,
    NO_RANK,
    SEMA_KINDS,
    SEMA_MAGIC,
    SEMA_VERSION,
    STRUCTS,
    Counter,
    DrainReason,
    ResetReason,
    SemaMessage,
    SemaOp,
    build_message,
    message_record,
)
from rmtrace.kmod_shim import sema_header_path

from rmtrace.abi_check import compare, compare_constants
from rmtrace.dwarf import compile_probe, compile_probe_constants, compile_probe_enums
from rmtrace.record import Phase, Source
from tests.declarative import common
from tests.toolchain import needs_gcc

PROBE = '#include "rmtrace_sema.h"\n' + "".join(f"struct {name} probe_{name};\n" for name in STRUCTS) + \
    "enum rmt_sema_op e1; enum rmt_sema_reset_reason e2; enum rmt_sema_drain_reason e3; enum rmt_sema_counter e4;\n"

ENUMS = [("rmt_sema_op", "RMT_SEMA_", SemaOp), ("rmt_sema_reset_reason", "RMT_SEMA_RESET_", ResetReason),
         ("rmt_sema_drain_reason", "RMT_SEMA_DRAIN_", DrainReason), ("rmt_sema_counter", "RMT_SEMA_CTR_", Counter)]


@pytest.fixture(scope="module")
def decoders():
    return DecoderSet(load_profile("580.142"), user=False)


@needs_gcc
def test_mirror_matches_header():
    layouts = compile_probe(PROBE, list(STRUCTS), include_dirs=[sema_header_path().parent])
    for name, mirror in STRUCTS.items():
        assert compare(layouts[name], mirror) == [], name


@needs_gcc
def test_enums_and_constants_match_header():
    enums = compile_probe_enums(PROBE, [e[0] for e in ENUMS], include_dirs=[sema_header_path().parent])
    for c_name, prefix, py_enum in ENUMS:
        assert {k[len(prefix):]: v for k, v in enums[c_name].items()} == {m.name: int(m) for m in py_enum}, c_name
    mirror = {"RMT_SEMA_MAGIC": SEMA_MAGIC, "RMT_SEMA_VERSION": SEMA_VERSION, "RMT_SEMA_NO_RANK": NO_RANK}
    header = compile_probe_constants("rmtrace_sema.h", mirror, [sema_header_path().parent])
    assert compare_constants(header, mirror) == []
    assert set(SEMA_KINDS) == set(SemaOp)


VALUES = {
    "rmt_sema_channel": {"client": 0xC1D00001, "channel": 0xCAF000D4, "ring_va": 0x7F0000000000,
                         "userd_va": 0x7F0000200000, "rank": 2, "rc": 0},
    "rmt_sema_publish": {"channel": 0xCAF000D4, "rank": 2, "va": 0x7F0000000000, "size": 0x2000, "pub_calls": 2790,
                         "rc": 0, "reserved": 0},
    "rmt_sema_hint": {"channel": 0xCAF000D4, "rank": 0xFFFFFFFF, "value": 17, "rc": -22, "reserved": 0},
    "rmt_sema_sem": {"channel": 0xCAF000D4, "rank": 2, "sema_va": 0x7F0000400000, "value": 17, "counter": 216,
                     "rc": 0, "reserved": 0},
    "rmt_sema_latch": {"rank": 2, "channel": 0xCAF000D4, "generation": 1, "armed": 0},
    "rmt_sema_drain": {"rank": 2, "channel": 0xCAF000D4, "held": 2, "reason": 1, "held_ns": 0},
    "rmt_sema_session": {"old_session": 1, "new_session": 2, "client": 0xC1D00002, "reason": 1,
                         "channels_dropped": 0, "latches_rearmed": 0},
    "rmt_sema_counters": {"reserved": 0, "value": [2790, 216, 0, 2, 40, 2, 12, 13, 1, 1]},
}


@pytest.mark.parametrize("op", list(SemaOp))
def test_every_message_builds_decodes_and_round_trips(decoders, op):
    kind = SEMA_KINDS[op]
    data = build_message(op, VALUES[kind.struct], vgpu=1, session=2)
    message = common(SemaMessage, data)
    assert (message.op, message.vgpu, message.session, message.length) == (op, 1, 2, len(data))
    body = common(kind.body, message.body)
    assert {k: v for k, v in body.items() if not k.startswith("_") and k != "count"} == VALUES[kind.struct]
    rec = message_record(op, VALUES[kind.struct], vgpu=1, session=2, time_ns=5, pid=1447, tid=1447)
    assert rec.phase == kind.phase and rec.source == Source.SEMA
    d = decoders.decode(rec)
    assert d.name == "SEMA_" + op.name and d.known and not d.notes
    assert d.args["vgpu"] == 1 and d.args["session"] == 2


def test_the_second_client_wedge_reads_plainly(decoders):
    hint = decoders.decode(message_record(SemaOp.COMPLETION_HINT, VALUES["rmt_sema_hint"]))
    assert (hint.status, hint.status_name, hint.ok) == (-22, "-22 EINVAL", False)
    assert hint.handles == {"hChannel": 0xCAF000D4}
    counters = decoders.decode(message_record(SemaOp.COUNTERS, VALUES["rmt_sema_counters"]))
    assert {k: counters.args[k] for k in ("pub_calls", "gr_rel", "faked", "drain_held")} == {
        "pub_calls": 2790, "gr_rel": 216, "faked": 0, "drain_held": 2}
    calls = list(decoders.calls([message_record(SemaOp.COMPLETION_HINT, VALUES["rmt_sema_hint"])]))
    assert render.line(decoders.decode(calls[0]), calls[0], 0).endswith(
        "→ SEMA_COMPLETION_HINT(vgpu=0, session=0, channel=0xcaf000d4, rank=0xffffffff, value=17, rc=-22) = -22 EINVAL")


def test_malformed_messages_stay_raw_with_a_note(decoders):
    good = message_record(SemaOp.RELEASE, VALUES["rmt_sema_sem"])
    from dataclasses import replace
    for data in (good.buffers[0].data[:30], b"JUNK" + good.buffers[0].data[4:]):
        d = decoders.decode(replace(good, buffers=(replace(good.buffers[0], data=data),)))
        assert d.name == "SEMA_RELEASE" and not d.known and "not a SEMA_RELEASE message" in d.notes[0]
    wrong_phase = decoders.decode(replace(good, phase=Phase.SEND))
    assert any("travels as RECV" in n for n in wrong_phase.notes)
    unknown = decoders.decode(replace(good, op=99))
    assert unknown.name == "SEMA_OP_0x63" and not unknown.known


u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
s32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(list(SemaOp)), vgpu=u32, session=u64, data=st.data())
def test_messages_round_trip_for_any_values(op, vgpu, session, data):
    kind = SEMA_KINDS[op]
    values = {}
    for sub in kind.body.subcons:
        if sub.name == "count":
            continue
        if op == SemaOp.COUNTERS and sub.name == "value":
            values["value"] = data.draw(st.lists(u64, max_size=20))
        else:
            values[sub.name] = data.draw(s32 if sub.name == "rc" else u64 if sub.sizeof() == 8 else u32)
    raw = build_message(op, values, vgpu=vgpu, session=session)
    message = common(SemaMessage, raw)
    body = common(kind.body, message.body)
    assert all(body[k] == v for k, v in values.items())
    assert len(raw) == HEADER_SIZE + len(message.body)
