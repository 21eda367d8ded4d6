"""rmtrace.ko, the stand-in NVIDIA module and the sample host service in a real Debian kernel under qemu.

One boot (software emulation, -smp 2) serves every test here; each test
drives the guest through its agent port and reads pass or fail from what
the guest prints.  The host side is rmtrace itself: ``rmtrace record
--backend kmod`` (the CLI, in a process of its own) and ``drain_to_trace``
drain the guest's /dev/rmtrace through the relayed port, and the replayer
drives the sample target through the relayed /dev/rmtrace-replay.  The
differential tests replay the committed real capture against the sample
target and against the in-process model and compare them message by
message; the traces drained meanwhile open in show, wedges, diff and the TUI.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.sema import SemaOp
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.runner import replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target
from rmtrace.replayer.targets.base import RunInfo
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.services import library_services
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import wedge_text

from rmtrace.analysis.wedges import find_wedges
from rmtrace.capture.kmod import KCALL_BASE, KCall, default_probes, drain_to_trace
from rmtrace.errors import RmtraceError
from rmtrace.record import MarkOp, Phase, RecordFlag, Role, Source, When
from rmtrace.session import load_session
from rmtrace.timefmt import format_offset
from rmtrace.trace import TraceReader
from tests.kernel import guest as vm
from tests.tui_support import plain, settle

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
WHY_MISSING = vm.missing()
if WHY_MISSING and os.environ.get("CI"):
    raise RuntimeError(f"the kernel tests must run in CI: {WHY_MISSING}")
pytestmark = pytest.mark.skipif(WHY_MISSING is not None, reason=WHY_MISSING or "")
TIMEOUT_NS = 2_000_000_000
BAD_LOG = re.compile(r"BUG:|WARNING:|Oops|general protection|Call Trace|KASAN|kernel BUG")
DRIVER = "580.142"
EMITLOAD_PID = 0xE417
DRAINED: dict[str, str] = {}
"""Traces drained from the guest's /dev/rmtrace by ``rmtrace record --backend kmod`` during the replays."""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return vm.build(tmp_path_factory.mktemp("kmod"))


@pytest.fixture(scope="module")
def guest(built):
    g = vm.Guest(built)
    yield g
    g.close()


def kernel_log(guest) -> str:
    return guest.ok("dmesg")


