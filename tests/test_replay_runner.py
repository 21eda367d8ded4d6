"""Replays: the seed's validation plan against the model (legacy wedges, fixed green in every schedule),
chaos seeds, self-replay, divergences, the watchdog, and the replay's own trace."""

from __future__ import annotations

import json

import pytest
from rmtrace.decoders import decoders_for
from rmtrace.replayer.chains import attach_wedge_chains
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.report import table
from rmtrace.replayer.runner import Verdict, replay
from rmtrace.replayer.schedules import Mode, Schedule
from rmtrace.replayer.targets import make_target
from rmtrace.replayer.targets.recorded import RecordedTarget

from rmtrace import captures
from rmtrace.analysis.diff import first_divergence
from rmtrace.analysis.wedges import find_wedges
from rmtrace.exitcodes import ExitCode
from rmtrace.record import MarkOp, Phase, RecordFlag, Role, Source, SysOp
from rmtrace.session import load_session
from rmtrace.trace import TraceReader
from tests.cuda_traffic import Process, cuda_client, write_trace


def shipped(name: str) -> str:
    return str(captures.path(name))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("runner") / "cuda.trace"
    return build_plan(write_trace(str(path), [cuda_client(1447)], command=["/opt/victory_mail"]))


def run(plan, schedule, against, **kwargs):
    return replay(plan, Schedule.parse(schedule), make_target(against, plan), **kwargs)


def verdicts(result):
    return [(c.verdict, c.at.name if c.at else None) for c in result.clients]


def assert_seed_story(result):
    """Client 1 green, client 2 wedged in its registration exchange, client 3 at UVM_REGISTER_GPU on the lock."""
    c1, c2, c3 = result.clients
    assert c1.verdict is Verdict.GREEN
    assert (c2.verdict, c2.at.name, c3.verdict, c3.at.name) == (Verdict.WEDGED, "UVM_REGISTER_GPU",
                                                                Verdict.WEDGED, "UVM_REGISTER_GPU")
    assert "holding the UVM global lock, in its registration exchange" in c2.chain[0]
    assert any("stale" in line for line in c2.chain) and any("drain-held" in line for line in c2.chain)
    # c3 names the holder and points at its chain rather than repeating it
    assert c3.chain == [c3.chain[0]] and "waiting for the UVM global lock, held by c2" in c3.chain[0]
    assert c3.chain[0].endswith("which is blocked itself: see its own chain")
    assert result.exit_status == ExitCode.WEDGED
    assert result.counters["faked"] == 0 and result.counters["drain_held"] > 0


def test_legacy_sequential_three_clients_is_the_seeds_wedge(synthetic):
    assert_seed_story(run(synthetic.repeat(3), "sequential", "model:legacy"))


@pytest.mark.parametrize("schedule, shape", [("sequential", "repeat3"), ("concurrent", "repeat2"),
                                             ("simultaneous", "streams4"), ("recorded", "repeat2")])
def test_fixed_is_green_in_every_schedule(synthetic, schedule, shape):
    plan = {"repeat3": synthetic.repeat(3), "repeat2": synthetic.repeat(2), "streams4": synthetic.streams(4)}[shape]
    result = run(plan, schedule, "model:fixed")
    assert all(c.verdict is Verdict.GREEN for c in result.clients), [c.summary() for c in result.clients]
    assert result.exit_status == 0 and sum(c.answered for c in result.clients) == plan.message_count


def test_fixed_sequential_degrades_drain_holds_to_faked_completions(synthetic):
    result = run(synthetic.repeat(3), "sequential", "model:fixed")
    assert result.counters["faked"] > 0 and result.counters["sessions"] == 3


def test_the_reverted_rearm_only_experiment_still_wedges(synthetic):
    result = run(synthetic.repeat(3), "sequential", "model:rearm-only")
    assert [v for v, _ in verdicts(result)] == [Verdict.GREEN, Verdict.WEDGED, Verdict.WEDGED]
    assert not any("spent" in line for line in result.clients[1].chain)


def test_legacy_concurrent_clients_collide_on_their_publications(synthetic):
    result = run(synthetic.repeat(2), "concurrent", "model:legacy")
    assert result.exit_status == ExitCode.WEDGED
    wedged = [c for c in result.clients if c.verdict is Verdict.WEDGED]
    assert wedged and "channel bring-up" in wedged[0].chain[0]


