"""construct definitions built from profile layouts: every layout of every shipped profile round-trips."""

from __future__ import annotations

import struct

import pytest
from construct import Array, FormatField
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rmtrace.decoders.context import context
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.structs import Bitfields, ScalarArray, StructArray

from tests.declarative import common

PROFILES = available_profiles()


@st.composite
def layout_bytes(draw):
    """A shipped profile's version, one of its layouts, and bytes of exactly that layout's size."""
    version = draw(st.sampled_from(PROFILES))
    profile = load_profile(version)
    name = draw(st.sampled_from(sorted(profile.layouts)))
    size = profile.layouts[name].size
    return version, name, draw(st.binary(min_size=size, max_size=size))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(layout_bytes())
def test_every_layout_round_trips(case):
    version, name, data = case
    definition = context(load_profile(version)).defs.struct(name, flex=False)
    common(definition, data)


def test_every_layout_of_one_profile_round_trips_on_its_own_zero_and_ff_bytes():
    """Deterministic sweep: all 2800-odd layouts of 580.142 (hypothesis above samples across profiles)."""
    profile = load_profile("580.142")
    defs = context(profile).defs
    for name, layout in profile.layouts.items():
        for fill in (0x00, 0xFF):
            data = bytes([fill]) * layout.size
            definition = defs.struct(name, flex=False)
            assert definition.build(definition.parse(data)) == data, name


@pytest.mark.parametrize("code, size", [("B", 1), ("H", 2), ("L", 4), ("Q", 8), ("l", 4), ("q", 8)])
def test_scalar_array_equals_construct_array(code, size):
    data = bytes(range(256))[: 7 * size]
    fast, reference = ScalarArray(7, code), Array(7, FormatField("<", code))
    assert common(fast, data) == reference.parse(data)
    assert fast.build(reference.parse(data)) == reference.build(reference.parse(data))


def test_struct_array_equals_construct_array_and_shares_identical_elements():
    profile = load_profile("580.142")
    defs = context(profile).defs
    elem = defs.struct("UvmGpuMappingAttributes")
    data = bytes(range(36)) + bytes(36 * 3) + bytes(range(100, 136))
    fast, reference = StructArray(5, elem), Array(5, elem)
    parsed = common(fast, data)
    assert parsed == reference.parse(data) and fast.build(parsed) == reference.build(parsed)
    assert parsed[1] is parsed[2] is parsed[3] and parsed[0] is not parsed[4]
    built = defs.build_values("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", {"perGpuAttributes": [
        {"gpuMappingType": 1}, {"gpuMappingType": 2}]})
    value, _ = defs.parse("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", built)
    assert [a.gpuMappingType for a in value.perGpuAttributes[:3]] == [1, 2, 0]  # shared zeros were copied, not edited


def test_flexible_member_is_sized_by_its_count_and_rebuilt():
    profile = load_profile("580.142")
    defs = context(profile).defs
    name = profile.gsp_payloads[76]  # rpc_gsp_rm_control
    layout = profile.layouts[name]
    head = bytes(layout.size)
    size_at = layout.field("paramsSize").offset
    data = head[:size_at] + struct.pack("<I", 5) + head[size_at + 4:] + b"ABCDE"
    value = common(defs.struct(name), data)
    assert value.params == b"ABCDE" and value.paramsSize == 5
    value.params = b"xy"
    rebuilt = defs.struct(name).build(value)
    assert struct.unpack_from("<I", rebuilt, size_at)[0] == 2 and rebuilt.endswith(b"xy")


def test_bitfields_padding_unions_keep_every_byte():
    profile = load_profile("580.142")
    defs = context(profile).defs
    pte = common(defs.struct("pte_desc"), struct.pack("<II", 0xABCD0007 | 0x1234 << 2 & 0xFFFC, 0xFFFFFFFF))
    unit = pte["_bits0"]
    assert (unit.idr, unit.reserved1, unit.length, unit._rest) == (3, 0x1234 & 0x3FFF | 1, 0xABCD, 0)
    partial = Bitfields(4, (("a", 0, 3), ("b", 3, 5)))
    value = common(partial, struct.pack("<I", 0xDDEEFFAD))
    assert (value.a, value.b, value._rest) == (0b101, 0b10101, 0xDDEEFF00)
    kmb = defs.struct("CC_KMB")  # an anonymous union of two crypto bundles
    raw = bytes(range(124))
    parsed = common(kmb, raw)
    assert parsed.anon1.hmacBundle.nonce[0] == parsed.anon1.decryptBundle.iv[0] == 0x3B3A3938
    header = defs.struct("rpc_message_header_v03_00", flex=False)
    parsed = common(header, bytes(range(32)))
    assert parsed.u.spare == parsed.u.cpuRmGfid == 0x1F1E1D1C
    padded = defs.struct("NV0080_ALLOC_PARAMETERS")  # 4 bytes of padding before vaSpaceSize
    junk = bytes(range(56))
    assert padded.build(padded.parse(junk)) == junk  # uninitialised padding survives
