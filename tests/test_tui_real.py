"""The TUI on what the real tools make: the constructed second-client wedge to its end, and a legacy-model replay
of the shipped H200 capture (``test_tui_app`` has every key on the constructed boots)."""

import pytest
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.services import library_services
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.state.panel import StatePanel, state_rows
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import wedge_text

from tests.tui_support import pilot_test, plain, settle, write_boots

SIZE = (120, 34)


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    return write_boots(tmp_path_factory.mktemp("boots"))


@pilot_test
async def test_the_second_client_wedge(boots):
    app = RmtraceApp.open([boots[0]], library_services())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.workspace.run
        timeline = app.main.query_one(Timeline)
        events = app.main.query_one(EventsTable)
        assert run.loaded and run.decoders is not None and run.model.decoders is run.decoders  # built once
        groups = [r.label for r in timeline.rows if r.is_group]
        assert groups[0].startswith("▾ c1 pid 1001") and groups[-1] == "▾ host (ranks)"
        assert "RM_ALLOC" in events.render_line(3).text  # decoded names in the table
        await pilot.press("w")
        wedge = run.wedges()[0]
        assert wedge.kind == "in_flight" and wedge.client_id == "c2"
        assert timeline.selected_row.lane.entity == "client/c2"
        assert "in_flight (UVM_REGISTER_GPU)" in timeline.status_text()
        assert events.pointer_seq == wedge.seq
        assert "UVM_REGISTER_GPU" in events.render_line(events.pointer - events.scroll_offset.y + 1).text
        text = plain(wedge_text(app.workspace), width=200)
        assert "completion hint rc=-22" in text and "never re-armed" in text
        # the state at the wedge: c2's channel stale, the host counters frozen
        rows = {label: state for label, state, _, _ in state_rows(app.workspace, run.state_at(timeline.cursor))}
        assert rows["c2 pid 1002"] == "in_flight"
        counters = str(app.main.query_one(StatePanel).query_one("#state-counters").render())
        assert "pub_calls=" in counters and "gr_rel=" in counters
        # to the trace's end: c2's channel is stale there
        timeline.focus()
        await pilot.press("end")
        end_rows = {label: state for label, state, _, _ in state_rows(app.workspace, run.state_at(timeline.cursor))}
        assert any(label.startswith("c2/ch0") and state == "stale" for label, state in end_rows.items())


@pilot_test
async def test_a_legacy_model_replay_of_the_real_capture(tmp_path):
    from rmtrace.replayer import Schedule, build_plan, make_target, replay

    from rmtrace import captures
    out = str(tmp_path / "legacy-replay.trace")
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
    replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=out)
    app = RmtraceApp.open([out], library_services())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.workspace.run
        timeline = app.main.query_one(Timeline)
        await pilot.press("w")
        wedge = run.wedges()[app.workspace.wedge_index]
        assert wedge.client_id == "c2" and "UVM_REGISTER_GPU" in wedge.summary
        assert timeline.selected_row.lane.entity == "client/c2"
        assert "in_flight (UVM_REGISTER_GPU)" in timeline.status_text()
        assert app.main.query_one(EventsTable).pointer_seq == wedge.seq
        at_end = run.state_at(run.end_rel)
        assert at_end.counters.get("drain_held", 0) > 0  # the host's drain hold never ended
        rows = {label: state for label, state, _, _ in state_rows(app.workspace, at_end)}
        assert rows[next(label for label in rows if label.startswith("c3 pid"))] == "in_flight"  # behind c2