def test_chaos_fifty_seeds_green_on_fixed_and_reproducible_failures_on_legacy(synthetic):
    plan = synthetic.repeat(3)
    fixed = [run(plan, f"chaos:{seed}", "model:fixed") for seed in range(50)]
    assert all(r.exit_status == 0 for r in fixed), [str(r.schedule) for r in fixed if r.failed]
    legacy = [run(plan, f"chaos:{seed}", "model:legacy") for seed in range(50)]
    failing = [r for r in legacy if r.failed]
    assert failing
    for result in failing[:5]:
        again = run(plan, str(result.schedule), "model:legacy")
        assert verdicts(again) == verdicts(result)
        assert [c.chain for c in again.clients] == [c.chain for c in result.clients]
    orders = {tuple(c.at.index if c.at else -1 for c in r.clients) for r in legacy}
    assert len(orders) > 1, "chaos explored a single interleaving"


def test_self_replay_as_recorded_is_green_with_zero_divergences(synthetic):
    result = run(synthetic, "recorded", "recorded")
    assert result.exit_status == 0
    assert all(c.diverged == 0 and c.answered == len(c.client.messages) for c in result.clients)


def test_the_recorded_target_sees_a_different_answer(synthetic, tmp_path):
    """Replayed against another recording whose work-submit tokens differ: diverged, at the first token."""
    path = write_trace(str(tmp_path / "other.trace"), [cuda_client(1447, token_base=0x99)])
    result = replay(synthetic, Schedule(Mode.RECORDED), RecordedTarget(path, synthetic.semantics))
    (c1,) = result.clients
    assert c1.verdict is Verdict.DIVERGED and c1.diverged == 2 and result.exit_status == 1
    assert c1.at.name == "RM_CONTROL(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN)"
    assert str(c1.differences[0]) == "workSubmitToken 153, expected 16"


