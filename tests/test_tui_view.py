"""RunView: what widgets see of a run, on a real trace file with a session-model double."""

import pytest
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.view import CallIndex, RunView

from rmtrace.trace import TraceReader
from tests.tui_doubles import US, double_services, wedge_story


@pytest.fixture
def story(tmp_path):
    path = str(tmp_path / "story.trace")
    model = wedge_story(path)
    run = RunView(TraceReader(path), double_services({path: model}))
    yield run, model
    run.close()


def test_before_the_model_the_index_answers(story):
    run, _ = story
    assert not run.loaded and run.record_count == 25 and run.complete
    assert run.lanes() == [] and run.wedges() == [] and run.state_at(0) is None and run.object_trees() == {}
    row = run.row(1)
    assert row.source == "RM" and row.operation == "→ op 0x2b" and row.client == "" and row.latency_ns is None
    assert run.row(2).status == "ret 0"
    assert run.seq_at(0) == 0 and run.seq_at(run.end_rel + 1) == run.record_count - 1


def test_with_the_model_rows_are_named_and_timed(story):
    run, model = story
    run.attach(run.build_model())
    assert run.generation == 1
    enter = run.row(1)
    assert (enter.client, enter.operation, enter.status, enter.latency_ns) == ("c1", "→ RM_ALLOC", "OK", 120 * US)
    assert enter.obj == "NV01_ROOT_CLIENT 0xc1d00001"
    stuck = next(run.row(s) for s in range(run.record_count) if "REGISTER_GPU" in run.row(s).operation
                 and run.row(s).client == "c2")
    assert stuck.in_flight and stuck.status == "in flight" and stuck.latency_ns is None
    hints = [run.row(s) for s in range(run.record_count) if "COMPLETION_HINT" in run.row(s).operation]
    assert [h.error for h in hints] == [False, True, True]


def test_lanes_are_relative_to_the_start(story):
    run, model = story
    run.attach(run.fold(model))
    lanes = {lane.entity: lane for lane in run.lanes()}
    assert set(lanes) == {"client/c1", "chan/c1/ch0", "client/c2", "rank/2"}
    assert all(0 <= seg[0] <= seg[1] <= run.end_rel for lane in lanes.values() for seg in lane.segments)
    assert lanes["chan/c1/ch0"].segments[-1][2] == "stale"
    assert run.group_labels()["c2"] == "c2 pid 200 (victory_mail)"


def test_objects_nest_by_parent_and_map_to_lanes(story):
    run, model = story
    run.attach(run.fold(model))
    trees = run.object_trees()
    assert list(trees) == ["c1", "c2"]
    root = trees["c1"][0]
    assert root.class_name == "NV01_ROOT_CLIENT" and root.children[0].children[0].class_name == "AMPERE_CHANNEL_GPFIFO_A"
    assert run.entities_of("c1", 0x5C000001) == {"chan/c1/ch0", "rank/2"}
    assert run.object_handles("c1", 0xC1D00001) == {0xC1D00001, 0x5C000001, 0xCAF000D4}
    assert run.lane_for_wedge(run.wedges()[0]) == "client/c2"


def test_call_index_finds_both_ends():
    class C:
        def __init__(self, enter, exit_):
            self.enter_seq, self.exit_seq = enter, exit_
    calls = [C(5, 9), C(1, None), C(3, 4)]
    index = CallIndex.build(calls)
    assert index.call_at(9) is calls[0] and index.call_at(1) is calls[1] and index.call_at(4) is calls[2]
    assert index.call_at(2) is None


def test_scans_filter_by_header_client_and_row(story):
    run, model = story
    run.attach(run.fold(model))

    def scan(flt, **kw):
        return [seq for found, _ in run.scan(flt, **kw) for seq in found]

    assert scan(EventFilter(pids=frozenset({200}))) == [s for s in range(run.record_count) if run.record(s).pid == 200]
    assert scan(EventFilter(clients=frozenset({"c2"}))) == model.client_seqs("c2")
    errors = scan(EventFilter(status="error"))
    assert len(errors) == 2 and all("COMPLETION_HINT" in run.row(s).operation for s in errors)
    assert scan(EventFilter(channels=frozenset({"c1/ch0"}))) == scan(EventFilter(channels=frozenset({"0xcaf000d4"})))
    assert scan(EventFilter(clients=frozenset({"c2"})), start=20) == [s for s in model.client_seqs("c2") if s >= 20]
    batches = list(run.scan(EventFilter(sources=frozenset({4})), batch=3))
    assert len(batches) > 2 and batches[-1][1] == run.record_count


def test_find_text(story):
    run, model = story
    run.attach(run.fold(model))
    seqs = list(range(run.record_count))
    at = run.find_text("register_gpu", seqs)
    assert run.row(seqs[at]).operation == "→ UVM_UNREGISTER_GPU"
    again = run.find_text(" uvm_register_gpu", seqs[at + 1:])
    assert run.row(seqs[at + 1 + again]).operation == "→ UVM_REGISTER_GPU"
    assert run.find_text("no such thing", seqs) is None


def test_the_state_table_lists_the_selected_client_first_past_its_cap(monkeypatch):
    from types import SimpleNamespace

    from rmtrace.tui.widgets.state import panel
    monkeypatch.setattr(panel, "MAX_ROWS", 4)
    lanes = [SimpleNamespace(entity=f"client/c{i}", group=f"c{i}") for i in range(6)]
    lanes += [SimpleNamespace(entity="rank/2", group="host")]
    assert panel.shown_lanes(lanes[:3], None) == lanes[:3]
    shown = panel.shown_lanes(lanes, "client/c5")
    assert [lane.entity for lane in shown] == ["client/c5", "rank/2", "client/c0", "client/c1"]
