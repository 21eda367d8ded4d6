"""The TUI driven by Pilot: every view and key, on a real trace file with a session-model double."""

import threading
from dataclasses import replace

import pytest
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.messages import (
    CursorMoved,
    ModelFailed,
    ModelLoaded,
    ObjectCleared,
    ObjectSelected,
    RecordChosen,
    TraceGrew,
    WedgeShown,
)
from rmtrace.tui.screens.detail import RecordDetail
from rmtrace.tui.screens.filter import FilterScreen, PromptScreen
from rmtrace.tui.screens.help import HelpScreen
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import wedge_text
from textual import events
from textual.widgets import Input, TabbedContent

from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import TraceWriter
from tests.tui_doubles import double_services, pilot_test, plain, wedge_story

SIZE = (120, 34)


@pytest.fixture
def story_paths(tmp_path):
    a, b = str(tmp_path / "a.trace"), str(tmp_path / "b.trace")
    return {a: wedge_story(a), b: wedge_story(b, second_client_recovers=True)}


def make_app(models, paths=None, **kw):
    return RmtraceApp.open(paths or list(models)[:1], double_services(models), **kw)


async def settle(pilot):
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def parts(app):
    screen = app.main
    return screen.query_one(Timeline), screen.query_one(EventsTable), screen.query_one(StatePanel)


@pilot_test
async def test_first_screen_needs_only_the_index(story_paths):
    gate = threading.Event()
    path = list(story_paths)[0]
    services = double_services(story_paths)
    held = replace(services, load_model=lambda p, decoders: (gate.wait(10), story_paths[p])[1],
                   decoders_for=lambda reader: story_paths[reader.path].decoders)
    app = RmtraceApp.open([path], held)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.pause()
        timeline, events, _ = parts(app)
        assert events.row_count == 25 and not app.workspace.run.loaded
        for _ in range(50):
            if app.workspace.run.decoders is not None:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        assert "RM_ALLOC" in events.render_line(2).text  # named by the decoders, before the model
        assert "building the session model" in timeline.status_text()
        assert "building the session model" in str(app.main.query_one("#run-line").render())
        await pilot.press("w")
        gate.set()
        await settle(pilot)
        assert any(isinstance(m, ModelLoaded) for m in messages)
        assert app.workspace.run.loaded and len(timeline.rows) == 7
        assert "2 clients, 4 lanes, 1 wedge" in str(app.main.query_one("#run-line").render())


@pilot_test
async def test_timeline_keys(story_paths):
    app = make_app(story_paths)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, state = parts(app)
        timeline.focus()
        await pilot.press("right", "right")
        moved = [m for m in messages if isinstance(m, CursorMoved)]
        assert moved and moved[-1].origin == "timeline" and timeline.cursor == moved[-1].t_rel > 0
        assert app.workspace.cursor == timeline.cursor
        seq = events.pointer_seq
        assert app.workspace.run.t_rel_of(seq) >= timeline.cursor
        await pilot.press("shift+right")
        assert timeline.cursor > moved[-1].t_rel
        await pilot.press("end")
        assert timeline.cursor == app.workspace.end_rel
        await pilot.press("home")
        assert timeline.cursor == 0
        span = timeline.window.span
        await pilot.press("plus")
        assert timeline.window.span < span
        await pilot.press("right_square_bracket")
        assert timeline.window.t0 > 0
        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert timeline.window.t0 == 0
        await pilot.press("minus", "minus")
        await pilot.press("0")
        assert timeline.window.t1 >= app.workspace.end_rel
        # lanes: down to ch0 and jump between its events
        await pilot.press("home", "down", "down")
        assert timeline.selected_row.entity == "chan/c1/ch0"
        lanes = [lane.entity for lane in app.workspace.run.lanes()]
        assert state.query_one("DataTable").cursor_row == lanes.index("chan/c1/ch0")  # the state row follows
        await pilot.press("n")
        first = timeline.cursor
        await pilot.press("n")
        assert timeline.cursor > first > 0
        await pilot.press("p")
        assert timeline.cursor == first
        assert "c1/ch0 0xcaf000d4: allocated" in timeline.status_text()
        # fold the c1 group and unfold it
        await pilot.press("up", "up", "space")
        assert len(timeline.rows) == 5 and timeline.rows[0].label.startswith("▸")
        await pilot.press("enter")
        assert len(timeline.rows) == 7


