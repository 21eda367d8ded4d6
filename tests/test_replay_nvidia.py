"""``--against nvidia`` through the capture shim's stand-in driver (tests/c/fakedrv.c, strict mode).

A libcuda-like program (tests/c/nvclient.c) is recorded with the real shim
over the fake driver on one "board" (a UUID, a client-handle counter); the
recording is replayed on another (another UUID, another counter), so every
remapping is needed for a green replay: RM-assigned client handles, fds
inside arguments and params, the mapping cookie, the board's UUID, VA the
recorded process had reserved, OS-descriptor memory.  The fake driver's
ledger says what reached it and what it freed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rmtrace.decoders.profiles.loader import load_profile
from rmtrace.decoders.profiles.safety import parse_tables, replay_tables
from rmtrace.replayer.oracle import Judge, RecordingOracle, TraceOracle, make_oracle
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.runner import Verdict, replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target
from rmtrace.replayer.targets.nvidia import NvidiaTarget
from rmtrace.replayer.targets.nvidia.compile import Compiler

from rmtrace.record import MarkOp, Phase, Role, Source, SysOp, decode_record
from rmtrace.semantics import RefKind
from rmtrace.trace import TraceReader, TraceWriter
from tests.capture_support import build_programs, fakedrv_environment, make_device_dir

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the test programs")

C_DIR = Path(__file__).resolve().parent / "c"
SUPPORT = Path(__file__).resolve().parent / "capture_support.py"
PROFILE = "580.142"
RECORDED_BOARD = {"FAKEDRV_UUID": "00112233445566778899aabbccddeeff", "FAKEDRV_HANDLE_BASE": "c1d00000"}
REPLAY_BOARD = {"FAKEDRV_UUID": "ffeeddccbbaa99887766554433221100", "FAKEDRV_HANDLE_BASE": "caf00000"}
TIMEOUT_NS = 5_000_000_000


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The programs, a device dir, and recordings of nvclient on the recorded board."""
    root = tmp_path_factory.mktemp("replay-nvidia")
    programs = build_programs(root)
    client = root / "nvclient"
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(client), str(C_DIR / "nvclient.c"), "-lpthread"], check=True)
    devdir = make_device_dir(root / "dev")
    (devdir / "nvidia-caps").mkdir()
    (devdir / "nvidia-caps" / "nvidia-cap1").write_bytes(b"")
    w = {"root": root, "programs": programs, "fakedrv": programs["fakedrv"], "devdir": devdir}
    w["full"] = record(w, root / "full.trace", client, "unsafe", "leak")
    return w


def env(w, board, ledger, **extra):
    out = dict(os.environ, RMTRACE_TEST_DEVICE_DIR=str(w["devdir"]), LD_PRELOAD=str(w["fakedrv"]), FAKEDRV_STRICT="1",
               FAKEDRV_LEDGER=str(ledger), **board)
    out.update({k: str(v) for k, v in extra.items()})
    return out


def record(w, out: Path, *command) -> Path:
    """Record ``command`` with the capture shim (its test build, the real 580.142 profile) over the fake driver."""
    raw = out.with_suffix(".raw.trace")
    recording = fakedrv_environment(w["programs"], w["devdir"], env(w, RECORDED_BOARD, out.with_suffix(".ledger")))
    subprocess.run([sys.executable, str(SUPPORT), "-o", str(raw), "--", *map(str, command)], check=True, timeout=120,
                   env=recording)
    # The session model starts a client at its first open of /dev/nvidia*; the shim recorded the test
    # device dir's paths: write them as a machine with the driver has them (the replay maps node names
    # to RMTRACE_TEST_DEVICE_DIR again).
    prefix = str(w["devdir"]).encode() + b"/"
    with TraceReader(raw) as reader, TraceWriter(out, dict(reader.meta)) as writer:
        for rec in reader:
            if rec.source == Source.SYS and rec.op == SysOp.OPEN:
                rec = replace(rec, buffers=tuple(replace(b, data=b.data.replace(prefix, b"/dev/"))
                                                 if b.role == Role.PATH else b for b in rec.buffers))
            writer.write(rec)
    return out


