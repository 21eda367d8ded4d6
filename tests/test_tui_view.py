"""RunView: what widgets see of a run, on the constructed wedged boot folded by the real session model."""

import pytest
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.services import library_services
from rmtrace.tui.view import CallIndex, RunView
from rmtrace.tui.workspace import Workspace

from rmtrace.trace import TraceReader
from tests.tui_support import write_boots


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    return write_boots(tmp_path_factory.mktemp("view"))


@pytest.fixture
def run(boots):
    view = RunView(TraceReader(boots[0]), library_services())
    yield view
    view.close()


@pytest.fixture
def folded(run):
    run.attach(run.build_model(run.build_decoders()))
    return run


def test_before_the_model_the_index_answers(run):
    assert not run.loaded and run.record_count == 106 and run.complete
    assert run.lanes() == [] and run.wedges() == [] and run.state_at(0) is None and run.object_trees() == {}
    row = run.row(2)
    assert row.source == "RM" and row.operation == "→ op 0x2b" and row.client == "" and row.latency_ns is None
    assert run.row(3).status == "ret 0"
    assert run.seq_at(0) == 0 and run.seq_at(run.end_rel + 1) == run.record_count - 1


def test_with_the_model_rows_are_named_timed_and_say_what_the_decoders_say(folded):
    run = folded
    assert run.generation == 1
    enter = run.row(2)
    call = run.call_at(2)
    assert (enter.client, enter.operation, enter.status) == ("c1", "→ RM_ALLOC NV01_ROOT_CLIENT", "NV_OK")
    assert enter.latency_ns == call.t_exit - call.t_enter > 0
    assert enter.obj == "NV01_ROOT_CLIENT 0xc1d00001"
    stuck = run.row(run.wedges()[0].seq)
    assert stuck.client == "c2" and stuck.operation == "→ UVM_REGISTER_GPU"
    assert stuck.in_flight and stuck.status == "in flight" and stuck.latency_ns is None
    hints = [run.row(s) for s in range(run.record_count) if "COMPLETION_HINT" in run.row(s).operation]
    assert [h.error for h in hints if h.client == "c1"] == [False, False]
    assert any(h.error and "-22" in h.status for h in hints if h.client == "c2")  # refused as stale


def test_lanes_are_relative_to_the_start(folded):
    run = folded
    lanes = {lane.entity: lane for lane in run.lanes()}
    assert set(lanes) == {"client/c1", "client/c2", "client/c3", "chan/c1/ch0", "chan/c2/ch0", "chan/c3/ch0",
                          "rank/2"}
    assert all(0 <= seg[0] <= seg[1] <= run.end_rel for lane in lanes.values() for seg in lane.segments)
    assert lanes["chan/c2/ch0"].segments[-1][2] == "stale"
    assert run.group_labels()["c2"] == "c2 pid 1002"
    model = run.model  # lanes read their segments when asked: the same as the model's, shifted to the start
    assert [(lane.entity, lane.kind, lane.group, lane.label) for lane in run.lanes()] == [
        (lane.entity, lane.kind, lane.group, lane.label) for lane in model.lanes()]
    assert [lane.segments for lane in run.lanes()] == [
        tuple((s.t0 - run.start_ns, s.t1 - run.start_ns, s.state, s.detail) for s in lane.segments)
        for lane in model.lanes()]


def test_objects_nest_by_parent_and_map_to_lanes(folded):
    run = folded
    assert not run.trees_ready  # the worker builds them after the lanes and wedges are on screen
    trees = run.object_trees()
    assert run.trees_ready and run.object_trees() is trees
    assert list(trees) == ["c1", "c2", "c3"]
    root = trees["c1"][0]
    assert root.class_name == "NV01_ROOT_CLIENT" and root.children[0].class_name == "NV01_DEVICE_0"
    assert run.entities_of("c1", 0x5C000001) == {"chan/c1/ch0", "rank/2"}
    under = run.object_handles("c1", 0xC1D00001)
    assert {0xC1D00001, 0x5C000001, 0x5C000002, 0x5C000004, 0xCAF000D4} <= under
    assert run.lane_for_wedge(run.wedges()[0]) == "client/c2"
    assert run.lane_for_wedge(next(w for w in run.wedges() if w.kind == "no_completion")) == "chan/c2/ch0"


def test_call_index_finds_both_ends(folded):
    calls = folded.model.calls
    index = CallIndex.build(calls)
    for call in calls[:20]:
        assert index.call_at(call.enter_seq) == call
        if call.exit_seq is not None:
            assert index.call_at(call.exit_seq) == call
    assert index.call_at(folded.record_count) is None


def test_call_index_of_a_table_whose_exits_are_out_of_order():
    """The index from the table's columns finds both ends of every call when its exits are not in seq order
    (a slow call returns after later calls did) and when they are (its columns read as they are)."""
    from types import SimpleNamespace

    import numpy as np
    enter = [0, 1, 2, 5, 6]
    for exit_ in ([9, 3, 4, -1, 7], [3, 4, 8, -1, 9]):
        calls = [f"call{i}" for i in range(len(enter))]
        model = SimpleNamespace(calls=calls, table=SimpleNamespace(columns={
            "enter_seq": np.array(enter, dtype=np.uint64), "exit_seq": np.array(exit_, dtype=np.int64)}))
        index = CallIndex.of_model(model)
        for i, (e, x) in enumerate(zip(enter, exit_)):
            assert index.call_at(e) == calls[i]
            if x >= 0:
                assert index.call_at(x) == calls[i]
        assert index.call_at(10) is None and index.call_at(-1) is None


