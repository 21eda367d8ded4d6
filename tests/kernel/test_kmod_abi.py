"""The construct mirrors of the kernel shim's devices match their C headers (DWARF), as the record's do.

rmtrace_kmod.h (/dev/rmtrace's ioctls), rmtrace_replay.h (/dev/rmtrace-replay's
control records) and sample_target/rmtrace_sample.h (the sample target's TARGET
body) are each mirrored once, in rmtrace/capture/kmod.py and
replayer/targets/kmod.py.  Every struct is compared field by field (names,
order, offsets, sizes, signedness and kind, arrays and their elements), a
nested struct is the mirror of its own C struct, and every enum and constant
the Python side uses is the compiler's value.  Needs only gcc: no kernel.
"""

from __future__ import annotations

import pytest
from construct import Array, Int32ul, Struct
from rmtrace.kmod_shim import record_header_path
from rmtrace.replayer.messages import Kind
from rmtrace.replayer.targets import kmod as target

from rmtrace.abi_check import compare, compare_constants
from rmtrace.capture import kmod as capture
from rmtrace.dwarf import compile_probe, compile_probe_constants, compile_probe_enums
from rmtrace.semantics import Category
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

SHIM = record_header_path().parent
INCLUDES = [SHIM, SHIM / "sample_target"]
HEADERS = ("rmtrace_kmod.h", "rmtrace_replay.h", "rmtrace_sample.h")
MIRRORS = {**capture.MIRRORS, **target.MIRRORS}
ENUMS = {
    "rmt_kcall": ("RMT_KCALL_", capture.KCall), "rmt_probe_kind": ("RMT_PROBE_", capture.ProbeKind),
    "rmt_probe_flag": ("RMT_PROBE_", capture.ProbeFlag), "rmt_value_kind": ("RMT_VAL_", capture.ValueKind),
    "rmt_space": ("RMT_SPACE_", capture.Space), "rmt_capture_when": ("RMT_CAP_", capture.CaptureWhen),
    "rmt_replay_kind": ("RMT_KIND_", Kind), "rmt_replay_category": ("RMT_CAT_", Category),
}
PROBE = "".join(f'#include "{h}"\n' for h in HEADERS) + "".join(f"struct {n} probe_{n};\n" for n in MIRRORS) \
    + "".join(f"enum {n} probe_{n};\n" for n in [*ENUMS, "rmt_replay_op", "rmt_replay_clock", "rmt_replay_status",
                                                 "rmt_replay_answers", "rmt_replay_advance_flag"])


@pytest.fixture(scope="module")
def layouts():
    return compile_probe(PROBE, list(MIRRORS), include_dirs=INCLUDES)


@pytest.fixture(scope="module")
def enums():
    names = [*ENUMS, "rmt_replay_op", "rmt_replay_clock", "rmt_replay_status", "rmt_replay_answers",
             "rmt_replay_advance_flag"]
    return compile_probe_enums(PROBE, names, include_dirs=INCLUDES)


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_mirror_matches_header(layouts, name):
    assert compare(layouts[name], MIRRORS[name]) == []


def _nested(sub):
    """The construct Struct a field holds (itself, or an Array's element), or None."""
    node = sub.subcon
    if isinstance(node, Array):
        node = node.subcon
    return node if isinstance(node, Struct) else None


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_each_nested_struct_is_the_mirror_of_its_c_struct(layouts, name):
    by_definition = {id(definition): c_name for c_name, definition in MIRRORS.items()}
    for c_field, sub in zip(layouts[name].fields, MIRRORS[name].subcons):
        c_type = c_field.type if c_field.kind == "struct" else c_field.elem if c_field.elem_kind == "struct" else None
        nested = _nested(sub)
        assert (by_definition.get(id(nested)) if nested is not None else None) == c_type, f"{name}.{c_field.name}"