def ledger_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def replayed(w, monkeypatch, tmp_path, trace, schedule="recorded", repeat=1, spec="nvidia", oracle=None, **extra):
    """Replay in this process; the client processes inherit the fake driver through the environment."""
    ledger = tmp_path / "replay.ledger"
    for key, value in env(w, REPLAY_BOARD, ledger, **extra).items():
        monkeypatch.setenv(key, value)
    plan = build_plan(trace, driver=PROFILE).repeat(repeat)
    target = make_target(spec, plan)
    out = tmp_path / "out.replay.trace"
    result = replay(plan, Schedule.parse(schedule), target, timeout_ns=TIMEOUT_NS, output=str(out),
                    oracle=oracle(plan) if oracle else RecordingOracle(plan))
    return result, target, ledger_lines(ledger), out


def freed_everything(lines: list[list[str]], pids: set[str]) -> bool:
    """Every RM client the replay's processes allocated was freed (by a free, a close or their exit)."""
    clients = {(l[1], l[2]) for l in lines if l[0] == "alloc" and l[2] == l[3] and l[1] in pids}
    gone = {(l[1], l[2]) for l in lines if l[0] == "free" and l[2] == l[3]}
    gone |= {(l[1], l[3]) for l in lines if l[0] == "closefree"} | {(l[1], l[2]) for l in lines if l[0] == "exitfree"}
    return bool(clients) and clients <= gone


# --------------------------------------------------------------------------- remapping


@pytest.mark.parametrize("schedule,repeat", [("sequential", 3), ("concurrent", 2)])
def test_a_recording_on_one_board_replays_green_on_another(world, monkeypatch, tmp_path, schedule, repeat):
    result, target, lines, _out = replayed(world, monkeypatch, tmp_path, world["full"], schedule, repeat)
    assert [c.verdict for c in result.clients] == [Verdict.GREEN] * repeat, [c.summary() for c in result.clients]
    tables = target.client_tables()
    pids = {str(t.pid) for t in tables}
    assert len(pids) == repeat  # a process of its own per replayed client
    for t in tables:
        maps = t.maps
        assert maps["handles"] == {"0xc1d00000": "0xcaf00000", "0xc1d00001": "0xcaf00001"}  # RM's counter
        assert maps["gpu_uuids"] == {RECORDED_BOARD["FAKEDRV_UUID"]: REPLAY_BOARD["FAKEDRV_UUID"]}
        assert list(maps["cookies"].values()) == ["0xcaf00002000"]  # MAP_MEMORY's, given back to UNMAP
        assert maps["reserved_ranges"] == 2  # the UVM range's VA, the OS-descriptor pages
        assert t.replayed == t.calls - 4 and t.share == pytest.approx(100 * 31 / 35)
    # nothing the safety table does not know reached the driver, and every client was freed
    assert not [l for l in lines if l[0] == "unsafe"]
    assert freed_everything(lines, pids)


def test_every_skip_has_its_reason_and_dependents_name_the_skipped_message(world, monkeypatch, tmp_path):
    result, target, _lines, out = replayed(world, monkeypatch, tmp_path, world["full"])
    skips = {n: why for n, _name, why, _rm in target.client_tables()[0].skipped}
    assert all(skips.values())
    boost, session, query, free = sorted(skips)
    assert "PERF_BOOST" in skips[boost] and "clocks" in skips[boost]
    assert skips[session].startswith("unsafe: NV_ESC_RM_ALLOC of AMPERE_SMC_CONFIG_SESSION") and "MIG" in skips[session]
    assert "not in the safety table" in skips[query]
    assert skips[free] == f"depends on message {session} (RM_ALLOC(AMPERE_SMC_CONFIG_SESSION)), skipped: " \
                         f"{skips[session]}"
    assert [i + 1 for i, _why in result.clients[0].skipped] == sorted(skips)
    # the replay's trace says so where the call would be, and holds the per-client table
    with TraceReader(out) as reader:
        notes = [json.loads(r.buffer(Role.TEXT).data) for r in reader if r.source == Source.MARK
                 and r.op == MarkOp.NOTE]
    assert sorted(n["message"] for n in notes if "skipped" in n) == sorted(skips)
    table = next(n["client_table"] for n in notes if "client_table" in n)
    assert table["skipped"] == 4 and table["teardown_freed"] == [{"client": "0xcaf00000", "ret": 0, "status": 0}]


