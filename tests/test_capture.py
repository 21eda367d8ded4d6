"""Recording real programs through the real shim, against the stand-in driver (tests/c/fakedrv.c).

Every recording here is checked whole by ``checked``: every record decodes,
and every ENTER has its EXIT unless a MARK IN_FLIGHT names it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rmtrace.analysis.wedges import find_wedges
from rmtrace.record import BufferFlag, MarkOp, Phase, RecordFlag, Role, Source, SysOp, When
from rmtrace.session import load_session
from rmtrace.trace import TraceReader
from tests.capture_support import CTRL_GET_CLASSLIST, build_programs, fakedrv_environment, make_device_dir
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

SUPPORT = Path(__file__).resolve().parent / "capture_support.py"
RM_CONTROL, RM_ALLOC, RM_FREE, CARD_INFO, XFER = 0x2A, 0x2B, 0x29, 200, 211
NV_ERR_INVALID_ADDRESS = 0x1E
EFAULT = 14


@pytest.fixture(scope="session")
def programs(tmp_path_factory):
    return build_programs(tmp_path_factory.mktemp("capture-programs"))


@pytest.fixture(scope="session")
def devdir(tmp_path_factory):
    return make_device_dir(tmp_path_factory.mktemp("devices"))


def env_for(programs, devdir, **extra):
    env = fakedrv_environment(programs, devdir)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start(programs, devdir, tmp_path, *command, options=(), **extra):
    out = tmp_path / "run.trace"
    proc = subprocess.Popen([sys.executable, str(SUPPORT), "-o", str(out), *options, "--", *map(str, command)],
                            env=env_for(programs, devdir, **extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    return proc, out


def record(programs, devdir, tmp_path, *command, options=(), **extra):
    proc, out = start(programs, devdir, tmp_path, *command, options=options, **extra)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr, out


def checked(path):
    """All records of a trace, after checking that each decodes and each ENTER is answered."""
    with TraceReader(path) as reader:
        assert reader.recovery.complete
        records = list(reader)
    assert [r.seq for r in records] == list(range(len(records)))
    in_flight = {(r.pid, r.call_id) for r in records if r.source == Source.MARK and r.op == MarkOp.IN_FLIGHT}
    enters = {(r.pid, r.call_id) for r in records if r.phase == Phase.ENTER}
    exits = Counter((r.pid, r.call_id) for r in records if r.phase == Phase.EXIT)
    lost = [json.loads(r.buffer(Role.TEXT).data) for r in records if r.source == Source.MARK and r.op == MarkOp.LOST]
    assert all(n == 1 for n in exits.values())
    if not lost:  # (a lossy ring may drop an enter and keep its exit, and says so)
        assert set(exits) <= enters
        assert enters - set(exits) == in_flight
    else:
        assert enters - set(exits) <= in_flight
    return records


def text(record) -> dict:
    return json.loads(record.buffer(Role.TEXT).data)


def marks(records, op):
    return [r for r in records if r.source == Source.MARK and r.op == op]


def calls(records, source, op=None):
    """(enter, exit) pairs of one source (and op), in order."""
    exits = {(r.pid, r.call_id): r for r in records if r.phase == Phase.EXIT}
    return [(r, exits.get((r.pid, r.call_id))) for r in records
            if r.phase == Phase.ENTER and r.source == source and (op is None or r.op == op)]


def u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 4], "little")


def test_basic_buffers_before_and_after(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "basic")
    assert rc == 0, stderr
    assert "basic ok" in stdout
    records = checked(out)
    meta = TraceReader(out).meta
    assert meta["backend"] == "preload" and meta["command"][1] == "basic" and meta["test_device_dir"] == str(devdir)

    allocs = calls(records, Source.RM, RM_ALLOC)
    (e21, x21), (e64, x64) = allocs
    assert len(e21.buffer(Role.ARG).data) == 32 and len(e64.buffer(Role.ARG).data) == 48
    # a root client's params are copied as the NvHandle resource_list.h declares, not all 120 bytes
    assert e21.buffer(Role.ALLOC_PARAMS, When.BEFORE).data == bytes([7, 0, 0, 0])
    assert x21.buffer(Role.ALLOC_PARAMS, When.AFTER).data[0] == 7 ^ 0x80
    assert u32(x21.buffer(Role.ARG, When.AFTER).data, 8) == 0xCAF00000  # hObjectNew, written by the driver
    # paramsSize 0: the params are sized by class, as RM sizes them (NV0080_ALLOC_PARAMETERS, 56 bytes)
    assert u32(e64.buffer(Role.ARG).data, 32) == 0
    assert len(e64.buffer(Role.ALLOC_PARAMS, When.BEFORE).data) == 56
    assert e64.buffer(Role.ALLOC_PARAMS, When.BEFORE).data[0] == 1
    assert e64.buffer(Role.RIGHTS, When.BEFORE).data == (5).to_bytes(4, "little")
    assert x64.buffer(Role.RIGHTS) is None  # input only

    controls = calls(records, Source.RM, RM_CONTROL)
    count_query, list_query = [(e, x) for e, x in controls if u32(e.buffer(Role.ARG).data, 8) == CTRL_GET_CLASSLIST]
    assert count_query[0].buffer(Role.NESTED) is None  # classList NULL: nothing to follow
    assert u32(count_query[1].buffer(Role.PARAMS, When.AFTER).data, 0) == 5
    nested = list_query[1].buffer(Role.NESTED, When.AFTER, slot=0)
    assert [u32(nested.data, 4 * i) for i in range(5)] == [0xC000 + i for i in range(5)]
    assert list_query[0].buffer(Role.NESTED, When.BEFORE, slot=0).data == bytes(20)

    (xe, xx), = calls(records, Source.RM, XFER)
    assert len(xe.buffer(Role.ARG).data) == 16 and len(xe.buffer(Role.XFER).data) == 32
    assert xe.buffer(Role.PARAMS, When.BEFORE).data == b"\x10" * 64
    assert xx.buffer(Role.PARAMS, When.AFTER).data == b"\x11" * 64
    (ce, cx), = calls(records, Source.RM, CARD_INFO)
    assert len(ce.buffer(Role.ARG).data) == 4 * 72 and cx.buffer(Role.ARG, When.AFTER).data[0] == 1

    uvm = calls(records, Source.UVM)
    assert [(e.op, len(e.buffer(Role.ARG).data)) for e, _ in uvm] == [(0x30000001, 16), (39, 8)]
    assert uvm[1][1].buffer(Role.ARG, When.AFTER).data[0] == 1

    sys_ops = Counter((r.op, r.phase) for r in records if r.source == Source.SYS)
    assert sys_ops[(SysOp.OPEN, Phase.EVENT)] == 3
    assert sys_ops[(SysOp.DUP, Phase.EVENT)] == 3
    assert sys_ops[(SysOp.CLOSE, Phase.ENTER)] == sys_ops[(SysOp.CLOSE, Phase.EXIT)] == 6
    (me, mx), = calls(records, Source.SYS, SysOp.MMAP)
    (ue, ux), = calls(records, Source.SYS, SysOp.MUNMAP)
    assert mx.ret > 0 and int.from_bytes(ue.buffer(Role.ARG).data[:8], "little") == mx.ret and ux.ret == 0
    opens = {r.fd: r.buffer(Role.PATH).data.decode() for r in records if r.op == SysOp.OPEN and r.source == Source.SYS}
    assert sorted(Path(p).name for p in opens.values()) == ["nvidia-uvm", "nvidia0", "nvidiactl"]
    # the dup'd fds carry controls; the closed one and the pipe carry nothing
    dup_fds = {r.fd for r in records if r.op == SysOp.DUP and r.source == Source.SYS}
    assert dup_fds <= {e.fd for e, _ in controls} and len(dup_fds) == 3
    assert len(controls) == 5 and len(calls(records, Source.RM)) == 9
    start_rec, = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXEC]
    assert start_rec.phase == Phase.EVENT and start_rec.buffer(Role.TEXT).data.split(b"\0")[1] == b"basic"
    exit_rec, = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXIT]
    assert exit_rec.ret == 0
    stop, = marks(records, MarkOp.STOP)
    assert text(stop)["reason"] == "exited" and text(stop)["exit_status"] == 0
    assert not list(Path("/dev/shm").glob(f"rmtrace-{meta['recorder']['pid']}-*"))  # the session dir is gone


def test_many_threads(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "threads", 8, 250)
    assert rc == 0, stderr
    records = checked(out)
    controls = calls(records, Source.RM, RM_CONTROL)
    assert len(controls) == 2000
    by_tid = Counter(e.tid for e, _ in controls)
    assert len(by_tid) == 8 and set(by_tid.values()) == {250}
    assert all(e.tid == x.tid and x.time_ns >= e.time_ns for e, x in controls)
    times = [r.time_ns for r in records if r.source != Source.MARK]
    assert times == sorted(times)
    assert len({e.call_id for e, _ in controls}) == 2000


def behind(records) -> int:
    """Records older than one before them."""
    times = [r.time_ns for r in records if r.source != Source.MARK]
    return sum(t < latest for t, latest in zip(times[1:], itertools.accumulate(times, max)))


def test_a_thread_descheduled_between_its_time_and_its_publication_stays_in_order(programs, devdir, tmp_path):
    """One thread's RM_FREE waits 300 ms between its time and its publication (the test hook), ten
    times the recorder's poll, while another thread makes controls the whole time: the merge waits
    for the writing ring, and the trace is in time order."""
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "race",
                                     RMTRACE_TEST_STALL=f"{RM_FREE:#x}:300")
    assert rc == 0 and "race ok" in stdout, stderr
    records = checked(out)
    (free, freed), = calls(records, Source.RM, RM_FREE)
    during = [e for e, _ in calls(records, Source.RM, RM_CONTROL) if free.time_ns < e.time_ns < freed.time_ns]
    assert freed.time_ns - free.time_ns >= 300_000_000 and during, "nothing ran beside the held record"
    stop = text(marks(records, MarkOp.STOP)[0])
    assert behind(records) == 0 and stop["late_records"] == 0 and stop["ring_stalls"] == 0


def test_a_ring_stalled_past_the_limit_is_no_longer_waited_for(programs, devdir, tmp_path):
    """The same with a stall limit below the hold: the merge writes the other thread's records
    without waiting, and the two held records come late, each counted."""
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "race",
                                     options=("--stall", "0.1"), RMTRACE_TEST_STALL=f"{RM_FREE:#x}:300")
    assert rc == 0 and "race ok" in stdout, stderr
    records = checked(out)
    stop = text(marks(records, MarkOp.STOP)[0])
    assert behind(records) == stop["late_records"] and stop["ring_stalls"] >= stop["late_records"] >= 2


def test_fork_exec_vfork_and_spawn_children(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "fork")
    assert rc == 0, stderr
    records = checked(out)
    parent = records[0].pid
    forks = [r for r in records if r.source == Source.SYS and r.op == SysOp.FORK]
    assert [r.pid for r in forks] == [parent] * 3
    children = [r.ret for r in forks]
    assert len(set(children)) == 3
    by_pid = Counter(r.pid for r, _ in calls(records, Source.RM, RM_CONTROL))
    # parent 2; fork child 1 before its exec and 1 after; the vfork and spawn children 1 each
    assert by_pid == {parent: 2, children[0]: 2, children[1]: 1, children[2]: 1}
    execs = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXEC]
    exec_enters = [r for r in execs if r.phase == Phase.ENTER]
    assert sorted(r.pid for r in exec_enters) == sorted(children[:2])  # fork + execv, vfork + execv
    for enter in exec_enters:  # answered by the new image, with the same call id
        after, = [r for r in execs if r.phase == Phase.EXIT and r.call_id == enter.call_id]
        assert after.pid == enter.pid and after.ret == 0 and after.buffer(Role.TEXT).data.split(b"\0")[1] == b"child"
    spawned, = [r for r in execs if r.phase == Phase.EVENT and r.pid == children[2]]
    assert spawned.ret == parent  # a posix_spawn child names its parent
    assert len({r.call_id for r in records if r.phase == Phase.ENTER}) == sum(r.phase == Phase.ENTER for r in records)


def wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def test_sigkill_while_blocked_in_the_driver(programs, devdir, tmp_path):
    note = tmp_path / "blocked"
    proc, out = start(programs, devdir, tmp_path, programs["rmprog"], "block",
                      FAKEDRV_BLOCK_REQ=f"{0xc0104629:x}", FAKEDRV_BLOCK_NOTE=note)
    pid = int(wait_for(note))
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL, stderr
    records = checked(out)
    (enter, exit_), = calls(records, Source.RM, RM_FREE)
    assert exit_ is None and enter.pid == pid
    mark, = marks(records, MarkOp.IN_FLIGHT)
    assert (mark.pid, mark.tid, mark.call_id) == (enter.pid, enter.tid, enter.call_id)
    assert text(mark) | {"since_ns": 0} == {"source": "RM", "op": RM_FREE, "fd": enter.fd, "enter_seq": enter.seq,
                                             "since_ns": 0, "process_alive": False, "uncertain": None}
    died, = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXIT]
    assert died.pid == pid and died.ret == -signal.SIGKILL and died.flags & RecordFlag.SYNTHETIC
    assert text(marks(records, MarkOp.STOP)[0])["reason"] == "exited"
    # and `wedges` names that call, its process and how long it was in flight
    top = find_wedges(load_session(out))[0]
    assert top.kind == "in_flight" and top.seq == enter.seq and f"pid {pid}" in top.summary
    assert "RM_FREE never returned" in top.summary
    assert f"since +{(enter.time_ns - records[0].time_ns) / 1e6:.3f}ms" in top.chain[0]
    assert "by the end of the trace" in top.chain[0]
    assert "killed by signal 9" in top.chain[1]


def test_wedged_command_is_stopped_by_duration(programs, devdir, tmp_path):
    rc, _stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "block",
                                      options=("--duration", "1.0", "--grace", "1.0"),
                                      FAKEDRV_BLOCK_REQ=f"{0xc0104629:x}")
    assert rc == 128 + signal.SIGTERM, stderr
    records = checked(out)
    mark, = marks(records, MarkOp.IN_FLIGHT)
    assert text(mark)["process_alive"] is True and text(mark)["op"] == RM_FREE
    stop = text(marks(records, MarkOp.STOP)[0])
    assert stop["reason"] == "duration" and stop["exit_status"] is None and len(stop["terminating"]) == 1
    assert len(calls(records, Source.RM, RM_CONTROL)) == 2


def test_ctrl_c_stops_a_wedged_command_after_closing_the_trace(programs, devdir, tmp_path):
    note = tmp_path / "blocked"
    proc, out = start(programs, devdir, tmp_path, programs["rmprog"], "block", options=("--grace", "1.0"),
                      FAKEDRV_BLOCK_REQ=f"{0xc0104629:x}", FAKEDRV_BLOCK_NOTE=note)
    pid = int(wait_for(note))
    proc.send_signal(signal.SIGINT)  # the recorder alone: the wedged command ignores nothing, it just never returns
    _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    records = checked(out)
    stop = text(marks(records, MarkOp.STOP)[0])
    assert stop["reason"] == "interrupted" and stop["signal"] == "SIGINT" and stop["terminating"] == [pid]
    mark, = marks(records, MarkOp.IN_FLIGHT)
    assert mark.pid == pid and text(mark)["process_alive"] is True


def test_bad_pointers_are_flagged_not_fatal(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "badptr")
    assert rc == 0, stderr  # rmprog checks it got the driver's own answers
    records = checked(out)
    (bad_params, bad_params_exit), (bad_arg, bad_arg_exit) = calls(records, Source.RM, RM_CONTROL)
    params = bad_params.buffer(Role.PARAMS)
    assert params.flags & BufferFlag.UNREADABLE and params.addr == 0x10 and params.orig_len == 64
    assert bad_params.flags & RecordFlag.UNREADABLE
    assert u32(bad_params_exit.buffer(Role.ARG, When.AFTER).data, 28) == NV_ERR_INVALID_ADDRESS
    assert bad_arg.buffer(Role.ARG).flags & BufferFlag.UNREADABLE and bad_arg.buffer(Role.ARG).addr == 0x18
    assert (bad_arg_exit.ret, bad_arg_exit.err) == (-1, EFAULT)
    (alloc, alloc_exit), = calls(records, Source.RM, RM_ALLOC)
    assert alloc.buffer(Role.ALLOC_PARAMS).flags & BufferFlag.UNREADABLE
    assert u32(alloc_exit.buffer(Role.ARG, When.AFTER).data, 28) == NV_ERR_INVALID_ADDRESS
    reads = text(marks(records, MarkOp.STOP)[0])["buffer_reads"]
    # every read by the copy, none by a system call; the bad ones before and after each call
    assert reads["copy"] > 0 and reads["syscall"] == 0 and reads["unreadable"] == 6, reads


def test_the_programs_own_fault_handlers_are_kept(programs, devdir, tmp_path):
    """A program with SIGSEGV/SIGBUS handlers of its own: the shim's faults never reach them, the
    program's own faults do, it reads back what it set; a thread blocking every signal, and a
    handler whose mask blocks them, still get their bad pointers answered, not a crash."""
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "signals")
    assert rc == 0 and "signals ok" in stdout, stderr
    records = checked(out)
    reads = text(marks(records, MarkOp.STOP)[0])["buffer_reads"]
    assert reads["syscall"] >= 3 and reads["unreadable"] >= 4, reads  # the blocked thread read the slow way
    statuses = [u32(x.buffer(Role.ARG, When.AFTER).data, 28) for _, x in calls(records, Source.RM, RM_CONTROL)]
    assert statuses.count(NV_ERR_INVALID_ADDRESS) == 4


def test_a_fault_with_no_handler_still_kills_the_program(programs, devdir, tmp_path):
    rc, _stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "segv")
    assert rc == 128 + signal.SIGSEGV, stderr
    died = [r for r in checked(out) if r.source == Source.SYS and r.op == SysOp.EXIT]
    assert died and died[-1].ret == -signal.SIGSEGV


def test_tiny_ring_is_lossless(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "many", 3000, 256,
                                     options=("--ring-size", "4096"))
    assert rc == 0, stderr
    records = checked(out)
    assert len(calls(records, Source.RM, RM_CONTROL)) == 3000
    assert not marks(records, MarkOp.LOST)
    assert text(marks(records, MarkOp.STOP)[0])["ring_waits"] > 0  # the writer really had to wait


def test_a_buffer_cut_to_fit_a_record_is_cut_alike_before_and_after(programs, devdir, tmp_path):
    # 4000-byte params in a 4 KiB ring (records of at most 2 KiB): the enter cuts them (TRUNCATED, trunc_big),
    # so its plan is not whole and the exit takes the general way, cutting them again from the program's length.
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "many", 5, 4000,
                                     options=("--ring-size", "4096"))
    assert rc == 0, stderr
    records = checked(out)
    pairs = calls(records, Source.RM, RM_CONTROL)
    assert len(pairs) == 5
    for i, (enter, exit_) in enumerate(pairs):
        before, after = enter.buffer(Role.PARAMS), exit_.buffer(Role.PARAMS)
        assert (before.when, after.when) == (When.BEFORE, When.AFTER)
        assert before.orig_len == after.orig_len == 4000 and before.addr == after.addr
        assert before.flags & after.flags & BufferFlag.TRUNCATED and 0 < len(after.data) == len(before.data) < 4000
        assert enter.flags & exit_.flags & RecordFlag.TRUNCATED
        assert (before.data[0], after.data[0]) == (i % 256, (i + 1) % 256)  # the driver's answer is in the exit
    assert text(marks(records, MarkOp.LOST)[0])["trunc_big"] == 2 * 5  # each enter and exit cut, and counted once


def test_lossy_mode_counts_every_drop(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], "many", 20000, 256,
                                     options=("--ring-size", "4096", "--lossy"))
    assert rc == 0, stderr
    records = checked(out)
    lost = text(marks(records, MarkOp.LOST)[0])
    assert lost["lossy"] is True and lost["lost_full"] > 0
    shim_records = [r for r in records if not r.flags & RecordFlag.SYNTHETIC]
    # start, open, close enter and exit, exit, and an enter and an exit per control: what is missing was counted
    assert len(shim_records) + lost["lost_full"] == 5 + 2 * 20000
    assert "lost_full" in stderr


def test_no_device_says_nothing_was_captured(programs, devdir, tmp_path):
    rc, stdout, stderr, out = record(programs, devdir, tmp_path, "sh", "-c", "echo hi; exit 3")
    assert rc == 3
    assert "hi" in stdout
    assert "nothing was captured: no traced process opened a /dev/nvidia* device" in stderr
    records = checked(out)
    assert {r.source for r in records} == {Source.SYS, Source.MARK}


@pytest.mark.parametrize("scenario, status", [(("exit", 7), 7), (("kill",), 128 + signal.SIGTERM)])
def test_exit_status_passes_through(programs, devdir, tmp_path, scenario, status):
    rc, _stdout, stderr, out = record(programs, devdir, tmp_path, programs["rmprog"], *scenario)
    assert rc == status, stderr
    records = checked(out)
    exits = [r for r in records if r.source == Source.SYS and r.op == SysOp.EXIT]
    assert [r.ret for r in exits] == ([7] if status == 7 else [-signal.SIGTERM])


def test_the_installed_shim_has_no_test_hooks(programs, devdir, tmp_path):
    from rmtrace.kmod_shim import HERE, SHIM_LIBRARY
    assert b"RMTRACE_TEST_DEVICE_DIR" not in (HERE / SHIM_LIBRARY).read_bytes()
    assert b"RMTRACE_TEST_DEVICE_DIR" in programs["shim"].read_bytes()
    env = env_for(programs, devdir)
    del env["RMTRACE_SHIM"]  # the library pip installed: files of a test folder are no NVIDIA devices to it
    out = tmp_path / "prod.trace"
    proc = subprocess.run([sys.executable, str(SUPPORT), "-o", str(out), "--", str(programs["rmprog"]), "basic"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "basic ok" in proc.stdout, proc.stderr
    assert "nothing was captured: no traced process opened a /dev/nvidia* device" in proc.stderr
    assert not [r for r in checked(out) if r.source in (Source.RM, Source.UVM)]


def test_a_recorder_killed_mid_run_loses_at_most_its_last_100_ms(programs, devdir, tmp_path):
    """kill -9 of the recorder while its program runs: the program goes on and finishes, and the
    torn trace holds every call the program made up to 100 ms before the kill, exactly as made."""
    from rmtrace.capture.session import SHM_DIR, sweep_stale_sessions
    log = tmp_path / "steady.log"
    calls = 3000
    proc, out = start(programs, devdir, tmp_path, programs["rmprog"], "steady", calls, 300, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for the recording to be well under way
        if out.exists() and out.stat().st_size > 4096:
            with TraceReader(out) as reader:
                if reader.record_count > 400:
                    break
        time.sleep(0.02)
    time.sleep(0.037)
    killed_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock of the records and of the program's log
    proc.kill()
    proc.wait(timeout=10)
    # Read at once what the killed recorder left in /dev/shm: any other recorder started on this
    # machine (another test run) sweeps stale sessions too, so by the end it may have gone already.
    left = [os.path.join(SHM_DIR, n) for n in os.listdir(SHM_DIR) if n.startswith(f"rmtrace-{proc.pid}-")]
    assert left, "the killed recorder left no session in /dev/shm: nothing for the sweep to test"
    while not (log.exists() and log.read_text().endswith(f"done {calls}\n")):  # the program finishes on its own
        assert time.monotonic() < deadline, "the traced program did not finish after its recorder died"
        time.sleep(0.05)
    did = [tuple(map(int, line.split())) for line in log.read_text().splitlines()[:-1]]
    assert [d[0] for d in did] == list(range(calls))
    assert did[-1][2] > killed_ns, "the program had finished before the kill: nothing was tested"

    with TraceReader(out) as reader:
        assert not reader.recovery.complete
        records = list(reader)
    numbered = {r.call_id: u32(r.buffer(Role.PARAMS, When.BEFORE).data, 4) for r in records
                if r.source == Source.RM and r.op == RM_CONTROL and r.phase == Phase.ENTER}
    controls = {}
    for r in records:
        if r.source == Source.RM and r.op == RM_CONTROL:
            controls.setdefault(numbered[r.call_id], {})[r.phase] = r
    for i, phases in controls.items():  # the trace holds what the program did, nothing else
        enter_ns, exit_ns = did[i][1], did[i][2]
        assert Phase.ENTER in phases and enter_ns <= phases[Phase.ENTER].time_ns <= exit_ns
        assert Phase.EXIT not in phases or enter_ns <= phases[Phase.EXIT].time_ns <= exit_ns
    assert all(r.time_ns < killed_ns for r in records)
    before = [i for i, enter_ns, exit_ns in did if exit_ns < killed_ns - 100_000_000]
    missing = [i for i in before if set(controls.get(i, ())) != {Phase.ENTER, Phase.EXIT}]
    assert before and not missing, f"{len(missing)} calls made more than 100 ms before the kill are missing"
    lost_ms = (killed_ns - max(r.time_ns for r in records)) / 1e6
    print(f"recorder killed: {len(before)} calls before kill-100ms all present; the trace ends {lost_ms:.1f} ms "
          f"before the kill")
    sweep_stale_sessions()
    assert not any(os.path.exists(path) for path in left), "a dead recorder's session outlived the sweep"
