"""Plans: a trace cut into clients and messages, dependencies, --clients, --repeat, --streams."""

from __future__ import annotations

import pytest
from rmtrace.decoders.gsp import codec_for
from rmtrace.replayer.messages import Kind
from rmtrace.replayer.model.host import rank_of
from rmtrace.replayer.plan import build_plan, channel_work, dependency_closure, lane_shift

from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, Phase, Record, Role, Source, When, decode_record
from rmtrace.semantics import Category
from rmtrace.trace import TraceWriter
from tests.cuda_traffic import COMPUTE_RING, DRIVER, PROFILE, cuda_client, write_trace


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "one.trace"
    return build_plan(write_trace(str(path), [cuda_client(1447)], command=["/opt/victory_mail"]))


def by_name(client, name):
    return [m for m in client.messages if m.name == name]


def test_a_cuda_process_is_one_client_of_typed_messages(one):
    (c1,) = one.clients
    assert c1.label == "c1 pid 1447 (victory_mail)" and len(c1.messages) == 41
    kinds = [m.kind for m in c1.messages]
    assert kinds[:3] == [Kind.SYS_OPEN, Kind.RM_CLIENT, Kind.RM_CONTROL]
    assert kinds.count(Kind.WORK_TOKEN) == 2 and kinds.count(Kind.UVM_REGISTER_GPU) == 1
    assert kinds[-1] == Kind.SYS_EXIT
    root = c1.messages[1]
    assert root.h_client == 0xC1D00001 and root.expect.status_name == "NV_OK"
    (register,) = by_name(c1, "UVM_REGISTER_GPU")
    assert register.gpu.hex() == "5e1f0a2b3c4d5e6f708192a3b4c5d6e7" and register.dur_ns == 2_000_000


def test_expectations_carry_status_outputs_and_whether_an_answer_comes(one):
    (c1,) = one.clients
    token = by_name(c1, "RM_CONTROL(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN)")[0]
    assert token.expect.response is True and token.expect.status == 0
    assert dict(token.expect.fields) == {"workSubmitToken": 0x10}
    assert c1.messages[0].expect.response is False  # open: an event, nothing to answer


def test_dependencies_follow_handles_and_files(one):
    (c1,) = one.clients
    index = {m.index: m for m in c1.messages}
    token = by_name(c1, "RM_CONTROL(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN)")[0]
    assert {index[d].name for d in token.deps} == {"SYS_OPEN", "RM_ALLOC(NV01_ROOT_CLIENT)",
                                                    "RM_ALLOC(HOPPER_CHANNEL_GPFIFO_A)"}
    assert index[max(token.deps)].ring_va == COMPUTE_RING
    closure = dependency_closure(c1.messages, [token.index])
    assert {index[i].name for i in closure} >= {"RM_ALLOC(KEPLER_CHANNEL_GROUP_A)", "RM_ALLOC(NV01_DEVICE_0)"}
    register = by_name(c1, "UVM_REGISTER_GPU")[0]
    assert {index[d].kind for d in register.deps} >= {Kind.UVM_INITIALIZE, Kind.SYS_OPEN}


def test_repeat_runs_each_client_again_as_a_new_process(one):
    plan = one.repeat(3)
    assert [c.id for c in plan.clients] == ["c1", "c2", "c3"]
    assert len({c.pid for c in plan.clients}) == 3 and plan.clients[0].pid == 1447
    assert plan.clients[2].label == f"c3 pid {plan.clients[2].pid} (victory_mail) (run 3 of recorded c1)"
    assert plan.message_count == 3 * 41


def test_select_picks_recorded_clients_and_refuses_missing_ones(one):
    assert one.select([1]).clients[0].pid == 1447
    with pytest.raises(RmtraceError, match="no client 2"):
        one.select([2])
    with pytest.raises(RmtraceError):
        one.repeat(0)


def test_streams_clone_channel_work_onto_new_handles_rings_and_ranks(one):
    plan = one.streams(4)
    (c1,) = plan.clients
    assert c1.lanes == 4
    channels = [m for m in c1.messages if m.name == "RM_ALLOC(HOPPER_CHANNEL_GPFIFO_A)"]
    assert len(channels) == 8 and len({m.h_object for m in channels}) == 8
    compute = [m for m in channels if m.ring_va - lane_shift(m.lane) == COMPUTE_RING]
    assert len(compute) == 4 and {rank_of(m.ring_va, 4) for m in compute} == {0, 1, 2, 3}
    clone = next(m for m in channels if m.lane == 2)
    request = decode_record(clone.request)
    decoded = plan.semantics.decoders.decode(request)
    assert decoded.handles["hObject"] == clone.h_object
    params = next(b.value for b in decoded.buffers if b.role == Role.ALLOC_PARAMS)
    assert params.gpFifoOffset == clone.ring_va and request.call_id >> 48 == 2
    lane2 = [m for m in c1.messages if m.lane == 2]
    token = next(m for m in lane2 if m.kind == Kind.WORK_TOKEN)
    assert any(c1.messages[d].h_object == token.h_object and c1.messages[d].lane == 2 for d in token.deps)
    join = next(m for m in c1.messages if m.lane == 0 and m.index > max(x.index for x in c1.messages if x.lane))
    assert {c1.messages[d].lane for d in join.deps} >= {1, 2, 3}


