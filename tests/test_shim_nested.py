"""The shim follows every pointer the real profile lists, as the profile says, for every control.

A Python program (ctypes, under the recorder and the real shim, against tests/c/fakedrv.c) makes
each control of the recording profile's pointer table once with every pointer set, to a buffer of
its own whose count is at the field's count offset in the field's count size (2, 4 and 8 bytes in
580.142), and once more with the first pointer NULL and the second's count 0; the trace must hold
exactly the NESTED buffers the profile implies, before and after, with their slots.  The shim
compiles the table's pointers into its own rules when a process starts (kmod_shim/shim_ioctl.c):
this is what ties those rules to the table.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rmtrace.decoders.profiles.pointers import pointer_table

from rmtrace.record import Phase, Role, Source, When
from rmtrace.trace import TraceReader
from tests.capture_support import build_programs, fakedrv_environment, make_device_dir, recording_profile
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

SUPPORT = Path(__file__).resolve().parent / "capture_support.py"
RM_CONTROL = 0x2A

PROGRAM = r"""
import ctypes, json, os, sys
cases = json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
fd = os.open(os.path.join(sys.argv[1], "nvidiactl"), os.O_RDWR)
req = (3 << 30) | (32 << 16) | (ord("F") << 8) | 0x2A  # _IOWR('F', RM_CONTROL, NVOS54)
keep, out = [], []
for cmd, size, fields, nulls in cases:
    params = ctypes.create_string_buffer(size)
    expect = []
    for slot, (offset, count_offset, count_size, elem_size) in enumerate(fields):
        count = int.from_bytes(params.raw[count_offset:count_offset + count_size], "little")
        if not count:
            count = 0 if slot == 1 and nulls else 3 + slot
            ctypes.memmove(ctypes.addressof(params) + count_offset, count.to_bytes(count_size, "little"), count_size)
        data = bytes((0x40 + 16 * slot + i) & 0xFF for i in range(count * elem_size))
        array = ctypes.create_string_buffer(data, len(data) + 1)
        keep.append(array)
        addr = 0 if slot == 0 and nulls else ctypes.addressof(array)
        ctypes.memmove(ctypes.addressof(params) + offset, addr.to_bytes(8, "little"), 8)
        if addr and count:
            expect.append([slot, addr, array])
    nvos54 = (0xC1D00001).to_bytes(4, "little") * 2 + cmd.to_bytes(4, "little") + bytes(4)
    nvos54 += ctypes.addressof(params).to_bytes(8, "little") + size.to_bytes(4, "little") + bytes(4)
    arg = ctypes.create_string_buffer(nvos54, 32)
    before = [[slot, addr, a.raw[:-1].hex()] for slot, addr, a in expect]  # less the NUL ctypes adds
    if libc.ioctl(fd, req, ctypes.addressof(arg)) != 0:
        sys.exit(f"control {cmd:#x}: errno {ctypes.get_errno()}")
    after = [[slot, addr, a.raw[:-1].hex()] for slot, addr, a in expect]  # as the driver left them
    out.append([cmd, ctypes.addressof(params), before, after])
print(json.dumps(out))
"""


def cases() -> list[tuple[int, int, list[tuple[int, int, int, int]], bool]]:
    """(cmd, params size, [(offset, count_offset, count_size, elem_size)], nulls) per control, twice."""
    out = []
    for cmd, fields in sorted(pointer_table(recording_profile()).items()):
        assert all(f.count_offset is not None and not f.fixed_count for f in fields), "a fixed count: extend the test"
        size = max(max(f.offset + 8, f.count_offset + f.count_size) for f in fields)
        spans = [(f.offset, f.offset + 8) for f in fields]
        if any(a < f.count_offset + f.count_size and f.count_offset < b for a, b in spans for f in fields):
            continue  # a count inside a pointer: no such control in the profile today
        rows = [(f.offset, f.count_offset, f.count_size, f.elem_size) for f in fields]
        out += [(cmd, size, rows, False), (cmd, size, rows, True)]
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nested")
    programs = build_programs(tmp / "programs")
    devdir = make_device_dir(tmp / "devices")
    out = tmp / "nested.trace"
    all_cases = cases()
    proc = subprocess.run([sys.executable, str(SUPPORT), "-o", str(out), "--", sys.executable, "-c", PROGRAM,
                           str(devdir), json.dumps(all_cases)],
                          env=fakedrv_environment(programs, devdir), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with TraceReader(out) as reader:
        records = list(reader)
    return all_cases, json.loads(proc.stdout), records


def test_every_pointer_of_every_control_is_followed(recorded):
    all_cases, made, records = recorded
    assert len(made) == len(all_cases) > 40  # every control of the profile's table, twice
    assert {c[2][0][2] for c in all_cases} >= {2, 4, 8}  # count sizes the rules read
    enters = [r for r in records if r.source == Source.RM and r.op == RM_CONTROL and r.phase == Phase.ENTER]
    exits = {r.call_id: r for r in records if r.source == Source.RM and r.phase == Phase.EXIT}
    assert len(enters) == len(made)
    for (cmd, params_addr, before, after), enter in zip(made, enters):
        assert int.from_bytes(enter.buffer(Role.ARG).data[8:12], "little") == cmd
        assert enter.buffer(Role.PARAMS).addr == params_addr
        for record, when, expect in ((enter, When.BEFORE, before), (exits[enter.call_id], When.AFTER, after)):
            got = [[b.slot, b.addr, b.data.hex()] for b in record.buffers if b.role == Role.NESTED]
            assert got == expect, (hex(cmd), when)
            assert all(b.when == when and b.orig_len == len(b.data) for b in record.buffers if b.role == Role.NESTED)
