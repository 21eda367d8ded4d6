"""rmtrace.ko, the stand-in NVIDIA module and the sample host service in a real Debian kernel under qemu.

One boot (software emulation, -smp 2) serves every test here; each test
drives the guest through its agent port and reads pass or fail from what
the guest prints.  The end-to-end differential test replays the committed
real captures from the host, through the guest's relayed /dev/rmtrace-replay,
against the sample target, and compares it message by message with the
in-process model.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.runner import replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target

from rmtrace.analysis.wedges import find_wedges
from rmtrace.capture.kmod import KmodSource
from rmtrace.session import load_session
from rmtrace.trace import TraceReader, TraceWriter
from tests.kernel import guest as vm

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
WHY_MISSING = vm.missing()
if WHY_MISSING and os.environ.get("CI"):
    raise RuntimeError(f"the kernel tests must run in CI: {WHY_MISSING}")
pytestmark = pytest.mark.skipif(WHY_MISSING is not None, reason=WHY_MISSING or "")
TIMEOUT_NS = 2_000_000_000
BAD_LOG = re.compile(r"BUG:|WARNING:|Oops|general protection|Call Trace|KASAN|kernel BUG")


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


def test_modules_build_warning_free_with_w1(built):
    assert set(built.modules) >= {"rmtrace", "nvidia_standin", "rmtrace_emitload", "rmtrace_sample"}
    assert [line for line in built.log.splitlines() if "warning:" in line] == []


def test_emit_from_every_cpu_loses_nothing_or_counts_exactly_what_it_drops(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko ring_kb=8192 probes=")
    assert "cpus=2" in guest.log()
    out = guest.ok("rmt_check emit 20000 2000")
    assert re.search(r"EMIT cpus=2 emitted=44000 received=44000 dropped=0 PASS", out), out
    guest.ok("rmmod rmtrace && insmod /lib/rmtrace/rmtrace.ko ring_kb=64 probes=")
    out = guest.ok("rmt_check emit 20000 2000 late")  # read only afterwards: a 64 KiB ring must drop
    m = re.search(r"EMIT cpus=2 emitted=44000 received=(\d+) dropped=(\d+) PASS", out)
    assert m and int(m.group(2)) > 0 and int(m.group(1)) + int(m.group(2)) == 44000, out
    guest.ok("rmmod rmtrace")


def test_unload_with_readers_attached(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko")
    out = guest.ok("rmt_check readers 3")
    pids = out.split("\n")[0].split()
    assert len(pids) == 3
    time.sleep(0.5)
    rc, out = guest.sh("rmmod rmtrace")  # an open file holds the module, as every char device's does
    assert rc != 0 and "unload" in out, out
    assert "rmtrace" in guest.ok("lsmod")
    guest.ok(f"kill {' '.join(pids)}; sleep 0.5; rmmod rmtrace")
    assert "rmtrace" not in guest.ok("lsmod")
    assert not BAD_LOG.search(kernel_log(guest))


def test_standin_probes_attach_capture_before_and_after_and_keep_a_blocked_enter(guest, tmp_path):
    guest.ok("insmod /lib/rmtrace/nvidia_standin.ko wedge=1 && insmod /lib/rmtrace/rmtrace.ko")
    probes = guest.ok("cat /sys/kernel/debug/rmtrace/probes")
    for name in ("nvidia_unlocked_ioctl", "uvm_ioctl", "nvUvmInterfaceRegisterGpu", "nvUvmInterfaceUnregisterGpu",
                 "nvUvmInterfaceRetainChannel", "GspMsgQueueSendCommand", "GspMsgQueueReceiveStatus"):
        assert re.search(rf"^{name} attached", probes, re.M), probes
    assert re.search(r"^nvUvmInterfaceGetGpuInfo missing", probes, re.M)  # skipped and reported, not a failure
    guest.ok("rmt_relay drain /dev/rmtrace-port-trace /dev/rmtrace >/dev/null 2>&1 &")
    source = KmodSource(guest.sockets["trace"])
    records: list[bytes] = []
    stop = threading.Event()

    def drain():
        while not stop.is_set():
            records.extend(source.read(0.1))

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        out = guest.ok("rmt_check standin")
        assert "STANDIN" in out and "PASS" in out, out
        time.sleep(2)
    finally:
        stop.set()
        reader.join()
        source.close()
    trace = tmp_path / "standin.trace"
    with TraceWriter(str(trace), {"driver_version": "580.142", "backend": "kmod"}) as writer:
        for raw in sorted(records, key=lambda r: int.from_bytes(r[24:32], "little")):
            writer.write_encoded(raw)
    from rmtrace.decoders import decoders_for

    from rmtrace.record import Phase, Role, Source, When
    with TraceReader(str(trace)) as reader:
        decoders = decoders_for(reader)
        recs = list(reader.records())
        names = [decoders.label(r).name for r in recs]
        rm = [r for r in recs if r.source == Source.RM]
        assert [r.phase for r in rm] == [Phase.ENTER, Phase.EXIT]
        before, after = (r.buffer(Role.ARG) for r in rm)
        assert before.when == When.BEFORE and after.when == When.AFTER and len(before.data) == 32
        gsp = [r for r in recs if r.source == Source.GSP]
        assert [r.phase for r in gsp] == [Phase.SEND, Phase.RECV] and {r.op for r in gsp} == {76}
        assert "GSP_RM_CONTROL" in names
        # the child's UVM_UNREGISTER_GPU blocks inside nvUvmInterfaceUnregisterGpu: both enters, no exits
        uvm = [(r.op, r.phase) for r in recs if r.source == Source.UVM]
        assert (38, Phase.ENTER) in uvm and (38, Phase.EXIT) not in uvm
        assert (0x4B000002, Phase.ENTER) in uvm and (0x4B000002, Phase.EXIT) not in uvm
        assert (0x4B000001, Phase.EXIT) in uvm and (0x4B000003, Phase.EXIT) in uvm
    model = load_session(str(trace))
    assert any("UVM_UNREGISTER_GPU" in w.summary for w in find_wedges(model))
    guest.ok("echo 1 > /sys/module/nvidia_standin/parameters/release; sleep 0.5")
    guest.stop("rmt_relay drain")
    guest.ok("rmmod rmtrace && rmmod nvidia_standin")


def test_random_and_malformed_writes_to_the_replay_device_give_clean_errors(guest):
    guest.ok("insmod /lib/rmtrace/rmtrace.ko probes= && insmod /lib/rmtrace/rmtrace_sample.ko")
    out = guest.ok("rmt_check fuzz 6000 7", timeout_s=600)
    m = re.search(r"FUZZ writes=6000 refused=(\d+) taken=(\d+) PASS", out)
    assert m and int(m.group(1)) > 4000, out
    assert not BAD_LOG.search(kernel_log(guest))


PLANS = {
    "legacy-sequential-3": ("cuda-streams.trace", "legacy", "sequential", 3, 1),
    "fixed-sequential-3": ("cuda-streams.trace", "fixed", "sequential", 3, 1),
    "fixed-concurrent-2": ("cuda-streams.trace", "fixed", "concurrent", 2, 1),
    "fixed-simultaneous-4": ("cuda-streams.trace", "fixed", "simultaneous", 1, 4),
}


def _plan(capture: str, repeat: int, streams: int):
    plan = build_plan(str(CAPTURES / capture))
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
    from rmtrace.record import Phase, RecordFlag
    with TraceReader(path) as reader:
        return [(r.pid, r.call_id, r.source, r.op, r.phase) for r in reader.records()
                if r.flags & RecordFlag.REPLAY and r.phase in (Phase.EXIT, Phase.RECV)]


@pytest.mark.parametrize("case", sorted(PLANS))
def test_kmod_target_agrees_with_the_model_message_by_message(guest, tmp_path, case):
    capture, policy, schedule, repeat, streams = PLANS[case]
    guest.sh("rmmod rmtrace_sample; rmmod rmtrace")
    guest.ok(f"insmod /lib/rmtrace/rmtrace.ko probes= && insmod /lib/rmtrace/rmtrace_sample.ko policy={policy}")
    guest.stop("rmt_relay replay")
    guest.ok("rmt_relay replay /dev/rmtrace-port-replay >/dev/null 2>&1 &")
    plan = _plan(capture, repeat, streams)
    model, model_records = _run(plan, schedule, f"model:{policy}", str(tmp_path / "model.trace"))
    kernel, kernel_records = _run(plan, schedule, f"kmod:{guest.sockets['replay']}", str(tmp_path / "kmod.trace"))
    verdicts = [(c.client.id, c.verdict.value, c.at.index if c.at else None, c.chain, c.diverged)
                for c in kernel.clients]
    assert verdicts == [(c.client.id, c.verdict.value, c.at.index if c.at else None, c.chain, c.diverged)
                        for c in model.clients]
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
    guest.stop("rmt_relay replay")
    assert not BAD_LOG.search(kernel_log(guest))
