"""Statuses that depend on other clients, judged across the clients that overlap (the tables' ``across``).

RELEASE_COMPUTE_MODE_RESERVATION answers NV_ERR_STATE_IN_USE to whichever of two
CUDA processes at once releases first.  The capture shim's stand-in driver
(tests/c/fakedrv.c, strict mode, ``$FAKEDRV_RESERVATIONS``) counts reservations
across its processes the same way, so these replays go through the real
``--against nvidia`` target and real client processes, without a GPU.  Under a
schedule where the clients overlap, the call is judged by the multiset of the
clients' statuses; alone it is judged exactly; a wrong multiset diverges either
way round, with ``--oracle TRACE`` and ``--oracle nvidia`` alike.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from rmtrace.decoders.profiles.loader import load_profile
from rmtrace.decoders.profiles.safety import parse_tables
from rmtrace.replayer.oracle import RecordingOracle, TargetOracle, TraceOracle
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.report import table
from rmtrace.replayer.runner import Verdict, replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target
from rmtrace.replayer.targets.nvidia import NvidiaTarget

from rmtrace.record import Buffer, Role, Source, SysOp, When
from tests.capture_support import make_device_dir
from tests.cuda_traffic import PROFILE, Process, build, nr, write_trace

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stand-in driver")

C_DIR = Path(__file__).resolve().parent / "c"
ACQUIRE, RELEASE = 0x20800145, 0x20800146  # NV2080_CTRL_CMD_GPU_0x45 / 0x46: no params
OK, IN_USE = 0, PROFILE.lookup("status", "NV_ERR_STATE_IN_USE")
DEVICE, SUBDEVICE = 0x5C000001, 0x5C000002
TIMEOUT_NS = 30_000_000_000
"""Generous: a client waits in its acquire until its peer's process has started (on a loaded machine)."""
RELEASE_NAME = "RM_CONTROL(NV2080_CTRL_CMD_GPU_0x46)"


def control(p: Process, h_client: int, cmd: int, status: int = OK) -> None:
    """An RM_CONTROL with no params on the subdevice, as libcuda sends the reservation controls."""
    args = dict(hClient=h_client, hObject=SUBDEVICE, cmd=cmd)
    p._call(Source.RM, nr("escapes", "NV_ESC_RM_CONTROL"), 3,
            [Buffer(Role.ARG, When.BEFORE, build("NVOS54_PARAMETERS", **args))],
            [Buffer(Role.ARG, When.AFTER, build("NVOS54_PARAMETERS", status=status, **args))])


def reserving(pid: int, t0: int, h_client: int, release: int = OK) -> Process:
    """A process that takes the compute-mode reservation, releases it (answered ``release``) and exits."""
    p = Process(pid, t0)
    p.sys(SysOp.EXEC, path="/opt/reserver", argv=("/opt/reserver",))
    p.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl", ret=3)
    p.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", processID=pid)
    exit_ = p.records[-1]  # RM hands out the client's handle in hObjectNew (NVOS21 bytes 8..12), hRoot stays 0
    arg = exit_.buffer(Role.ARG).data
    p.records[-1] = replace(exit_, buffers=(replace(exit_.buffer(Role.ARG), data=arg[:8] + h_client.to_bytes(4, "little")
                                                    + arg[12:]),) + exit_.buffers[1:])
    p.alloc(3, h_client, h_client, DEVICE, "NV01_DEVICE_0")
    p.alloc(3, h_client, DEVICE, SUBDEVICE, "NV20_SUBDEVICE_0")
    control(p, h_client, ACQUIRE)
    control(p, h_client, RELEASE, release)
    p.free(3, h_client, h_client, h_client)
    p.sys(SysOp.CLOSE, fd=3)
    p.sys(SysOp.EXIT, ret=0)
    return p


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("across")
    fakedrv = root / "fakedrv.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(fakedrv), str(C_DIR / "fakedrv.c"), "-ldl"],
                   check=True)
    return {
        "fakedrv": fakedrv, "devdir": make_device_dir(root / "dev"),
        # one process recorded alone: its release answered NV_OK
        "alone": write_trace(str(root / "alone.trace"), [reserving(700, 1_000_000_000, 0xC1D00001)]),
        # two at once, as cuda-streams-2-together.trace has them: the first to release got IN_USE
        "together": write_trace(str(root / "together.trace"), [
            reserving(701, 1_000_000_000, 0xC1D00001, release=IN_USE),
            reserving(702, 1_000_010_000, 0xC1D00002)]),
        # the same two the other way round
        "together-swapped": write_trace(str(root / "swapped.trace"), [
            reserving(701, 1_000_000_000, 0xC1D00001),
            reserving(702, 1_000_010_000, 0xC1D00002, release=IN_USE)]),
    }


def run(world, monkeypatch, tmp_path, trace, schedule, *, repeat=1, oracle="recording", against="nvidia",
        reservations=True, held=0, peers=2):
    """Replay ``trace`` over the stand-in driver; ``held`` reservations are held outside the replay, and
    with ``peers`` every acquire waits until that many are held (the clients surely overlap)."""
    monkeypatch.setenv("RMTRACE_TEST_DEVICE_DIR", str(world["devdir"]))
    monkeypatch.setenv("LD_PRELOAD", str(world["fakedrv"]))
    monkeypatch.setenv("FAKEDRV_STRICT", "1")
    counter = tmp_path / "reservations"
    counter.write_bytes(held.to_bytes(4, "little") + held.to_bytes(4, "little"))  # {held, acquired ever}
    for key, value in (("FAKEDRV_RESERVATIONS", str(counter) if reservations else None),
                       ("FAKEDRV_RESERVATION_PEERS", str(peers + held) if peers else None)):
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    plan = build_plan(world[trace], driver=PROFILE.version).repeat(repeat)
    judge = {"recording": RecordingOracle, "nvidia": lambda p: TargetOracle(NvidiaTarget(p), p)}.get(
        oracle, lambda p: TraceOracle(world[oracle], p))(plan)
    result = replay(plan, Schedule.parse(schedule), make_target(against, plan), timeout_ns=TIMEOUT_NS, oracle=judge)
    return result, "\n".join([table(result), *result.notes])