def test_what_uses_an_object_whose_call_diverged_is_skipped_naming_it(world, monkeypatch, tmp_path):
    """At run time too a status that differs stays the only one: the recording says an allocation failed,
    the driver made it; every message that uses its handle is skipped, naming it, and nothing else differs."""
    for key, value in env(world, REPLAY_BOARD, tmp_path / "replay.ledger").items():
        monkeypatch.setenv(key, value)
    plan = build_plan(world["full"], driver=PROFILE)
    messages = plan.clients[0].messages
    alloc = next(m for m in messages if m.name == "RM_ALLOC(NV01_MEMORY_SYSTEM)")
    alloc.expect = replace(alloc.expect, status=plan.semantics.status_code("NV_ERR_NO_MEMORY"))
    users = [m.index + 1 for m in messages if any(ref in alloc.defines for ref in m.uses)]
    target = make_target("nvidia", plan)
    result = replay(plan, Schedule.parse("recorded"), target, timeout_ns=TIMEOUT_NS, oracle=RecordingOracle(plan))
    client = result.clients[0]
    assert client.verdict is Verdict.DIVERGED and client.at is alloc and client.diverged == 1, client.summary()
    assert [str(d) for d in client.differences] == ["status NV_OK, expected NV_ERR_NO_MEMORY"]
    skips = {n: why for n, _name, why, _rm in target.client_tables()[0].skipped}
    assert users and all(skips[n] == f"depends on message {alloc.index + 1} ({alloc.name}), which diverged"
                         for n in users)


def test_allow_unsafe_sends_what_the_table_does_not_know(world, monkeypatch, tmp_path):
    _result, target, lines, _out = replayed(world, monkeypatch, tmp_path, world["full"], spec="nvidia:allow-unsafe")
    pid = str(target.client_tables()[0].pid)
    assert ["unsafe", pid, "0x2080200a"] in lines
    assert {name for _n, name, _why in target.client_tables()[0].unsafe_sent} >= {
        "RM_CONTROL(NV2080_CTRL_CMD_PERF_BOOST)", "RM_ALLOC(AMPERE_SMC_CONFIG_SESSION)"}


def test_answers_are_written_back_in_the_recordings_terms(world, monkeypatch, tmp_path):
    _result, target, _lines, out = replayed(world, monkeypatch, tmp_path, world["full"])
    with TraceReader(out) as reader:
        roots = [r for r in reader if r.source == Source.RM and r.phase == Phase.EXIT and r.op == 0x2B][:2]
    handles = [int.from_bytes(r.buffer(Role.ARG).data[8:12], "little") for r in roots]
    assert handles == [0xC1D00000, 0xC1D00001]  # RM gave 0xcaf0000x; the trace speaks the recording's handles


