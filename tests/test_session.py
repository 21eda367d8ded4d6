"""The session model on constructed multi-client traces (the failure class of the-problem.md)."""


import pytest

from rmtrace.semantics import Category
from rmtrace.session import STATE_SYMBOLS, STATES, load_session
from tests.scenarios import sequential


@pytest.fixture(scope="module")
def wedged(tmp_path_factory):
    return load_session(sequential(tmp_path_factory.mktemp("w") / "wedged.trace", wedge=True))


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    return load_session(sequential(tmp_path_factory.mktemp("g") / "green.trace", wedge=False))


def test_clients_and_processes(green):
    assert [c.id for c in green.clients] == ["c1", "c2", "c3"]
    assert [c.pid for c in green.clients] == [1001, 1002, 1003]
    assert all(c.h_client is not None for c in green.clients)
    # sequential: each client starts after the previous one ended
    for a, b in zip(green.clients, green.clients[1:]):
        assert a.last_ns < b.first_ns
    assert all(green.processes[c.pid].exit_status == 0 for c in green.clients)


def test_object_tree_with_stable_names(green):
    for client in green.clients:
        objs = green.objects_of(client.id)
        names = sorted(o.stable_name for o in objs)
        assert names == sorted([
            "NV01_ROOT_CLIENT#0", "NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0",
            "NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0/NV20_SUBDEVICE_0#0",
            "NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0/FERMI_VASPACE_A#0",
            "NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0/KEPLER_CHANNEL_GROUP_A#0",
            "NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0/KEPLER_CHANNEL_GROUP_A#0/HOPPER_CHANNEL_GPFIFO_A#0",
        ])
        # every parent was allocated before its child, everything freed by the client's teardown
        by_handle = {o.handle: o for o in objs}
        assert {o.class_name: o.category for o in objs} == {
            "NV01_ROOT_CLIENT": Category.ROOT, "NV01_DEVICE_0": Category.DEVICE, "NV20_SUBDEVICE_0": Category.SUBDEVICE,
            "FERMI_VASPACE_A": Category.VASPACE, "KEPLER_CHANNEL_GROUP_A": Category.TSG,
            "HOPPER_CHANNEL_GPFIFO_A": Category.CHANNEL}
        for o in objs:
            if o.parent is not None and o.parent in by_handle:
                assert by_handle[o.parent].alloc_seq < o.alloc_seq
            assert o.free_ns is not None
    # the same program gets different handles per client but the same stable names
    assert {o.stable_name for o in green.objects_of("c1")} == {o.stable_name for o in green.objects_of("c3")}


def test_channels(green, wedged):
    chans = list(green.channels.values())
    assert [c.id for c in chans] == ["c1/ch0", "c2/ch0", "c3/ch0"]
    for c in chans:
        assert c.engine_type == 0x0B and c.rank == 2 and c.token is not None and c.tsg is not None
        states = [s.state for s in green.timeline.segments(c.entity)]
        assert states[:3] == ["allocated", "bound", "scheduled"] and states[-1] == "freed"
        assert "waiting" in states and "completed" in states
    stale = [s for s in wedged.timeline.segments("chan/c2/ch0")]
    assert stale[-1].state == "stale" and "rc=-22" in stale[-1].detail


def test_state_at_time_and_history(wedged):
    c1 = wedged.client("c1")
    during_c1 = wedged.state_at(c1.first_ns + (c1.last_ns - c1.first_ns) // 2)
    assert during_c1.of("client/c1")["state"] == "running"
    assert "client/c2" not in during_c1.entities
    end = wedged.state_at(wedged.end_ns)
    assert end.of("client/c1")["state"] == "exited"
    assert end.of("client/c2")["state"] == "in_flight"
    assert end.of("rank/2")["state"] == "latch_fired"
    assert end.counters["gr_rel"] == 202 and end.counters["pub_calls"] == 2702
    history = wedged.history("rank/2")
    assert [t.value for t in history if t.attr == "state"] == ["latch_armed", "latch_fired", "latch_armed",
                                                                "latch_fired"]
    assert all(a.t_ns <= b.t_ns for a, b in zip(wedged.transitions, wedged.transitions[1:]))


def test_state_at_matches_a_full_replay_with_small_snapshots(tmp_path):
    path = sequential(tmp_path / "s.trace", wedge=True)
    coarse = load_session(path, snapshot_every=1_000_000)
    fine = load_session(path, snapshot_every=3)
    for tr in coarse.transitions[::5]:
        assert fine.state_at(tr.t_ns) == coarse.state_at(tr.t_ns)


def test_client_of_records(wedged):
    c2 = wedged.client("c2")
    seqs = wedged.client_seqs("c2")
    assert seqs and seqs == sorted(seqs) and all(wedged.client_of(s) == "c2" for s in seqs)
    assert c2.first_seq == seqs[0]


def test_lanes_use_known_states(wedged):
    lanes = wedged.lanes()
    kinds = {lane.kind for lane in lanes}
    assert kinds == {"client", "channel", "rank"}
    for lane in lanes:
        for seg in lane.segments:
            assert seg.state in STATES or seg.state == "idle"
            assert seg.t0 <= seg.t1 <= wedged.end_ns
    assert set(STATE_SYMBOLS) == set(STATES) and len(set(STATE_SYMBOLS.values())) == len(STATES)
    c2 = next(lane for lane in lanes if lane.entity == "client/c2")
    assert c2.segments[-1].state == "in_flight" and c2.segments[-1].t1 == wedged.end_ns