def releases(result):
    return [c.differences for c in result.clients if c.at is not None and c.at.name == RELEASE_NAME]


def test_the_table_names_the_call_and_says_why(world):
    raw = {"across": {"ctrl:0x20800146": {"name": "NV2080_CTRL_CMD_GPU_0x46", "reason": "other clients"},
                      "ctrl:0x2080200a": {"name": "NV2080_CTRL_CMD_GPU_0x46", "reason": "renumbered"}}}
    tables = parse_tables(raw, load_profile(PROFILE.version))
    assert list(tables.across) == ["ctrl:0x20800146"]
    assert "across ctrl:0x2080200a was written for NV2080_CTRL_CMD_GPU_0x46" in tables.dropped[0]


@pytest.mark.parametrize("oracle", ["together", "together-swapped"])
def test_two_at_once_match_an_oracle_of_two_at_once_whichever_releases_first(world, monkeypatch, tmp_path, oracle):
    result, text = run(world, monkeypatch, tmp_path, "alone", "concurrent", repeat=2, oracle=oracle)
    assert [c.verdict for c in result.clients] == [Verdict.GREEN] * 2, text
    assert all(c.across == 1 for c in result.clients) and "1 judged across clients" in text
    assert f"{RELEASE_NAME} of c1, c2:" in text and "NV_ERR_STATE_IN_USE" in text and ": the same" in text


def test_recorded_together_replays_green_in_any_order(world, monkeypatch, tmp_path):
    result, text = run(world, monkeypatch, tmp_path, "together", "concurrent")
    assert [c.verdict for c in result.clients] == [Verdict.GREEN] * 2, text
    assert all(c.across == 1 for c in result.clients)


@pytest.mark.parametrize("how", ["both NV_OK", "both IN_USE"])
def test_a_wrong_multiset_diverges(world, monkeypatch, tmp_path, how):
    """Both answered OK (no reservation counted), or both IN_USE (a third client holds one), where the oracle
    had one of each: a divergence naming the clients it was judged across."""
    kwargs = {"reservations": False, "peers": 0} if how == "both NV_OK" else {"held": 1}
    result, text = run(world, monkeypatch, tmp_path, "alone", "concurrent", repeat=2, oracle="together", **kwargs)
    got = "NV_OK (c1), NV_OK (c2)" if how == "both NV_OK" else \
        "NV_ERR_STATE_IN_USE (c1), NV_ERR_STATE_IN_USE (c2)"
    diverged = releases(result)
    assert len(diverged) == 1, text  # one status too many: the client the oracle gave the other one
    (difference,) = diverged[0]
    assert (difference.what, difference.got) == ("status (judged across c1, c2)", got)
    assert difference.expected == "NV_OK, NV_ERR_STATE_IN_USE"
    assert ": differ" in text


def test_two_at_once_against_a_recording_of_one_alone_diverge(world, monkeypatch, tmp_path):
    """The recording of the program alone says NV_OK for both: the one that got IN_USE diverges."""
    result, text = run(world, monkeypatch, tmp_path, "alone", "concurrent", repeat=2)
    (diverged,) = [c for c in result.clients if c.verdict is Verdict.DIVERGED]
    assert diverged.at.name == RELEASE_NAME and diverged.differences[0].what == "status (judged across c1, c2)"
    assert "NV_ERR_STATE_IN_USE" in diverged.differences[0].got and diverged.differences[0].expected == "NV_OK, NV_OK"


def test_alone_it_is_judged_exactly(world, monkeypatch, tmp_path):
    """One after another nobody overlaps: each release is judged against its own client's answer."""
    result, text = run(world, monkeypatch, tmp_path, "alone", "sequential", repeat=2, oracle="together", peers=0)
    first, second = result.clients
    assert first.verdict is Verdict.DIVERGED and second.verdict is Verdict.GREEN, text
    assert [str(d) for d in first.differences] == ["status NV_OK, expected NV_ERR_STATE_IN_USE"]
    assert first.across == second.across == 0 and "judged across" not in text
    result, text = run(world, monkeypatch, tmp_path, "alone", "sequential", repeat=2, peers=0)
    assert [c.verdict for c in result.clients] == [Verdict.GREEN] * 2 and "judged across" not in text


def test_the_same_rule_judges_against_the_live_driver(world, monkeypatch, tmp_path):
    """``--oracle nvidia``: the recorded answers (one of each) match bare metal's two at once; two answers
    of NV_OK (a host service that does not model the reservation) do not."""
    # (no barrier: the live oracle is asked in lockstep, one answer at a time, c1 and c2 taking turns)
    result, text = run(world, monkeypatch, tmp_path, "together", "concurrent", oracle="nvidia", against="recorded",
                       peers=0)
    assert [c.verdict for c in result.clients] == [Verdict.GREEN] * 2, text
    assert "0 status mismatches" in text and ": the same" in text
    result, text = run(world, monkeypatch, tmp_path, "alone", "concurrent", repeat=2, oracle="nvidia",
                       against="recorded", peers=0)
    assert len(releases(result)) == 1 and "1 status mismatches" in text, text
    assert "the target says NV_OK (c1), NV_OK (c2), nvidia says NV_OK, NV_ERR_STATE_IN_USE" in text