@pytest.mark.parametrize("late, status", [(False, "NV_ERR_OBJECT_NOT_FOUND"), (True, "NV_ERR_INVALID_CLIENT")])
def test_the_model_diverges_where_the_recording_claims_what_rm_would_refuse(tmp_path, late, status):
    """A recording (of a broken service, say) answering NV_OK to a control on an object that does not
    exist -- or on a client already freed -- diverges from the model at exactly that message."""
    proc = Process(1447, 1_000_000_000)
    proc.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl", ret=3)
    proc.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", assigned=0xC1D00001)
    if late:
        proc.free(3, 0xC1D00001, 0xC1D00001, 0xC1D00001)
    proc.control(3, 0xC1D00001, 0x5C0000EE, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", gpuInfoListSize=1)
    plan = build_plan(write_trace(str(tmp_path / "bad.trace"), [proc]))
    result = run(plan, "recorded", "model:fixed")
    (c1,) = result.clients
    assert c1.verdict is Verdict.DIVERGED and result.exit_status == 1
    assert c1.at.name == "RM_CONTROL(NV2080_CTRL_CMD_GPU_GET_INFO_V2)" and c1.at.index == len(c1.client.messages) - 1
    assert str(c1.differences[0]) == f"status {status}, expected NV_OK"


def test_the_replay_writes_a_trace_the_decoders_read_like_a_recording(synthetic, tmp_path):
    out = str(tmp_path / "replay.trace")
    result = run(synthetic.repeat(3), "sequential", "model:legacy", output=out)
    with TraceReader(out) as reader:
        records = list(reader)
        assert reader.meta["backend"] == "replay" and reader.meta["replay"]["target"] == "model:legacy"
        decoders = decoders_for(reader)
    times = [r.time_ns for r in records]
    assert times == sorted(times) and all(r.flags & RecordFlag.REPLAY for r in records)
    pids = {c.client.pid for c in result.clients}
    assert {r.pid for r in records if r.source in (Source.RM, Source.UVM)} == pids
    sema = [decoders.decode(r) for r in records if r.source == Source.SEMA]
    assert sema and all(d.known for d in sema)
    marks = [r for r in records if r.source == Source.MARK]
    verdict = {json.loads(r.buffer(Role.TEXT).data)["client"]: json.loads(r.buffer(Role.TEXT).data)
               for r in marks if r.op == MarkOp.VERDICT}
    assert [verdict[c]["verdict"] for c in ("c1", "c2", "c3")] == ["green", "wedged", "wedged"]
    assert verdict["c3"]["message"] == result.clients[2].at.index + 1 and verdict["c3"]["chain"]
    in_flight = [r for r in marks if r.op == MarkOp.IN_FLIGHT]
    assert sorted(r.pid for r in in_flight) == sorted(c.client.pid for c in result.clients[1:])
    assert marks[-1].op == MarkOp.STOP
    enters = {(r.pid, r.call_id) for r in records if r.phase == Phase.ENTER}
    exits = {(r.pid, r.call_id) for r in records if r.phase == Phase.EXIT}
    assert enters - exits == {(r.pid, r.call_id) for r in in_flight}


def test_the_recorded_schedule_sends_in_recorded_order(tmp_path):
    """Two clients whose calls interleave in the recording are sent in exactly that interleaving."""
    path = write_trace(str(tmp_path / "two.trace"),
                       [cuda_client(501), cuda_client(502, t0=1_000_007_000, h_client=0xC1D00002)])
    out = str(tmp_path / "out.trace")
    run(build_plan(path), "recorded", "recorded", output=out)
    with TraceReader(path) as rec, TraceReader(out) as rep:
        recorded = [(r.pid, r.call_id) for r in rec if r.phase == Phase.ENTER]
        replayed = [(r.pid, r.call_id) for r in rep if r.phase == Phase.ENTER]
    assert len({pid for pid, _ in recorded[:20]}) == 2 and replayed == recorded


def test_the_watchdog_bounds_real_time_waits(synthetic, tmp_path):
    """A unix: service that never answers: every client is wedged after --timeout, not hung on."""
    import socket
    import threading
    import time
    path = str(tmp_path / "mute.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    with pytest.raises(Exception, match="did not answer the replay hello"):
        from rmtrace.replayer.targets import unix
        unix.HELLO_TIMEOUT_S, saved = 0.3, unix.HELLO_TIMEOUT_S
        try:
            started = time.monotonic()
            run(synthetic, "sequential", f"unix:{path}", timeout_ns=200_000_000)
        finally:
            unix.HELLO_TIMEOUT_S = saved
    assert time.monotonic() - started < 5
    server.close()


@pytest.mark.parametrize("name", captures.shipped())
def test_real_captures_self_replay_green_and_fixed_green(name):
    plan = build_plan(shipped(name))
    assert run(plan, "recorded", "recorded").exit_status == 0
    assert run(plan, "recorded", "model:fixed").exit_status == 0


def test_real_capture_seed_validation_plan():
    plan = build_plan(shipped("cuda-streams"))
    assert_seed_story(run(plan.repeat(3), "sequential", "model:legacy"))
    for schedule, shaped in (("sequential", plan.repeat(3)), ("concurrent", plan.repeat(2)),
                             ("simultaneous", plan.streams(4))):
        assert run(shaped, schedule, "model:fixed").exit_status == 0, schedule
    sequential = build_plan(shipped("cuda-streams-3x-sequential.trace"))
    assert_seed_story(run(sequential, "sequential", "model:legacy"))
    together = build_plan(shipped("cuda-streams-2-together.trace"))
    assert run(together, "recorded", "model:fixed").exit_status == 0


def test_a_client_has_one_name_in_the_plan_the_table_the_trace_and_every_reader(tmp_path):
    """Concurrent clients reach the target in any order; the replay trace still calls each one what
    the plan and the table call it, so wedges and diff name and compare the same process."""
    plan = build_plan(shipped("cuda-streams-3x-sequential"))
    out = str(tmp_path / "conc.trace")
    result = run(plan, "concurrent", "model:legacy", output=out)
    attach_wedge_chains(result)
    model = load_session(out)
    assert {c.id: c.pid for c in model.clients} == {c.id: c.pid for c in plan.clients} == \
        {"c1": 517, "c2": 523, "c3": 529}
    table_text = table(result)
    for c in result.clients:
        if c.verdict is Verdict.WEDGED:
            assert c.wedge_chain[0].startswith(f"{c.client.id} pid {c.client.pid} ")
            assert f"wedges: {c.client.id} pid {c.client.pid} " in table_text
    for wedge in find_wedges(model):
        if wedge.client_id is not None:
            assert model.client(wedge.client_id).pid == plan.clients[int(wedge.client_id[1:]) - 1].pid
    div = first_divergence(load_session(shipped("cuda-streams-3x-sequential")), model)
    assert div is not None and div.a.pid == div.b.pid
