"""The construct mirror of the record format matches the C header, field by field (DWARF)."""

import shutil

import pytest
from rmtrace.kmod_shim import record_header_path

from rmtrace.abi_check import compare
from rmtrace.dwarf import compile_probe, compile_probe_enums
from rmtrace.record import BufferHeader, RecordHeader, SysMmap

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to read the header's DWARF")

PROBE = """
#include "rmtrace_record.h"
struct rmt_record probe_record;
struct rmt_buffer probe_buffer;
struct rmt_sys_mmap probe_mmap;
enum rmt_source e1; enum rmt_phase e2; enum rmt_record_flag e3; enum rmt_sys_op e4;
enum rmt_mark_op e5; enum rmt_buf_role e6; enum rmt_buf_when e7; enum rmt_buf_flag e8;
"""


@pytest.fixture(scope="module")
def layouts():
    return compile_probe(PROBE, ["rmt_record", "rmt_buffer", "rmt_sys_mmap"],
                         include_dirs=[record_header_path().parent])


@pytest.mark.parametrize("name, mirror", [
    ("rmt_record", RecordHeader), ("rmt_buffer", BufferHeader), ("rmt_sys_mmap", SysMmap),
])
def test_mirror_matches_header(layouts, name, mirror):
    assert compare(layouts[name], mirror) == []


def test_compare_catches_a_drift(layouts):
    from construct import Int32ul, Struct
    drifted = Struct(*[sc for sc in BufferHeader.subcons if sc.name != "slot"], "slot" / Int32ul, "extra" / Int32ul)
    problems = compare(layouts["rmt_buffer"], drifted)
    assert any("size" in p for p in problems) and any("extra" in p for p in problems)


ENUMS = [
    ("rmt_source", "RMT_SRC_", "Source"), ("rmt_phase", "RMT_PH_", "Phase"), ("rmt_record_flag", "RMT_RF_", "RecordFlag"),
    ("rmt_sys_op", "RMT_SYS_", "SysOp"), ("rmt_mark_op", "RMT_MARK_", "MarkOp"), ("rmt_buf_role", "RMT_BUF_", "Role"),
    ("rmt_buf_when", "RMT_WHEN_", "When"), ("rmt_buf_flag", "RMT_BF_", "BufferFlag"),
]


def test_enums_match_header():
    from rmtrace import record
    enums = compile_probe_enums(PROBE, [e[0] for e in ENUMS], include_dirs=[record_header_path().parent])
    for c_name, prefix, py_name in ENUMS:
        c_values = {k[len(prefix):]: v for k, v in enums[c_name].items()}
        py_values = {m.name: int(m.value) for m in getattr(record, py_name)}
        assert c_values == py_values, c_name


def test_magic_and_version_match_header():
    from rmtrace import record
    text = record_header_path().read_text()
    assert f"#define RMT_RECORD_MAGIC   {record.RECORD_MAGIC:#010x}u" in text
    assert f"#define RMT_RECORD_VERSION {record.RECORD_VERSION}" in text
