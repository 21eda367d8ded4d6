"""The construct mirror of the record format matches the C header, field by field (DWARF)."""

import importlib.util
import sys

import pytest
from construct import Int32ul, Struct
from rmtrace.kmod_shim import record_header_path

from rmtrace import record
from rmtrace.abi_check import compare, compare_constants
from rmtrace.dwarf import compile_probe, compile_probe_constants, compile_probe_enums
from rmtrace.record import BufferHeader, RecordHeader, SysMmap
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

PROBE = """
#include "rmtrace_record.h"
struct rmt_record probe_record;
struct rmt_buffer probe_buffer;
struct rmt_sys_mmap probe_mmap;
enum rmt_source e1; enum rmt_phase e2; enum rmt_record_flag e3; enum rmt_sys_op e4;
enum rmt_mark_op e5; enum rmt_buf_role e6; enum rmt_buf_when e7; enum rmt_buf_flag e8;
"""
MIRRORS = {"rmt_record": RecordHeader, "rmt_buffer": BufferHeader, "rmt_sys_mmap": SysMmap}


@pytest.fixture(scope="module")
def layouts():
    return compile_probe(PROBE, list(MIRRORS), include_dirs=[record_header_path().parent])


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_mirror_matches_header(layouts, name):
    assert compare(layouts[name], MIRRORS[name]) == []


def test_compare_catches_a_drift(layouts):
    drifted = Struct(*[sc for sc in BufferHeader.subcons if sc.name != "slot"], "slot" / Int32ul, "extra" / Int32ul)
    problems = compare(layouts["rmt_buffer"], drifted)
    assert any("size" in p for p in problems) and any("extra" in p for p in problems)


def _mutated_mirror(tmp_path, old: str, new: str):
    """rmtrace/record.py copied with one edit, imported as a module of its own."""
    source = record.__file__
    text = open(source).read()
    assert text.count(old) == 1, old
    copy = tmp_path / "record_mutated.py"
    copy.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location("record_mutated", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules["record_mutated"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["record_mutated"]
    return module


@pytest.mark.parametrize("old, new, problem", [
    ('"fd" / Int32sl', '"fd" / Int32ul', "rmt_record.fd: C int32_t is int, mirror is uint"),
    ('"pid" / Int32ul', '"pid" / Int32sl', "rmt_record.pid: C uint32_t is uint, mirror is int"),
    ('"ret" / Int64sl', '"ret" / Int64ul', "rmt_record.ret: C int64_t is int, mirror is uint"),
])
def test_a_mirror_with_the_wrong_signedness_fails(layouts, tmp_path, old, new, problem):
    mutated = _mutated_mirror(tmp_path, old, new)
    assert compare(layouts["rmt_record"], mutated.RecordHeader) == [problem]


def test_a_mirror_with_another_magic_fails(tmp_path):
    mutated = _mutated_mirror(tmp_path, "RECORD_MAGIC = 0x52544D52", "RECORD_MAGIC = 0x52544D53")
    header = compile_probe_constants("rmtrace_record.h", ["RMT_RECORD_MAGIC"], [record_header_path().parent])
    assert compare_constants(header, {"RMT_RECORD_MAGIC": mutated.RECORD_MAGIC}) == [
        "RMT_RECORD_MAGIC: header 0x52544d52, mirror 0x52544d53"]


ENUMS = [
    ("rmt_source", "RMT_SRC_", "Source"), ("rmt_phase", "RMT_PH_", "Phase"), ("rmt_record_flag", "RMT_RF_", "RecordFlag"),
    ("rmt_sys_op", "RMT_SYS_", "SysOp"), ("rmt_mark_op", "RMT_MARK_", "MarkOp"), ("rmt_buf_role", "RMT_BUF_", "Role"),
    ("rmt_buf_when", "RMT_WHEN_", "When"), ("rmt_buf_flag", "RMT_BF_", "BufferFlag"),
]


def test_enums_match_header():
    enums = compile_probe_enums(PROBE, [e[0] for e in ENUMS], include_dirs=[record_header_path().parent])
    for c_name, prefix, py_name in ENUMS:
        c_values = {k[len(prefix):]: v for k, v in enums[c_name].items()}
        py_values = {m.name: int(m.value) for m in getattr(record, py_name)}
        assert c_values == py_values, c_name


def test_magic_version_and_alignment_match_header():
    mirror = {"RMT_RECORD_MAGIC": record.RECORD_MAGIC, "RMT_RECORD_VERSION": record.RECORD_VERSION,
              "RMT_ALIGN": record.ALIGN}
    header = compile_probe_constants("rmtrace_record.h", mirror, [record_header_path().parent])
    assert compare_constants(header, mirror) == []