def test_a_nested_mirror_that_drifted_fails(layouts):
    drifted = Struct(*[sc if sc.name != "off" else "off" / Array(4, Int32ul) for sc in capture.Value.subcons])
    assert compare(layouts["rmt_value"], drifted) == ["rmt_value.off: C elements are int, mirror elements are uint"]
    shorter = Struct(*[sc if sc.name != "cap" else "cap" / Array(5, capture.Capture) for sc in capture.ProbeSpec.subcons])
    assert any("rmt_probe_spec.cap: C offset 120 size 576" in p for p in compare(layouts["rmt_probe_spec"], shorter))


@pytest.mark.parametrize("c_name", sorted(ENUMS))
def test_enums_match_header(enums, c_name):
    prefix, py_enum = ENUMS[c_name]
    assert {k[len(prefix):]: v for k, v in enums[c_name].items()} == {m.name: int(m.value) for m in py_enum}


def test_replay_enums_match_header(enums):
    def named(c_name: str, prefix: str) -> dict[str, int]:
        return {k[len(prefix):]: v for k, v in enums[c_name].items()}

    assert named("rmt_replay_op", "RMT_REPLAY_") == target.OP
    assert named("rmt_replay_clock", "RMT_CLOCK_") == {k.upper(): v for k, v in target.CLOCKS.items()}
    answers = named("rmt_replay_answers", "RMT_ANSWERS_")
    assert answers == {name.upper(): 1 << bit for bit, name in enumerate(target.ANSWERS)}
    assert named("rmt_replay_advance_flag", "RMT_ADVANCE_") == {"UNTIL_ANSWER": target.UNTIL_ANSWER}
    statuses = {v: k for k, v in named("rmt_replay_status", "RMT_ST_").items() if k != "COUNT"}
    assert [statuses[i] for i in range(len(target.STATUSES))] == ["OK", "ILLEGAL_ACTION", "DUPLICATE", "BAD_HANDLE",
                                                                  "NOT_FOUND", "BAD_CLIENT"]
    assert named("rmt_replay_status", "RMT_ST_")["COUNT"] == target.STATUS_COUNT


def test_kcall_numbers_are_no_uvm_ioctl():
    from rmtrace.decoders.profiles import available_profiles, load_profile
    for version in available_profiles():
        assert max(load_profile(version).uvm) < capture.KCALL_BASE, version


def test_constants_match_headers():
    kmod = {"RMT_KMOD_VERSION": capture.KMOD_VERSION, "RMT_KCALL_BASE": capture.KCALL_BASE,
            "RMT_PROBE_NAME_MAX": capture.PROBE_NAME_MAX, "RMT_PROBE_MAX_CAPS": capture.PROBE_MAX_CAPS,
            "RMT_PROBE_MAX_DEREF": capture.PROBE_MAX_DEREF, "RMT_PROBE_MAX_TABLE": capture.PROBE_MAX_TABLE,
            "RMT_PROBES_MAX": capture.PROBES_MAX, "RMT_IOC_MAGIC": capture.IOC_MAGIC,
            "RMT_IOC_STATS": capture.IOC_STATS, "RMT_IOC_ADD_PROBE": capture.IOC_ADD_PROBE,
            "RMT_IOC_PROBE_INFO": capture.IOC_PROBE_INFO}
    replay = {"RMT_REPLAY_MAGIC": target.MAGIC, "RMT_REPLAY_VERSION": target.VERSION,
              "RMT_REPLAY_TEXT_MAX": target.TEXT_MAX, "RMT_REPLAY_STATUS_AT": target.STATUS_AT,
              "RMT_REPLAY_ERROR_MAX": target.ERROR_MAX, "RMT_IOC_REPLAY_ERROR": target.IOC_REPLAY_ERROR}
    sample = {"RMT_SAMPLE_GSP_TEMPLATE": target.SAMPLE_GSP_TEMPLATE}
    for header, mirror in (("rmtrace_kmod.h", kmod), ("rmtrace_replay.h", replay), ("rmtrace_sample.h", sample)):
        assert compare_constants(compile_probe_constants(header, mirror, INCLUDES), mirror) == [], header
