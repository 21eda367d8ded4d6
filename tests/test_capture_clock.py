"""Records' times by the TSC (kmod_shim/shim.h, shim_now) are CLOCK_MONOTONIC, as by clock_gettime.

Where the kernel's clocksource is the TSC, the shim extrapolates CLOCK_MONOTONIC from a sample per
thread taken every few milliseconds; each call's ENTER and EXIT must still lie between the program's
own clock_gettime before and after the ioctl, for every call of a run that spans many samples.  The
same run with clock_gettime (``--no-tsc``) is the reference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmtrace.capture.host import clocksource
from rmtrace.record import Phase, Role, Source, When
from rmtrace.trace import TraceReader
from tests.capture_support import build_programs, fakedrv_environment, make_device_dir
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

SUPPORT = Path(__file__).resolve().parent / "capture_support.py"
RM_CONTROL = 0x2A


@pytest.mark.parametrize("options, clock", [((), "tsc" if clocksource() == "tsc" else "clock_gettime"),
                                            (("--no-tsc",), "clock_gettime")])
def test_every_call_is_timed_between_the_programs_own_clock_reads(tmp_path, options, clock):
    programs = build_programs(tmp_path / "bin")
    log, out, calls = tmp_path / "steady.log", tmp_path / "run.trace", 1500
    env = fakedrv_environment(programs, make_device_dir(tmp_path / "dev"))
    proc = subprocess.run([sys.executable, str(SUPPORT), "-o", str(out), *options, "--", str(programs["rmprog"]),
                           "steady", str(calls), "200", str(log)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    did = [tuple(map(int, line.split())) for line in log.read_text().splitlines()[:-1]]
    assert len(did) == calls and did[-1][2] - did[0][1] > 200_000_000  # 0.3 s: many of the shim's samples
    with TraceReader(out) as reader:
        assert reader.meta["capture"]["clock"] == clock
        records = list(reader)
    numbered = {r.call_id: int.from_bytes(r.buffer(Role.PARAMS, When.BEFORE).data[4:8], "little") for r in records
                if r.source == Source.RM and r.op == RM_CONTROL and r.phase == Phase.ENTER}
    outside = []
    for r in records:
        if r.source == Source.RM and r.op == RM_CONTROL:
            _i, enter_ns, exit_ns = did[numbered[r.call_id]]
            if not enter_ns <= r.time_ns <= exit_ns:
                outside.append((r.phase, enter_ns - r.time_ns, r.time_ns - exit_ns))
    assert len(numbered) == calls and not outside, outside[:5]
    per_thread = {}
    for r in records:  # each thread's records in time order
        assert r.time_ns >= per_thread.get(r.tid, 0)
        per_thread[r.tid] = r.time_ns