@pilot_test
async def test_timeline_mouse(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline, _, _ = parts(app)
        x = timeline.label_width + timeline.plot_width // 2
        await pilot.click(Timeline, offset=(x, 4))  # border, ruler, c1 heading, c1 calls, c1/ch0
        assert timeline.selected_row.entity == "chan/c1/ch0"
        assert abs(timeline.cursor - timeline.window.time_at(timeline.plot_width // 2)) <= timeline.window.ns_per_col
        # wheel over the lanes zooms around the pointer; over the labels it scrolls lanes
        span = timeline.window.span
        await pilot._post_mouse_events([events.MouseScrollUp], Timeline, offset=(x, 3))
        assert timeline.window.span < span
        await pilot._post_mouse_events([events.MouseScrollDown], Timeline, offset=(x, 3))
        await pilot._post_mouse_events([events.MouseScrollDown], Timeline, offset=(x, 3))
        assert timeline.window.span > span * 0.9
        await pilot.press("plus", "plus")
        # drag pans (and is not a click: the cursor stays)
        t0, cursor = timeline.window.t0, timeline.cursor
        await pilot.mouse_down(Timeline, offset=(x, 3))
        await pilot._post_mouse_events([events.MouseMove], Timeline, offset=(x - 10, 3), button=1)
        await pilot.mouse_up(Timeline, offset=(x - 10, 3))
        assert timeline.window.t0 > t0 and timeline.cursor == cursor
        # a click on a group heading's label folds it
        await pilot.click(Timeline, offset=(2, 2))
        assert timeline.rows[0].label.startswith("▸")


@pilot_test
async def test_events_follow_and_lead_the_cursor(story_paths):
    app = make_app(story_paths)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, state = parts(app)
        events.focus()
        await pilot.press("down", "down", "down")
        chosen = [m for m in messages if isinstance(m, RecordChosen)]
        assert chosen[-1].seq == 3 and chosen[-1].origin == "events"
        assert timeline.cursor == app.workspace.run.t_rel_of(3)
        await pilot.press("end")
        assert events.pointer == 24 and timeline.cursor == app.workspace.run.t_rel_of(24)
        await pilot.press("pageup", "home")
        assert events.pointer == 0
        await pilot.press("pagedown")
        assert events.pointer > 10


@pilot_test
async def test_enter_opens_fields_and_hex(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        events.focus()
        await pilot.press("down", "enter")
        assert isinstance(app.screen, RecordDetail) and app.screen.seq == 1
        text = str(app.screen.query_one("#hex").query_one("Static").render())
        assert "ARG/BEFORE: 32 bytes" in text and "0000  01 00 00 00" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, RecordDetail)


@pilot_test
async def test_filter_screen(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        await pilot.press("f")
        assert isinstance(app.screen, FilterScreen)
        app.screen.query_one("#filter-source", Input).focus()
        await pilot.press(*"disk", "enter")
        assert isinstance(app.screen, FilterScreen)
        assert "unknown 'disk'" in str(app.screen.query_one("#filter-error").render())
        app.screen.query_one("#filter-source", Input).value = "sema"
        app.screen.query_one("#filter-status", Input).value = "error"
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, FilterScreen)
        assert events.row_count == 2 and events.scan_state == ""
        assert "filter: source sema, status error" in events.border_title
        await pilot.press("f", "escape")
        assert events.row_count == 2
        events.focus()
        await pilot.press("c")
        assert events.matches is None and events.row_count == 25


@pilot_test
async def test_search(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        await pilot.press("slash")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"hint", "enter")
        await settle(pilot)
        hits = [s for s in range(25) if "COMPLETION_HINT" in app.workspace.run.row(s).operation]
        assert events.pointer_seq == hits[0]
        await pilot.press("n")
        await settle(pilot)
        assert events.pointer_seq == hits[1]
        await pilot.press("N")
        await settle(pilot)
        assert events.pointer_seq == hits[0]
        await pilot.press("slash", *"nowhere", "enter")
        await settle(pilot)
        assert events.pointer_seq == hits[0]


@pilot_test
async def test_objects_select_and_clear(story_paths):
    app = make_app(story_paths)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, _ = parts(app)
        await pilot.press("o")
        tree = app.main.query_one(ObjectsTree)
        assert app.main.query_one(TabbedContent).active == "tab-objects"
        tree.focus()
        device = next(n for n in tree.root.children[0].children[0].children if n.data.class_name == "NV01_DEVICE_0")
        tree.select_node(device)
        await settle(pilot)
        picked = [m for m in messages if isinstance(m, ObjectSelected)][-1]
        assert picked.entities == {"chan/c1/ch0", "rank/2"} and picked.handles == {0x5C000001, 0xCAF000D4}
        assert timeline.highlighted == {"chan/c1/ch0", "rank/2"}
        assert all(app.workspace.run.row(s).handles & picked.handles for s in events.matches)
        assert len(events.matches) > 5
        await pilot.press("escape")
        await settle(pilot)
        assert any(isinstance(m, ObjectCleared) for m in messages)
        assert timeline.highlighted == set() and events.matches is None


@pilot_test
async def test_w_jumps_to_the_wedge(story_paths):
    app = make_app(story_paths)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, state = parts(app)
        await pilot.press("w")
        shown = [m for m in messages if isinstance(m, WedgeShown)][-1]
        run = app.workspace.run
        assert timeline.cursor == shown.wedge.t_ns - run.start_ns
        assert timeline.selected_row.entity == "client/c2"
        assert events.pointer_seq == shown.wedge.seq
        assert app.main.query_one(TabbedContent).active == "tab-wedges"
        text = plain(wedge_text(app.workspace), width=200)
        assert "stuck_call" in text and "1. c2 pid 200 entered UVM_REGISTER_GPU" in text
        await pilot.press("s")
        assert app.main.query_one(TabbedContent).active == "tab-state"
        table = state.query_one("DataTable")
        assert any("wedged" in str(table.get_row_at(i)[1]) for i in range(table.row_count))
        assert "drain_held=2" in str(state.query_one("#state-counters").render())


@pilot_test
async def test_goto_time(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline, _, _ = parts(app)
        await pilot.press("g", *"2x", "enter")
        assert isinstance(app.screen, PromptScreen)
        assert "not a duration" in str(app.screen.query_one("#prompt-error").render())
        app.screen.query_one(Input).value = "2ms"
        await pilot.press("enter")
        assert timeline.cursor == 2_000_000


@pilot_test
async def test_help_lists_every_key_and_any_key_closes(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.text.plain
        for binding in (*RmtraceApp.BINDINGS, *Timeline.BINDINGS, *EventsTable.BINDINGS):
            assert binding.description in text
        assert "wedged" in text
        await pilot.press("z")
        assert not isinstance(app.screen, HelpScreen)


@pilot_test
async def test_diff_aligns_lanes_and_marks_the_divergence(story_paths):
    app = make_app(story_paths, paths=list(story_paths))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline, events, _ = parts(app)
        labels = [r.label.strip() for r in timeline.rows]
        assert labels.index("A calls") + 1 == labels.index("B calls")
        div = app.workspace.divergence
        assert div is not None and div.seq[0] is not None
        assert timeline.cursor == div.t_rel[0]  # the cursor starts where the runs part
        assert any(kind == "diverge" for kind, _ in timeline._marks())
        await pilot.press("d")
        assert app.main.query_one(TabbedContent).active == "tab-diff"
        assert "first divergence" in str(app.main.query_one("#diff-text").render())
        assert events.title().startswith("Events A")
        await pilot.press("x")
        assert app.workspace.active == 1 and events.title().startswith("Events B")


@pilot_test
async def test_keys_that_do_not_apply_are_off(story_paths):
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.check_action("switch_run", ()) is False
        assert app.check_action("toggle_follow", ()) is False
        await pilot.press("x")
        assert app.workspace.active == 0


@pilot_test
async def test_follow_a_growing_trace(tmp_path):
    path = str(tmp_path / "live.trace")
    writer = TraceWriter(path, {"backend": "fixture"}, threaded=False)

    def rec(i):
        return Record(Source.RM, Phase.ENTER if i % 2 == 0 else Phase.EXIT, 0x2A, time_ns=1_000_000 + i * 1000,
                      pid=7, tid=7, call_id=i // 2, buffers=(Buffer(Role.ARG, When.BEFORE, bytes(32)),))
    for i in range(10):
        writer.write(rec(i))
    writer.sync()
    def no_model(path, decoders):
        raise ValueError("a bug in the fold")  # the screen says so; the events still follow
    services = replace(double_services({}), load_model=no_model)
    app = RmtraceApp.open([path], services, follow=True)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        assert events.row_count == 10 and app.check_action("toggle_follow", ()) is True
        failed = [m for m in messages if isinstance(m, ModelFailed)]
        assert failed and "ValueError: a bug in the fold" in failed[0].error
        for i in range(10, 30):
            writer.write(rec(i))
        writer.sync()
        for _ in range(100):  # the app polls every FOLLOW_POLL_S; a loaded machine may be slow
            await pilot.pause(0.1)
            if events.row_count == 30:
                break
        assert events.row_count == 30 and any(isinstance(m, TraceGrew) for m in messages)
        assert events.pointer == 29
        timeline = app.main.query_one(Timeline)
        assert timeline.cursor == app.workspace.cursor == app.workspace.run.end_rel == 29_000
        assert timeline.window.t0 == 0 and timeline.window.t1 > 29_000  # still fitted to the whole run
        await pilot.press("F")
        assert not app.workspace.follow
    writer.close()


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
@pilot_test
async def test_small_and_large_terminals(story_paths, size):
    app = make_app(story_paths)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        timeline, events, _ = parts(app)
        assert timeline.size.height >= 7 and events.size.height >= 5
        assert events.render_line(1).text.strip().startswith("+0.000ms")
        await pilot.press("w")
        assert timeline.selected_row.entity == "client/c2"


def test_the_document_names_every_key(repo_root):
    text = (repo_root / "docs" / "tui.md").read_text()
    for owner in (RmtraceApp, Timeline, EventsTable, ObjectsTree, RecordDetail, FilterScreen):
        for binding in owner.BINDINGS:
            assert binding.description in text, f"docs/tui.md does not mention {owner.__name__}: {binding.description}"


@pilot_test
async def test_a_large_object_tree_fills_on_expand(story_paths, monkeypatch):
    from rmtrace.tui.widgets.objects import tree as tree_module
    monkeypatch.setattr(tree_module, "EAGER_NODES", 1)
    app = make_app(story_paths)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("o")
        tree = app.main.query_one(ObjectsTree)
        c1 = tree.root.children[0]
        assert not c1.is_expanded and not c1.children
        c1.expand()
        await pilot.pause()
        root = c1.children[0]
        assert root.data.class_name == "NV01_ROOT_CLIENT" and not root.children
        root.expand()
        await pilot.pause()
        assert root.children[0].data.class_name == "NV01_DEVICE_0"