def test_streams_clone_whole_channel_groups_each_lane_its_own(repo_root):
    """A lane's channels go into a channel group of its own (a clone of the recorded one, with its context
    share), never into the recorded group, which the real driver refuses (NV_ERR_INVALID_STATE)."""
    plan = build_plan(str(repo_root / "captures" / "cuda-streams.trace")).streams(4)
    (c1,) = plan.clients
    messages = c1.messages
    allocs = {m.h_object: m for m in messages if m.kind == Kind.RM_ALLOC}
    groups = [m for m in allocs.values() if m.category is Category.TSG]
    assert len(groups) == 4 * 4 and {sum(g.lane == lane for g in groups) for lane in range(4)} == {4}
    channels = [m for m in allocs.values() if m.category is Category.CHANNEL]
    assert len(channels) == 4 * 20
    for ch in channels:
        group = allocs[ch.h_parent]
        assert group.category is Category.TSG and group.lane == ch.lane
        params = next(b.value for b in plan.semantics.decoders.decode(decode_record(ch.request)).buffers
                      if b.role == Role.ALLOC_PARAMS)
        if params.hContextShare:  # the compute group's channels name its context share: the lane's own
            share = allocs[params.hContextShare]
            assert share.lane == ch.lane and share.h_parent == group.h_object
        assert allocs[params.hObjectBuffer].lane == 0  # the GPFIFO/USERD memory stays the program's own
        needs = {messages[d].h_object for d in ch.deps}
        assert {group.h_object, params.hObjectBuffer, params.hObjectError} <= needs
    registered = [m for m in messages if m.name == "UVM_REGISTER_CHANNEL"]
    assert {m.lane for m in registered} == {0, 1, 2, 3} and len(registered) == 80
    # a clone goes no earlier than its original could (lane 0 runs in its order): the VA space its context
    # share names is set up by then, in lane 0, though no handle says so
    vaspace = next(m for m in messages if m.name == "RM_ALLOC(FERMI_VASPACE_A)")
    for share in (m for m in allocs.values() if m.lane and m.name == "RM_ALLOC(FERMI_CONTEXT_SHARE_A)"):
        closure = dependency_closure(messages, [share.index])
        assert max(i for i in closure if messages[i].lane == 0) > vaspace.index
    frees = [m for m in messages if m.kind == Kind.RM_FREE and m.lane == 3]
    assert {f.h_object for f in frees} >= {g.h_object for g in groups if g.lane == 3}


def test_streams_need_a_channel(tmp_path):
    from tests.cuda_traffic import Process
    p = Process(77, 1_000_000_000)
    p.sys(1, fd=3, path="/dev/nvidiactl", ret=3)
    p.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", assigned=0xC1D00042)
    plan = build_plan(write_trace(str(tmp_path / "smi.trace"), [p]))
    assert channel_work(plan.clients[0].messages) == (set(), set())
    with pytest.raises(RmtraceError, match="no channel"):
        plan.streams(2)


def test_a_trace_without_calls_has_no_client(tmp_path):
    path = tmp_path / "empty.trace"
    with TraceWriter(str(path), {"driver_version": DRIVER}):
        pass
    with pytest.raises(RmtraceError, match="no client"):
        build_plan(str(path))


def gsp_trace(path, sessions=2):
    """A GSP-level trace captured host-side (no guest pids): per session the boot handshake's INIT_DONE,
    then an RM alloc RPC and its response."""
    codec = codec_for(PROFILE)
    fn = {name: num for num, name in {**PROFILE.gsp_functions, **PROFILE.gsp_events}.items()}
    t, seq, records = 1_000_000, 0, []

    def rpc(phase, function, payload, sequence, result=0xFFFFFFFF):
        nonlocal t
        t += 10_000
        msg = codec.build(function, payload, sequence, rpc_result=result)
        records.append(Record(Source.GSP, phase, op=function, time_ns=t, pid=0, tid=0,
                              buffers=(Buffer(Role.PAYLOAD, When.ONCE, msg),)))

    for s in range(sessions):
        rpc(Phase.RECV, fn["GSP_INIT_DONE"], codec.payload(fn["GSP_INIT_DONE"], {}), 0, 0)
        client = 0xC1D00001 + s
        for parent, handle, cls in ((0, client, "NV01_ROOT_CLIENT"), (client, 0x5C000001, "NV01_DEVICE_0")):
            alloc = codec.payload(fn["GSP_RM_ALLOC"], {"hClient": client, "hParent": parent, "hObject": handle,
                                                       "hClass": PROFILE.lookup("classes", cls)})
            for phase, result in ((Phase.SEND, 0xFFFFFFFF), (Phase.RECV, 0)):
                seq += phase == Phase.SEND
                rpc(phase, fn["GSP_RM_ALLOC"], alloc, seq, result)
    with TraceWriter(str(path), {"driver_version": DRIVER}) as writer:
        for rec in records:
            writer.write(rec)
    return str(path)


def test_a_gsp_level_trace_is_cut_into_gsp_sessions(tmp_path):
    plan = build_plan(gsp_trace(tmp_path / "gsp.trace"))
    assert len(plan.clients) == 2
    assert len({c.pid for c in plan.clients}) == 2  # recorded without pids: each session its own process
    for c in plan.clients:
        assert [m.kind for m in c.messages] == [Kind.GSP_INIT, Kind.RM_CLIENT, Kind.RM_ALLOC]
        alloc = c.messages[2]
        assert alloc.name == "GSP_RM_ALLOC(NV01_DEVICE_0)" and alloc.expect.response is True
        assert alloc.h_object == 0x5C000001 and alloc.deps == (1,)


def test_a_gsp_level_trace_replays_green_and_each_boot_handshake_resets_the_host(tmp_path):
    from rmtrace.replayer.runner import replay
    from rmtrace.replayer.schedules import Schedule
    from rmtrace.replayer.targets import make_target
    plan = build_plan(gsp_trace(tmp_path / "gsp.trace"))
    for against in ("recorded", "model:fixed"):
        result = replay(plan, Schedule.parse("sequential"), make_target(against, plan))
        assert result.exit_status == 0 and all(c.diverged == 0 for c in result.clients), against
    assert result.counters["sessions"] == 2