def rmtrace_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``rmtrace ARGS`` in a process of its own (the recorder takes signals and may become a subreaper)."""
    return subprocess.Popen([sys.executable, "-m", "rmtrace.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def drain_with_cli(guest, output: str) -> subprocess.Popen:
    """``rmtrace record --backend kmod:PORT -o output``, returned once it is draining (its trace exists)."""
    proc = rmtrace_cli("record", "--backend", f"kmod:{guest.sockets['trace']}", "--driver", DRIVER, "-o", output)
    deadline = time.monotonic() + 120
    while not os.path.exists(output):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc


def finish(proc: subprocess.Popen, timeout_s: float = 120) -> tuple[int, str]:
    _out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, err


def records_of(path: str) -> list:
    with TraceReader(path) as reader:
        return list(reader.records())


def stop_mark(records: list) -> dict:
    (stop,) = [r for r in records if r.source == Source.MARK and r.op == MarkOp.STOP]
    return json.loads(stop.buffer(Role.TEXT).data)


def start_drain(guest) -> None:
    guest.stop("rmt_relay drain")
    guest.ok("rmt_relay drain /dev/rmtrace-port-trace /dev/rmtrace >/dev/null 2>&1 &")


def test_modules_build_warning_free_with_w1(built):
    assert set(built.modules) >= {"rmtrace", "nvidia_standin", "rmtrace_emitload", "rmtrace_sample"}
    assert vm.warnings(built.log) == []


W1_ONLY_WARNINGS = """\
#include <linux/module.h>
static const int never_read = 1;  /* -Wunused-const-variable: W=1 only */
int no_prototype(void) { return 0; }  /* -Wmissing-prototypes: W=1 only */
MODULE_LICENSE("GPL");
"""


def test_the_warning_check_fails_on_a_warning_that_only_w1_enables(tmp_path):
    (tmp_path / "Kbuild").write_text("obj-m := rmt_warns.o\n")
    (tmp_path / "rmt_warns.c").write_text(W1_ONLY_WARNINGS)
    out = vm.kbuild(tmp_path)
    assert out.returncode == 0, out.stderr
    found = vm.warnings(out.stdout + out.stderr)
    assert any("-Wunused-const-variable" in w for w in found) and any("-Wmissing-prototypes" in w for w in found), found


def test_emit_from_every_cpu_loses_nothing_or_counts_exactly_what_it_drops(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko ring_kb=8192 probes=")
    assert "cpus=2" in guest.log()
    out = guest.ok("rmt_check emit 20000 2000")
    assert re.search(r"EMIT cpus=2 emitted=44000 received=44000 dropped=0 PASS", out), out
    guest.ok("rmmod rmtrace && insmod /lib/rmtrace/rmtrace.ko ring_kb=64 probes=")
    out = guest.ok("rmt_check emit 20000 2000 late")  # read only afterwards: a 64 KiB ring must drop
    m = re.search(r"EMIT cpus=2 emitted=44000 received=(\d+) dropped=(\d+) PASS", out)
    assert m and int(m.group(2)) > 0 and int(m.group(1)) + int(m.group(2)) == 44000, out
    received, dropped = int(m.group(1)), int(m.group(2))
    # the three counts of one drop agree: the emitters' refusals, debugfs's drops, what the reader missed
    *_, (written, refused) = re.findall(r"emitload_written (\d+) emitload_refused (\d+)", kernel_log(guest))
    stats = dict(line.split() for line in guest.ok("cat /sys/kernel/debug/rmtrace/stats").splitlines())
    assert (int(written), int(refused)) == (received, dropped), (written, refused, out)
    assert int(stats["drops_full"]) + int(stats["drops_big"]) + int(stats["drops_ctx"]) == dropped, stats
    assert int(stats["records"]) == int(stats["consumed"]) == received, stats
    guest.ok("rmmod rmtrace")
    assert not BAD_LOG.search(kernel_log(guest))  # hard-irq emitters among them


def test_the_control_ioctl_turns_a_source_off_and_on(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes=")
    out = guest.ok("rmt_check sources 500")
    assert re.search(r"SOURCES off=0x3e received_off=0 received_on=1000 PASS", out), out  # MARK off, then on
    guest.ok("rmmod rmtrace")


def test_a_probe_list_in_the_module_parameter_picks_the_probes_and_names_an_unknown_one(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes=uvm_ioctl,nvUvmInterfaceRegisterGpu,no_such_entry")
    assert "probe no_such_entry is not in the default list" in kernel_log(guest)  # skipped, never a load failure
    def listed() -> list[tuple[str, str]]:
        return [tuple(line.split()[:2]) for line in guest.ok("cat /sys/kernel/debug/rmtrace/probes").splitlines()]

    assert listed() == [("uvm_ioctl", "missing"), ("nvUvmInterfaceRegisterGpu", "missing")]  # no driver yet
    guest.ok("insmod /lib/rmtrace/nvidia_standin.ko")
    assert listed() == [("uvm_ioctl", "attached"), ("nvUvmInterfaceRegisterGpu", "attached")]
    guest.ok("rmmod nvidia_standin && rmmod rmtrace")


def test_detach_ends_every_readers_stream_and_then_the_module_unloads(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= detach_wait_s=5 && rm -f /tmp/rmt_reader.*")
    pids = guest.ok("rmt_check readers 3").split("\n")[0].split()  # blocking, poll-driven, non-blocking
    guest.ok("insmod /lib/rmtrace/rmtrace_emitload.ko count=500 irq_count=0 && rmmod rmtrace_emitload")
    rc, out = guest.sh("rmmod rmtrace")  # an open file holds the module, as every char device's does
    assert rc != 0 and "can't unload module 'rmtrace'" in out, out  # EAGAIN: in use
    guest.ok("echo 1 > /sys/module/rmtrace/parameters/detach")  # returns once every reader has closed
    seen = [line.split() for line in guest.ok("cat /tmp/rmt_reader.0 /tmp/rmt_reader.1 /tmp/rmt_reader.2").splitlines()]
    fields = [dict(f.split("=") for f in line[2:-1]) for line in seen]
    assert [(f["stop"], f["after_stop"], f["leftover"]) for f in fields] == [("1", "0", "0")] * 3, seen
    assert sum(int(f["records"]) for f in fields) == 2 * 500 + 3  # every record, then each reader's STOP
    assert [p for p in pids if guest.sh(f"kill -0 {p}")[0] == 0] == []  # they ended by themselves
    rc, out = guest.sh("cat /dev/rmtrace")
    assert rc != 0 and "No such device" in out, out  # nothing new opens a detached module
    guest.ok("rmmod rmtrace")
    assert "rmtrace" not in guest.ok("lsmod")
    # a reader that keeps its file after the end of its stream: the detach names it, rmmod waits for it
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= detach_wait_s=1")
    (pid,) = guest.ok("rmt_check readers 1 hold").split("\n")[0].split()
    rc, _out = guest.sh("echo 1 > /sys/module/rmtrace/parameters/detach")
    assert rc != 0
    assert f"pid {pid} (rmt_check) keeps /dev/rmtrace open" in kernel_log(guest)
    assert guest.sh("rmmod rmtrace")[0] != 0
    guest.ok(f"kill {pid}; sleep 0.3; rmmod rmtrace")
    assert "rmtrace" not in guest.ok("lsmod")
    assert not BAD_LOG.search(kernel_log(guest))


def test_detach_ends_the_recorder_and_the_replay_session_and_the_relay_stays_for_the_next_load(guest, tmp_path):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= && insmod /lib/rmtrace/rmtrace_sample.ko policy=fixed")
    start_drain(guest)
    guest.stop("rmt_relay replay")
    guest.ok("rmt_relay replay /dev/rmtrace-port-replay >/dev/null 2>&1 &")
    first, second = str(tmp_path / "first.trace"), str(tmp_path / "second.trace")
    recorder = drain_with_cli(guest, first)
    plan = build_plan(str(CAPTURES / "cuda-streams.trace"))
    session = make_target(f"kmod:{guest.sockets['replay']}", plan)
    session.open(RunInfo(plan.meta, "sequential", None), None)  # HELLO: the session is open
    time.sleep(1)
    guest.ok("insmod /lib/rmtrace/rmtrace_emitload.ko count=100 irq_count=0 && rmmod rmtrace_emitload")
    time.sleep(1)
    guest.ok("echo 1 > /sys/module/rmtrace/parameters/detach")  # the relays close their files: it returns
    rc, err = finish(recorder)
    assert rc == 0 and "stopped: detached" in err, err
    records = records_of(first)
    assert sum(r.pid == EMITLOAD_PID for r in records) == 2 * 100
    stop = stop_mark(records)
    assert stop["reason"] == "detached" and stop["kmod"]["records"] >= 200 and stop["kmod"]["drops_full"] == 0
    with pytest.raises(RmtraceError, match="detached"):
        session.idle(1_000_000)  # the next write: the relay says the session is over
    session.close()
    guest.ok("rmmod rmtrace_sample && rmmod rmtrace")
    # the drain relay waited for the device: a fresh module's records reach a new recording
    recorder = drain_with_cli(guest, second)
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= && sleep 1")
    guest.ok("insmod /lib/rmtrace/rmtrace_emitload.ko count=50 irq_count=0 && rmmod rmtrace_emitload && sleep 2")
    recorder.send_signal(signal.SIGINT)
    rc, err = finish(recorder)
    assert rc == 130 and "stopped: interrupted" in err, err
    assert sum(r.pid == EMITLOAD_PID for r in records_of(second)) == 2 * 50
    guest.stop("rmt_relay drain")
    guest.stop("rmt_relay replay")
    guest.ok("rmmod rmtrace")
    assert not BAD_LOG.search(kernel_log(guest))


def test_standin_probes_follow_the_driver_across_unload_and_load_and_keep_a_blocked_enter(guest, tmp_path):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko")  # before the driver: its probes wait for it
    probes = guest.ok("cat /sys/kernel/debug/rmtrace/probes")
    assert re.search(r"^nvidia_unlocked_ioctl missing", probes, re.M), probes
    start_drain(guest)
    trace = str(tmp_path / "standin.trace")
    stop = threading.Event()
    result: list = []
    recorder = threading.Thread(target=lambda: result.append(drain_to_trace(
        guest.sockets["trace"], trace, {"driver_version": DRIVER}, stop=stop.is_set)))
    recorder.start()
    try:
        for round_ in (1, 2):
            guest.ok("insmod /lib/rmtrace/nvidia_standin.ko wedge=1")  # the probes attach as it loads
            probes = guest.ok("cat /sys/kernel/debug/rmtrace/probes")
            for name in ("nvidia_unlocked_ioctl", "uvm_ioctl", "nvUvmInterfaceRegisterGpu",
                         "nvUvmInterfaceUnregisterGpu", "nvUvmInterfaceRetainChannel", "GspMsgQueueSendCommand",
                         "GspMsgQueueReceiveStatus"):
                assert re.search(rf"^{name} attached", probes, re.M), probes
            assert re.search(r"^nvUvmInterfaceGetGpuInfo missing", probes, re.M)  # reported, never a failure
            out = guest.ok("rmt_check standin")
            assert "STANDIN" in out and "PASS" in out, out
            if round_ == 1:  # the wedge ends, the driver goes: its probes detach, the readers stay
                guest.ok("echo 1 > /sys/module/nvidia_standin/parameters/release; sleep 0.5; rmmod nvidia_standin")
                assert re.search(r"^nvidia_unlocked_ioctl missing", guest.ok("cat /sys/kernel/debug/rmtrace/probes"),
                                 re.M)
                # the recorder's probes from the driver profile (UVM params sizes, GSP offsets) replace the defaults
                guest.put("/tmp/specs", b"".join(default_probes(load_profile(DRIVER))))
                out = guest.ok("rmt_check addprobe /tmp/specs")
                assert "ADDPROBE uvm_ioctl waiting" in out and "ADDPROBE 3 PASS" in out, out
        time.sleep(2)
    finally:
        stop.set()
        recorder.join()
    assert result and result[0][1] == "interrupted"
    from rmtrace.decoders import decoders_for

    with TraceReader(trace) as reader:
        decoders = decoders_for(reader)
        recs = list(reader.records())
        names = [decoders.label(r).name for r in recs]
    assert [r.time_ns for r in recs if r.source != Source.MARK] == sorted(r.time_ns for r in recs
                                                                          if r.source != Source.MARK)
    rm = [r for r in recs if r.source == Source.RM]
    assert [r.phase for r in rm] == [Phase.ENTER, Phase.EXIT] * 2
    before, after = (r.buffer(Role.ARG) for r in rm[:2])
    assert before.when == When.BEFORE and after.when == When.AFTER and len(before.data) == 32
    gsp = [r for r in recs if r.source == Source.GSP]
    assert [r.phase for r in gsp] == [Phase.SEND, Phase.RECV] * 2 and {r.op for r in gsp} == {76}
    assert "GSP_RM_CONTROL" in names and "nvUvmInterfaceRegisterGpu" in names and "nvUvmInterfaceUnregisterGpu" in names
    notes = [r.buffer(Role.TEXT).data.decode() for r in recs if r.source == Source.MARK and r.op == MarkOp.NOTE]
    assert any(re.match(r"probe nvidia_unlocked_ioctl detached: module nvidia_standin is unloading", n) for n in notes)
    assert sum(bool(re.match(r"probe uvm_ioctl attached: module nvidia_standin loaded", n)) for n in notes) == 2
    # round 1's UVM_UNREGISTER_GPU returned when released; round 2's blocks inside nvUvmInterfaceUnregisterGpu
    registers = [r for r in recs if r.source == Source.UVM and r.op == 37]
    profile = load_profile(DRIVER)
    size = profile.uvm[37].size
    assert [len(b.data) for r in registers for b in r.buffers if b.role == Role.ARG] == [size, size]  # round 2 only
    entered, returned = registers[2].buffer(Role.ARG, When.BEFORE).data, registers[3].buffer(Role.ARG, When.AFTER).data
    assert entered[:16] == returned[:16] == bytes(range(0xA0, 0xB0))  # the GPU's UUID
    status = profile.layouts[profile.uvm[37].params].field("rmStatus")
    at = slice(status.offset, status.offset + status.size)
    assert (entered[at], returned[at]) == ((0xDEADBEEF).to_bytes(4, "little"), bytes(4))  # rmt_check's junk, then NV_OK
    uvm = [(r.op, r.phase) for r in recs if r.source == Source.UVM]
    unregister = KCALL_BASE + KCall.UNREGISTER_GPU
    assert uvm.count((38, Phase.ENTER)) == 2 and uvm.count((38, Phase.EXIT)) == 1
    assert uvm.count((unregister, Phase.ENTER)) == 2 and uvm.count((unregister, Phase.EXIT)) == 1
    assert uvm.count((KCALL_BASE + KCall.REGISTER_GPU, Phase.EXIT)) == 2
    in_flight = [r for r in recs if r.source == Source.MARK and r.op == MarkOp.IN_FLIGHT]
    assert len(in_flight) == 2  # the ioctl and the kernel call it is blocked in
    model = load_session(trace)
    assert any("UVM_UNREGISTER_GPU" in w.summary for w in find_wedges(model))
    DRAINED["standin"] = trace
    guest.ok("echo 1 > /sys/module/nvidia_standin/parameters/release; sleep 0.5")
    guest.stop("rmt_relay drain")
    guest.ok("rmmod nvidia_standin && rmmod rmtrace")
    assert not BAD_LOG.search(kernel_log(guest))


def test_random_and_malformed_writes_to_the_replay_device_give_clean_errors(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= && insmod /lib/rmtrace/rmtrace_sample.ko")
    out = guest.ok("rmt_check fuzz 6000 7", timeout_s=600)
    m = re.search(r"FUZZ writes=6000 refused=(\d+) taken=(\d+) PASS", out)
    assert m and int(m.group(1)) > 4000, out
    assert not BAD_LOG.search(kernel_log(guest))


PLANS = {
    "legacy-sequential-3": ("legacy", "sequential", 3, 1),
    "fixed-sequential-3": ("fixed", "sequential", 3, 1),
    "fixed-concurrent-2": ("fixed", "concurrent", 2, 1),
    "fixed-simultaneous-4": ("fixed", "simultaneous", 1, 4),
}


def _plan(repeat: int, streams: int):
    plan = build_plan(str(CAPTURES / "cuda-streams.trace"))
    plan = plan.repeat(repeat) if repeat > 1 else plan
    return plan.streams(streams) if streams > 1 else plan


def _run(plan, schedule: str, spec: str, output: str):
    sink: list[bytes] = []
    target = make_target(spec, plan)
    target_open = target.open

    def keep(info, writer_sink):
        def both(data: bytes) -> None:
            sink.append(data)
            if writer_sink is not None:
                writer_sink(data)
        target_open(info, both)
    target.open = keep  # the target's own records, as the runner hands them to the trace
    result = replay(plan, Schedule.parse(schedule), target, timeout_ns=TIMEOUT_NS, output=output)
    return result, sink


def _per_message(path: str) -> list[tuple]:
    return [(r.pid, r.call_id, r.source, r.op, r.phase) for r in records_of(path)
            if r.flags & RecordFlag.REPLAY and r.phase in (Phase.EXIT, Phase.RECV)]


def _verdicts(result) -> list[tuple]:
    return [(c.client.id, c.verdict.value, c.at.index if c.at else None, c.chain, c.diverged) for c in result.clients]


def _load(guest, policy: str) -> None:
    guest.stop("rmt_relay drain")
    guest.stop("rmt_relay replay")
    guest.sh("rmmod rmtrace_sample; rmmod rmtrace")
    guest.ok(f"insmod /lib/rmtrace/rmtrace.ko probes= && insmod /lib/rmtrace/rmtrace_sample.ko policy={policy}")
    guest.ok("rmt_relay replay /dev/rmtrace-port-replay >/dev/null 2>&1 &")


@pytest.mark.parametrize("case", sorted(PLANS))
def test_kmod_target_agrees_with_the_model_message_by_message(guest, tmp_path, case):
    policy, schedule, repeat, streams = PLANS[case]
    _load(guest, policy)
    drained = case in ("legacy-sequential-3", "fixed-sequential-3")
    if drained:  # the kernel's own view of the run, drained by the CLI as a user would
        start_drain(guest)
        recorder = drain_with_cli(guest, str(tmp_path / "drained.trace"))
    plan = _plan(repeat, streams)
    model, model_records = _run(plan, schedule, f"model:{policy}", str(tmp_path / "model.trace"))
    kernel, kernel_records = _run(plan, schedule, f"kmod:{guest.sockets['replay']}", str(tmp_path / "kmod.trace"))
    assert _verdicts(kernel) == _verdicts(model)
    assert kernel.counters == model.counters
    assert kernel_records == model_records  # every sema and GSP record, byte for byte
    assert _per_message(str(tmp_path / "kmod.trace")) == _per_message(str(tmp_path / "model.trace"))
    assert "rmtrace_sample:" + policy in kernel.target
    if policy == "legacy":
        assert [c.verdict.value for c in kernel.clients] == ["green", "wedged", "wedged"]
        assert kernel.clients[1].at.name == "UVM_REGISTER_GPU"
        # wedges on the kernel run's trace names the chain from the module's own sema records
        wedges = find_wedges(load_session(str(tmp_path / "kmod.trace")))
        chain = "\n".join(line for w in wedges for line in w.chain)
        assert "one-shot latch fired" in chain and "never re-armed" in chain, chain  # the spent latch
        assert "drain hold" in chain and re.search(r"hint_errors=[1-9]", chain), chain  # the hold, refused hints
    else:
        assert all(c.verdict.value == "green" for c in kernel.clients)
    if drained:
        time.sleep(1)
        recorder.send_signal(signal.SIGINT)
        rc, err = finish(recorder)
        assert rc == 130, err
        DRAINED[policy] = str(tmp_path / "drained.trace")
    assert not BAD_LOG.search(kernel_log(guest))


def _guest_clock_ns(guest) -> int:
    return int(float(guest.ok("cat /proc/uptime").split()[0]) * 1e9)  # CLOCK_BOOTTIME: MONOTONIC, no suspend


def test_clock_real_runs_the_service_on_its_own_timers_with_the_same_verdicts(guest, tmp_path):
    for policy, repeat in (("fixed", 3), ("legacy", 2)):
        _load(guest, policy)
        plan = _plan(repeat, 1)
        model, _ = _run(plan, "sequential", f"model:{policy}", str(tmp_path / f"model-{policy}.trace"))
        before = _guest_clock_ns(guest)
        kernel, _ = _run(plan, "sequential", f"kmod:{guest.sockets['replay']},clock=real",
                         str(tmp_path / f"real-{policy}.trace"))
        after = _guest_clock_ns(guest)
        assert [(c.client.id, c.verdict.value, c.at.name if c.at else None) for c in kernel.clients] == \
            [(c.client.id, c.verdict.value, c.at.name if c.at else None) for c in model.clients]
        answers = [r.time_ns for r in records_of(str(tmp_path / f"real-{policy}.trace"))
                   if r.flags & RecordFlag.REPLAY and r.phase == Phase.EXIT]
        # stamped by the guest's live clock, not the capture's recorded times
        assert before - 10**9 <= answers[0] and answers[-1] <= after + 10**9, (before, answers[0], answers[-1], after)
    assert [c.verdict.value for c in kernel.clients] == ["green", "wedged"]
    guest.stop("rmt_relay replay")
    guest.ok("rmmod rmtrace_sample && rmmod rmtrace")
    assert not BAD_LOG.search(kernel_log(guest))


def test_the_drained_traces_open_in_show_wedges_diff_and_the_tui(tmp_path):
    assert set(DRAINED) >= {"legacy", "fixed", "standin"}, "run with the tests that drain them"
    legacy, fixed = DRAINED["legacy"], DRAINED["fixed"]
    shown = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "show", "--json", legacy], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    names = {json.loads(line)["name"] for line in shown}
    assert {"UVM_REGISTER_GPU", "RM_ALLOC"} <= names and any(n.startswith("SEMA_") for n in names), names
    standin = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "show", DRAINED["standin"]],
                             capture_output=True, text=True, check=True).stdout
    assert "nvUvmInterfaceRegisterGpu" in standin and 'uuid="GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"' in standin
    assert re.search(r"nvUvmInterfaceUnregisterGpu\(uuid=\S+\) = void <1\.\d+s>", standin), standin  # round 1's
    blocked = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "wedges", DRAINED["standin"]],
                             capture_output=True, text=True)
    assert re.search(r"c\d pid \d+: nvUvmInterfaceUnregisterGpu never returned", blocked.stdout), blocked.stdout
    wedges = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "wedges", legacy], capture_output=True,
                            text=True)
    assert wedges.returncode == 3 and "UVM_REGISTER_GPU" in wedges.stdout, wedges.stdout + wedges.stderr
    # the chain from the module's own sema records as drained from the guest (no model ran on this trace):
    # the spent latch, the drain hold, the refused completion hints; the times it names are those records'
    assert "never re-armed" in wedges.stdout and re.search(r"hint_errors=[1-9]", wedges.stdout), wedges.stdout
    start = load_session(legacy).start_ns
    sema = {op: {format_offset(r.time_ns - start) for r in records_of(legacy) if r.source == Source.SEMA and r.op == op}
            for op in (SemaOp.LATCH_FIRE, SemaOp.DRAIN_HOLD)}
    fired = re.findall(r"one-shot latch fired at (\+[\d.]+ms)", wedges.stdout)
    held = re.findall(r"is in a drain hold since (\+[\d.]+ms)", wedges.stdout)
    assert fired and set(fired) <= sema[SemaOp.LATCH_FIRE] and held and set(held) <= sema[SemaOp.DRAIN_HOLD], (
        fired, held, wedges.stdout)
    green = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "wedges", fixed], capture_output=True, text=True)
    assert green.returncode == 0, green.stdout + green.stderr
    diff = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "diff", fixed, legacy], capture_output=True,
                          text=True)
    assert diff.returncode in (1, 3) and diff.stdout.strip(), diff.stdout + diff.stderr
    _tui_opens(legacy, "in_flight (UVM_REGISTER_GPU)", ["UVM_REGISTER_GPU"], "never re-armed")
    # the lane says what it is blocked in, innermost: the kernel call inside the ioctl
    _tui_opens(DRAINED["standin"], "in_flight (nvUvmInterfaceUnregisterGpu)",
               ["UVM_UNREGISTER_GPU", "nvUvmInterfaceUnregisterGpu"], "blocked in nvUvmInterfaceUnregisterGpu")


def _tui_opens(path: str, status: str, wedged_in: list[str], chain: str) -> None:
    """The TUI opens ``path``; ``w`` steps through its first wedges, one per call of ``wedged_in``: the events
    table's line at each names it, the timeline's status says ``status``, and ``chain`` is in one of their chains."""
    async def drive() -> None:
        app = RmtraceApp.open([path], library_services())
        async with app.run_test(size=(120, 34)) as pilot:
            await settle(pilot)
            run = app.workspace.run
            assert run.loaded and run.record_count > 0
            chains = []
            for name in wedged_in:
                await pilot.press("w")
                await settle(pilot)
                assert status in app.main.query_one(Timeline).status_text()
                events = app.main.query_one(EventsTable)
                assert name in events.render_line(events.pointer - events.scroll_offset.y + 1).text
                chains.append(plain(wedge_text(app.workspace), width=200))
            assert any(chain in text for text in chains), chains

    asyncio.run(drive())


def test_record_with_a_command_merges_the_kernel_stream_and_the_shim_in_time_order(guest, tmp_path):
    from tests.capture_support import build_programs, fakedrv_environment, make_device_dir

    guest.sh("rmmod rmtrace_sample; rmmod rmtrace")  # whatever an earlier test left (-k runs this one alone)
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes=")
    start_drain(guest)
    programs = build_programs(tmp_path / "programs")
    env = fakedrv_environment(programs, make_device_dir(tmp_path / "dev"))
    flags = tmp_path / "flags"
    flags.mkdir()
    rmprog = programs["rmprog"]
    command = (f"{rmprog} threads 1 20 && touch {flags}/first && while [ ! -e {flags}/go ]; do sleep 0.05; done && "
               f"{rmprog} threads 1 20")
    out = str(tmp_path / "merged.trace")
    recorder = rmtrace_cli("record", "--backend", f"kmod:{guest.sockets['trace']}", "--driver", DRIVER, "-o", out,
                           "--", "sh", "-c", command, env=env)
    deadline = time.monotonic() + 120
    while not (flags / "first").exists():
        assert recorder.poll() is None and time.monotonic() < deadline, recorder.communicate()
        time.sleep(0.05)
    guest.ok("insmod /lib/rmtrace/rmtrace_emitload.ko count=100 irq_count=0 && rmmod rmtrace_emitload")
    time.sleep(1.5)  # the relay and the feed have passed them on
    (flags / "go").touch()
    rc, err = finish(recorder)
    assert rc == 0, err
    records = records_of(out)
    with TraceReader(out) as reader:
        meta = reader.meta
    assert meta["backend"] == "preload+kmod" and meta["kmod"]["local"] is False
    assert [r.time_ns for r in records] == sorted(r.time_ns for r in records)  # one timeline
    kernel = [r.time_ns for r in records if r.pid == EMITLOAD_PID]
    shim_pids = sorted({r.pid for r in records if r.source == Source.RM}, key=lambda p: min(
        r.time_ns for r in records if r.pid == p and r.source == Source.RM))
    assert len(kernel) == 2 * 100 and len(shim_pids) == 2
    first = max(r.time_ns for r in records if r.pid == shim_pids[0] and r.source == Source.RM)
    second = min(r.time_ns for r in records if r.pid == shim_pids[1] and r.source == Source.RM)
    assert first < min(kernel) and max(kernel) < second  # the guest's records on the recorder's clock
    assert stop_mark(records)["kmod"]["ended"] is None
    guest.stop("rmt_relay drain")
    guest.ok("rmmod rmtrace")