def test_scans_filter_by_header_client_and_row(folded):
    run = folded

    def scan(flt, **kw):
        return [seq for found, _ in run.scan(flt, **kw) for seq in found]

    assert scan(EventFilter(pids=frozenset({1002}))) == [s for s in range(run.record_count) if run.record(s).pid == 1002]
    assert scan(EventFilter(clients=frozenset({"c2"}))) == list(run.model.client_seqs("c2"))
    errors = scan(EventFilter(status="error"))
    assert errors and all(run.row(s).error for s in errors)
    assert scan(EventFilter(channels=frozenset({"c2/ch0"}))) == scan(EventFilter(channels=frozenset({"0xcaf000d4"})))
    assert scan(EventFilter(clients=frozenset({"c2"})), start=60) == [s for s in run.model.client_seqs("c2") if s >= 60]
    batches = list(run.scan(EventFilter(sources=frozenset({4})), batch=3))
    assert len(batches) > 2 and batches[-1][1] == run.record_count


def test_find_text(folded):
    run = folded
    seqs = list(range(run.record_count))
    at = run.find_text("register_gpu", seqs)
    assert run.row(seqs[at]).operation == "→ UVM_REGISTER_GPU"
    again = run.find_text("unregister_gpu", seqs[at + 1:])
    assert run.row(seqs[at + 1 + again]).operation == "→ UVM_UNREGISTER_GPU"
    assert run.find_text("no such thing", seqs) is None


def test_a_diff_names_its_client_once(boots):
    runs = [RunView(TraceReader(p), library_services()) for p in boots]
    for view in runs:
        view.attach(view.build_model(view.build_decoders()))
    workspace = Workspace(runs)
    div = workspace.divergence_from(library_services().first_divergence(runs[0].model, runs[1].model))
    assert div is not None and div.lines[0].startswith("c2: ") and not div.lines[0].startswith("c2: c2:")
    assert div.t_rel[0] == runs[0].t_rel_of(div.seq[0])
    for view in runs:
        view.close()


def test_the_state_table_lists_the_selected_client_first_past_its_cap(monkeypatch):
    from rmtrace.tui.view import LaneRow
    from rmtrace.tui.widgets.state import panel
    monkeypatch.setattr(panel, "MAX_ROWS", 4)
    lanes = [LaneRow(f"client/c{i}", "client", f"c{i}", f"c{i} pid {100 + i}", tuple) for i in range(6)]
    lanes += [LaneRow("rank/2", "rank", "host", "rank 2", tuple)]
    assert panel.shown_lanes(lanes[:3], None) == lanes[:3]
    shown = panel.shown_lanes(lanes, "client/c5")
    assert [lane.entity for lane in shown] == ["client/c5", "rank/2", "client/c0", "client/c1"]


def test_a_model_loaded_from_the_cache_names_row_handles_as_the_folded_one(tmp_path):
    """A row's objects are named from a loaded model's object columns (its RmObjects are not made for
    it): the same text as from the folded model's objects, row by row, on a real capture."""
    from rmtrace import captures
    from rmtrace.session.objects import ObjectList

    path = tmp_path / "capture.trace"
    path.write_bytes(captures.path("cuda-streams-3x-sequential").read_bytes())
    services = library_services()
    folded = RunView(TraceReader(str(path)), services)
    folded.attach(folded.build_model(folded.build_decoders()))
    services.keep_model(folded.model)
    loaded = RunView(TraceReader(str(path)), services)
    first = loaded.build_first(loaded.build_decoders())
    assert first is not None and first[1]  # the whole model, from the cache
    loaded.attach(first[0])
    assert isinstance(loaded.model.object_list, ObjectList) and not isinstance(folded.model.object_list, ObjectList)
    named = [folded.row(seq).obj for seq in range(folded.record_count)]
    assert [loaded.row(seq).obj for seq in range(loaded.record_count)] == named
    assert sum("NV01_ROOT_CLIENT" in text for text in named) > 3  # handles named by their class
    classes = loaded._class_names()  # every (client, handle): its newest object's class, as the objects say
    assert all(classes.get(key) == obj.class_name for key, obj in folded.model.objects.items())
    client = folded.model.clients[0].id
    assert classes.get((client, 0xFFFFFFFF)) is None and classes.get(("no such client", 1)) is None
    assert classes.get((client, -1)) is None and classes.get((client, 1 << 32)) is None
    folded.close()
    loaded.close()


def test_the_first_screens_channels_fold_is_not_stored(tmp_path, monkeypatch):
    """The TUI's lanes and wedges come from a channels' fold it does not store (the whole model, stored when
    its fold ends, follows it; a store would come before the first screen): the entry then holds neither,
    and once the whole model is kept, the next open loads it."""
    from rmtrace import captures

    cache = tmp_path / "cache"
    monkeypatch.setenv("RMTRACE_CACHE", str(cache))
    path = tmp_path / "capture.trace"
    path.write_bytes(captures.path("cuda-streams-3x-sequential").read_bytes())
    services = library_services()
    first = services.load_channels(str(path), None)
    assert first is not None and not first[1]
    assert len(list(cache.iterdir())) == 1  # the entry, its call table built into it
    assert not list(cache.glob("*/channels")) and not list(cache.glob("*/model"))
    view = RunView(TraceReader(str(path)), services)
    view.attach(view.build_model(view.build_decoders()))
    services.keep_model(view.model)
    again = services.load_channels(str(path), None)
    assert again is not None and again[1]  # the whole model, from the entry
    view.close()