def test_a_field_that_differs_is_named_with_both_values_and_masks_hide_board_identity(world):
    plan = build_plan(world["full"], driver=PROFILE)
    judge = Judge(plan.semantics, replay_tables(plan.semantics.profile))
    gid = next(m for m in plan.clients[0].messages if "GET_GID_INFO" in m.name)
    classes = next(m for m in plan.clients[0].messages if "GET_CLASSLIST" in m.name)
    for msg, offset, path in ((classes, 0, "params.numClasses"), (gid, 20, None)):
        reply = decode_record(msg.reply)
        params = bytearray(reply.buffer(Role.PARAMS).data)
        params[offset] ^= 0xFF
        changed = replace(reply, buffers=tuple(replace(b, data=bytes(params)) if b.role == Role.PARAMS else b
                                               for b in reply.buffers))
        diffs = judge.field_differences(msg.request, msg.reply, changed.encode())
        if path is None:  # the UUID in GET_GID_INFO is board identity: masked, with the table's reason
            assert diffs == []
        else:
            assert [d.what for d in diffs] == [path]
            assert str(diffs[0]).startswith(f"{path} ") and "expected 5" in str(diffs[0])


# --------------------------------------------------------------------------- cleanup


def test_a_replay_that_fails_midway_frees_what_it_allocated(world, monkeypatch, tmp_path):
    calls = {"n": 0}
    real_submit = NvidiaTarget.submit

    def failing_submit(self, ticket, client, msg):
        # counted in messages sent, which a replay makes the same number of on any machine (how often the
        # runner waits depends on how fast the driver answers)
        calls["n"] += 1
        if calls["n"] == 25:  # of its 51
            raise RuntimeError("the replay broke")
        return real_submit(self, ticket, client, msg)

    monkeypatch.setattr(NvidiaTarget, "submit", failing_submit)
    with pytest.raises(RuntimeError):
        replayed(world, monkeypatch, tmp_path, world["full"])
    lines = ledger_lines(tmp_path / "replay.ledger")
    pids = {l[1] for l in lines if l[0] == "alloc"}
    assert pids and freed_everything(lines, pids)
    assert [l for l in lines if l[0] == "free" and l[2] == l[3] and l[2] == "0xcaf00000"]  # by the teardown


