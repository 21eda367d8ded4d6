"""The TUI on traces folded by the real session model: the constructed second-client wedge and its fixed boot."""

import pytest
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.screens.detail import RecordDetail
from rmtrace.tui.services import library_services
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel, state_rows
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import divergence_text, wedge_text
from textual.widgets import TabbedContent

from tests.scenarios import sequential
from tests.tui_doubles import pilot_test, plain

SIZE = (120, 34)


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("boots")
    return str(sequential(folder / "wedge.trace", True)), str(sequential(folder / "fixed.trace", False))


async def settle(pilot):
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


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
async def test_fields_filters_and_objects_on_real_decodes(boots):
    app = RmtraceApp.open([boots[0]], library_services())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.workspace.run
        events = app.main.query_one(EventsTable)
        alloc = next(s for s in range(run.record_count) if run.row(s).operation.startswith("→ RM_ALLOC"))
        events.focus()
        events.show_seq(alloc)
        await pilot.press("enter")
        assert isinstance(app.screen, RecordDetail)
        labels = []
        stack = [app.screen.query_one("#fields").root]
        while stack:
            node = stack.pop()
            labels.append(str(node.label))
            stack.extend(node.children)
        assert any(label.startswith("hClient:") for label in labels)
        await pilot.press("escape")
        events.set_filter(EventFilter(status="error"))
        await settle(pilot)
        assert events.row_count >= 1
        assert all(run.row(s).error for s in events.matches)
        assert any("rc" in run.row(s).status or "-22" in run.row(s).status for s in events.matches)
        # an object of c2: its channel lights up, the events narrow to it
        tree = app.main.query_one(ObjectsTree)
        await pilot.press("o")
        c2 = next(n for n in tree.root.children if n.data == "c2")
        found = []
        stack = list(c2.children)
        while stack:
            node = stack.pop()
            if getattr(node.data, "class_name", "").endswith("CHANNEL_GPFIFO_A"):
                found.append(node)
            stack.extend(node.children)
        assert found
        tree.select_node(found[0])
        await settle(pilot)
        timeline = app.main.query_one(Timeline)
        assert "chan/c2/ch0" in timeline.highlighted
        assert events.matches and all(run.row(s).handles & events.filter.handles for s in events.matches)


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


@pilot_test
async def test_diff_of_the_wedged_and_the_fixed_boot(boots):
    app = RmtraceApp.open(list(boots), library_services())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        div = app.workspace.divergence
        assert div is not None and div.seq[0] is not None
        text = plain(divergence_text(app.workspace), width=200)
        assert "first divergence" in text and "c2" in text
        timeline = app.main.query_one(Timeline)
        assert timeline.cursor == div.t_rel[0]
        labels = [r.label.strip() for r in timeline.rows]
        assert labels.index("A calls") + 1 == labels.index("B calls")
        await pilot.press("d")
        assert app.main.query_one(TabbedContent).active == "tab-diff"
        assert len(app.workspace.runs[0].wedges()) > 0 and app.workspace.runs[1].wedges() == []