def _cli(w, tmp_path, *args, **extra):
    ledger = tmp_path / "cli.ledger"
    return subprocess.Popen([sys.executable, "-m", "rmtrace.cli.main", "replay", *map(str, args)],
                            env=env(w, REPLAY_BOARD, ledger, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path), ledger


def _blocked_pid(note: Path, proc: subprocess.Popen) -> int:
    until = time.monotonic() + 60
    while not note.exists() or not note.read_text().strip():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < until, "the replayed call never reached the driver"
        time.sleep(0.05)
    return int(note.read_text())


def test_ctrl_c_tears_every_client_down(world, tmp_path):
    note = tmp_path / "blocked"
    proc, ledger = _cli(world, tmp_path, world["full"], "--driver", PROFILE, "--against", "nvidia", "-o",
                        tmp_path / "int.trace", FAKEDRV_BLOCK_REQ="c020462a", FAKEDRV_BLOCK_NOTE=note)
    # the first RM_CONTROL blocks: a client process is inside the driver when Ctrl-C comes
    blocked = _blocked_pid(note, proc)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = ledger_lines(ledger)
    assert ["free", str(blocked), "0xcaf00000", "0xcaf00000"] in lines  # the teardown's RM_FREE
    with pytest.raises(ProcessLookupError):
        os.kill(blocked, 0)
    with TraceReader(tmp_path / "int.trace") as reader:
        assert reader.recovery.complete


def test_a_killed_client_is_reported_and_the_others_go_on(world, tmp_path):
    note = tmp_path / "blocked"
    proc, _ledger = _cli(world, tmp_path, world["full"], "--driver", PROFILE, "--against", "nvidia", "--repeat", "2",
                         "--schedule", "sequential", "-o", tmp_path / "kill.trace", FAKEDRV_BLOCK_REQ="c020462a",
                         FAKEDRV_BLOCK_NOTE=note)
    os.kill(_blocked_pid(note, proc), signal.SIGKILL)
    note.write_text("")  # the second client blocks too: kill it as well once it does
    os.kill(_blocked_pid(note, proc), signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert out.count("diverged at message") == 2 and "errno 3, expected 0" in out
    assert out.count("; process killed by SIGKILL") == 2, out
    assert out.count("x: its replaying process killed by SIGKILL") == 2, out  # what came after, skipped


# --------------------------------------------------------------------------- oracles


def test_a_trace_as_oracle_and_the_driver_as_oracle(world, monkeypatch, tmp_path):
    _result, _target, _lines, nvidia_trace = replayed(world, monkeypatch, tmp_path, world["full"])
    kept = tmp_path / "nvidia.replay.trace"
    nvidia_trace.rename(kept)
    # the model judged against bare metal's (here: the fake's) answers, from the trace and live
    for oracle in (lambda plan: TraceOracle(str(kept), plan), lambda plan: make_oracle("nvidia", plan)):
        result, _t, _l, _o = replayed(world, monkeypatch, tmp_path, world["full"], spec="model", oracle=oracle)
        assert [c.verdict for c in result.clients] == [Verdict.GREEN], [c.summary() for c in result.clients]


# --------------------------------------------------------------------------- the tables and the captures


def test_the_tables_give_every_entry_a_reason_and_drop_renumbered_ones():
    profile = load_profile(PROFILE)
    tables = replay_tables(profile)
    assert not tables.dropped
    for rules in (tables.escapes, tables.classes, tables.controls, tables.uvm):
        assert rules and all(r.reason for r in rules.values())
    raw = {"controls": {"0x2080200a": {"name": "NV2080_CTRL_CMD_GPU_GET_INFO_V2", "safe": True, "reason": "q"}}}
    moved = parse_tables(raw, profile)
    assert 0x2080200A not in moved.controls and "names it NV2080_CTRL_CMD_PERF_BOOST" in moved.dropped[0]


@pytest.mark.parametrize("name,least", [("cuda-streams", 95.0), ("torch-one-kernel", 95.0), ("nvidia-smi-q", 80.0)])
def test_the_committed_captures_compile_with_their_share_replayable(repo_root, name, least):
    plan = build_plan(str(repo_root / "captures" / f"{name}.trace"))
    program = Compiler(plan.semantics, replay_tables(plan.semantics.profile)).compile(plan.clients[0].messages)
    messages = plan.clients[0].messages
    rm_uvm = {m.index for m in messages if decode_record(m.request).source in (Source.RM, Source.UVM)}
    skipped = [i for i in program.skipped if i in rm_uvm]
    assert 100 * (len(rm_uvm) - len(skipped)) / len(rm_uvm) >= least
    assert all(program.skipped.values())
    assert program.reservations or name == "nvidia-smi-q"


def test_what_the_capture_does_not_show_is_rebuilt_from_what_it_does(repo_root):
    """A semaphore pool's CPU mapping goes before its UVM_FREE; --streams lanes get USERD room of their own."""
    plan = build_plan(str(repo_root / "captures" / "cuda-streams.trace")).streams(9)
    compiler = Compiler(plan.semantics, replay_tables(plan.semantics.profile))
    messages = plan.clients[0].messages
    program = compiler.compile(messages)
    drops = [(m.name, a.call.drop) for m, a in zip(messages, program.actions) if a.call is not None and a.call.drop]
    assert drops == [("UVM_FREE", [(0x204A00000, 0x200000)])]  # the pool UVM_ALLOC_SEMAPHORE_POOL made and mmap mapped
    (memory, (span, fits)), = compiler._room.items()
    assert (memory, span, fits) == (0x5C000017, 20 * 0x3000, 7)  # 20 channels of 12 KiB in a 2 MiB buffer: 7 more lanes
    placed = {}
    for m, a in zip(messages, program.actions):
        if m.name == "RM_ALLOC(HOPPER_CHANNEL_GPFIFO_A)" and m.lane in (0, 3) and a.call is not None:
            placed.setdefault(m.lane, []).append(int.from_bytes(a.call.bufs[1][64:72], "little"))  # userdOffset[0]
    assert [b - a for a, b in zip(placed[0], placed[3])] == [3 * span] * 20
    lane8 = {program.skipped.get(m.index) for m in messages if m.lane == 8 and m.name.endswith("GPFIFO_A)")}
    assert lane8 == {"lane 8 does not fit in USERD memory 0x5c000017 beside the recorded channels"}
    # each lane's compute channels register with UVM a range of their own, 4 GiB per lane further, reserved;
    # copy-engine channels name none (base and length 0) and stay as recorded
    registered: dict[int, set[tuple[int, int]]] = {}
    for m, a in zip(messages, program.actions):
        if m.name == "UVM_REGISTER_CHANNEL" and m.lane in (0, 3) and a.call is not None:
            arg = a.call.bufs[0]
            base, length = int.from_bytes(arg[32:40], "little"), int.from_bytes(arg[40:48], "little")
            registered.setdefault(m.lane, set()).add((base, length))
            assert [(o, raw) for _b, o, raw in a.call.restore] == ([(32, (base - (3 << 32)).to_bytes(8, "little"))]
                                                                   if m.lane and length else [])
    assert registered == {0: {(0x204000000, 0x52F000), (0, 0)}, 3: {(0x204000000 + (3 << 32), 0x52F000), (0, 0)}}
    assert any(lo <= 0x304000000 and 0x304000000 + 0x52F000 <= lo + n for lo, n, _rw in program.reservations)
    # had the recording used memory where a lane's range goes, the driver would refuse it: skipped instead
    lane1 = [(m.index, 0x304000000, 0x52F000) for m in messages if m.lane == 1 and m.name == "UVM_REGISTER_CHANNEL"
             and program.actions[m.index].call.restore]
    actions = list(program.actions)
    Compiler._lanes_apart(messages, actions, lane1, [(0x304400000, 0x200000, False)])
    assert len(lane1) == 8 and {actions[i].reason for i, _b, _n in lane1} == \
        {"lane 1's range 0x304000000+0x52f000 overlaps 0x304400000+0x200000, which the recording used"}


def test_an_unregistration_depends_on_its_registration(repo_root):
    """UVM_UNREGISTER_CHANNEL undoes its UVM_REGISTER_CHANNEL (the semantic layer: one defines the channel's
    registration, the other uses it): where the registration is skipped, so is the unregistration."""
    plan = build_plan(str(repo_root / "captures" / "cuda-streams.trace"))
    messages = plan.clients[0].messages
    register = next(m for m in messages if m.name == "UVM_REGISTER_CHANNEL")
    (channel,) = [r for r in register.defines if r.kind is RefKind.UVM_CHANNEL]
    unregister = next(m for m in messages if m.name == "UVM_UNREGISTER_CHANNEL" and channel in m.uses)
    assert register.index in unregister.deps
    tables = replay_tables(plan.semantics.profile)
    nr = plan.semantics.profile.lookup("uvm", "UVM_REGISTER_CHANNEL")
    tables = replace(tables, uvm={**tables.uvm, nr: replace(tables.uvm[nr], safe=False, reason="left out here")})
    program = Compiler(plan.semantics, tables).compile(messages)
    assert program.skipped[unregister.index] == \
        f"depends on message {register.index + 1} (UVM_REGISTER_CHANNEL), skipped: unsafe: UVM_REGISTER_CHANNEL: left out here"


@pytest.mark.parametrize("how", [["--against", "nvidia"], ["--against", "model:fixed", "--oracle", "nvidia"]])
def test_no_driver_is_an_error_that_leaves_no_output(tmp_path, how):
    """Without /dev/nvidiactl nothing can be replayed or judged: an error (2) naming it, not a divergence at the
    first open, nor an oracle that judged nothing and said green, and no half-made replay trace."""
    out = tmp_path / "out.trace"
    env = {**os.environ, "RMTRACE_TEST_DEVICE_DIR": str(tmp_path)}  # a device folder with no NVIDIA nodes in it
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "replay", "cuda-streams", *how, "-o", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"no NVIDIA driver on this machine ({tmp_path}/nvidiactl is absent)" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
