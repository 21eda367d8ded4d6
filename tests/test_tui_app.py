"""The TUI driven by Pilot: every view and key, on the constructed boots folded by the real session model.

``boots`` are tests/scenarios.py's three clients in one boot: in ``wedge``
the host never resets its state for the second client (c2's
UVM_REGISTER_GPU never returns, its channel goes stale, c3 waits behind it);
``fixed`` is the same boot with the fixed host.  Expected values are read
from the trace and the model where the test is not about them.
"""

import threading
from dataclasses import replace

import pytest
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.messages import (
    CursorMoved,
    ModelFailed,
    ModelLoaded,
    ObjectCleared,
    ObjectSelected,
    RecordChosen,
    TraceGrew,
    TreesReady,
    WedgeShown,
)
from rmtrace.tui.screens.detail import RecordDetail
from rmtrace.tui.screens.filter import FilterScreen, PromptScreen
from rmtrace.tui.screens.help import HelpScreen
from rmtrace.tui.screens.main import MainScreen
from rmtrace.tui.services import library_services
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from rmtrace.tui.widgets.wedges.panel import divergence_text, wedge_text
from textual import events
from textual.content import Content
from textual.widgets import Input, TabbedContent

from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.session import load_session
from rmtrace.trace import TraceWriter
from tests.tui_support import open_app, pilot_test, plain, settle, write_boots

SIZE = (120, 34)
ROWS = 11
"""Timeline rows of the wedged boot: three clients (heading, calls, ch0) and the host (heading, rank 2)."""


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    return write_boots(tmp_path_factory.mktemp("boots"))


def parts(app):
    screen = app.main
    return screen.query_one(Timeline), screen.query_one(EventsTable), screen.query_one(StatePanel)


def labels_of(tree) -> list[str]:
    out, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        out.append(str(node.label))
        stack.extend(node.children)
    return out


@pilot_test
async def test_first_screen_needs_only_the_index(boots):
    gate = threading.Event()
    services = library_services()
    held = replace(services, load_model=lambda path, decoders: (gate.wait(10), services.load_model(path, decoders))[1],
                   load_channels=lambda path, decoders: (gate.wait(10), services.load_channels(path, decoders))[1])
    app = open_app(boots[0], services=held)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.pause()
        timeline, events, _ = parts(app)
        assert events.row_count == 106 and not app.workspace.run.loaded
        for _ in range(100):
            if app.workspace.run.decoders is not None:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        assert "RM_ALLOC NV01_ROOT_CLIENT" in events.render_line(3).text  # named by the decoders, before the model
        assert "building the session model" in timeline.status_text()
        assert "building the session model" in str(app.main.query_one("#run-line").render())
        await pilot.press("w")
        gate.set()
        await settle(pilot)
        assert any(isinstance(m, ModelLoaded) for m in messages)
        assert app.workspace.run.loaded and len(timeline.rows) == ROWS
        assert "3 clients, 7 lanes, 6 wedges" in str(app.main.query_one("#run-line").render())


@pilot_test
async def test_lanes_and_wedges_come_from_the_channels_fold_before_the_whole_model(boots, monkeypatch, tmp_path):
    """With the cache cold the worker posts the channels' fold first (lanes, wedges: what the first screen
    draws), then the whole model, which replaces it; what is on screen in the end is the whole model's."""
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cold"))
    gate = threading.Event()
    services = library_services()
    held = replace(services, load_model=lambda path, decoders: (gate.wait(10), services.load_model(path, decoders))[1])
    app = open_app(boots[0], services=held)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        run = app.workspace.run
        for _ in range(500):
            if run.loaded:
                break
            await pilot.pause(0.02)
        part = run.folded
        assert part is not None and not run.trees_ready  # the whole model is held back by the gate
        assert "3 clients, 7 lanes, 6 wedges" in str(app.main.query_one("#run-line").render())
        gate.set()
        await settle(pilot)
        loaded = [m for m in messages if isinstance(m, ModelLoaded)]
        assert [m.whole for m in loaded] == [False, True] and loaded[0].folded is part
        assert run.folded is loaded[1].folded and run.trees_ready
        whole = load_session(boots[0], cache=False)
        assert len(run.model.object_list) == len(whole.object_list) > len(part.model.object_list)
        assert [w.to_dict() for w in run.wedges()] == [w.to_dict() for w in part.wedges]
        assert [lane.entity for lane in run.lanes()] == [lane.entity for lane in part.lanes]
    # stored by the worker: the next open's first model is the whole one, and nothing is folded
    asked: list[str] = []
    again = replace(services, load_model=lambda path, decoders: (asked.append(path), services.load_model(path, decoders))[1])
    app = open_app(boots[0], services=again)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        assert [m.whole for m in messages if isinstance(m, ModelLoaded)] == [True] and not asked
        assert len(app.workspace.run.model.object_list) == len(whole.object_list) and app.workspace.run.trees_ready


@pilot_test
async def test_lanes_and_wedges_come_before_the_object_trees(boots, monkeypatch):
    """The worker posts the lanes and wedges, then builds the object trees (on a large trace they take
    as long as the rest): until they come the Objects tab says so, and the lanes and wedges are drawn."""
    from rmtrace.tui import view
    gate = threading.Event()
    build = view.object_trees
    monkeypatch.setattr(view, "object_trees", lambda model, start_ns: (gate.wait(10), build(model, start_ns))[1])
    app = open_app(boots[0])
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        for _ in range(500):
            if app.workspace.run.loaded:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        timeline, _, _ = parts(app)
        assert len(timeline.rows) == ROWS and app.workspace.run.wedges() and not app.workspace.run.trees_ready
        await pilot.press("o")
        assert labels_of(app.main.query_one(ObjectsTree)) == ["objects", "building the object trees…"]
        gate.set()
        await settle(pilot)
        assert any(isinstance(m, TreesReady) for m in messages)
        assert any("NV01_ROOT_CLIENT" in label for label in labels_of(app.main.query_one(ObjectsTree)))


@pilot_test
async def test_the_model_is_stored_in_the_cache_after_the_screen_has_it(boots, monkeypatch, tmp_path):
    """A folded model is drawn first, and stored in the trace's cache entry after (the store costs a third
    of a fold): the lanes, wedges and trees come while the store is held, and the next open loads it."""
    from rmtrace.decoders import decoders_for

    from rmtrace.columns import cache, modelcache
    from rmtrace.trace import TraceReader
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    gate, stored = threading.Event(), []
    store = modelcache.store_model
    monkeypatch.setattr(modelcache, "store_model",
                        lambda entry, model: (gate.wait(10), stored.append(store(entry, model)))[1])
    app = open_app(boots[0])
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        for _ in range(500):
            if any(isinstance(m, TreesReady) for m in messages):
                break
            await pilot.pause(0.02)
        assert app.workspace.run.wedges() and app.workspace.run.trees_ready and not stored
        gate.set()
        await settle(pilot)
    for _ in range(500):
        if stored:
            break
        threading.Event().wait(0.02)
    assert stored == [True]
    with TraceReader(str(boots[0])) as reader:
        decoders = decoders_for(reader)
        entry = cache.cache_root() / cache.entry_key(reader, decoders)
        assert modelcache.load_model(entry, reader, decoders, cache.load(entry), 20_000) is not None


@pilot_test
async def test_what_the_app_keeps_is_out_of_collections_until_it_exits(boots):
    """The first screen (with the startup heap), then the model once attached, are frozen: out of every
    generation ``gc.get_objects`` lists, so no full collection walks them again; the app's exit hands them
    back to the collector."""
    import gc
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.workspace.run
        assert run.loaded
        collected = {id(o) for o in gc.get_objects()}
        assert {id(app.main), id(run.model), id(run.folded)} & collected == set()
    assert gc.get_freeze_count() == 0


@pilot_test
async def test_the_main_screen_is_the_bottom_of_the_stack(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen_stack == [app.main] and isinstance(app.main, MainScreen)
        await pilot.press("question_mark")
        help_screen = app.screen
        help_screen.dismiss()
        help_screen.dismiss()  # a close still queued for a screen already gone closes nothing else
        await pilot.pause()
        assert app.screen is app.main


@pilot_test
async def test_timeline_keys(boots):
    app = open_app(boots[0])
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, state = parts(app)
        timeline.focus()
        await pilot.press("right", "right")
        moved = [m for m in messages if isinstance(m, CursorMoved)]
        assert moved and moved[-1].origin == "timeline" and timeline.cursor == moved[-1].t_rel > 0
        assert app.workspace.cursor == timeline.cursor
        assert app.workspace.run.t_rel_of(events.pointer_seq) >= timeline.cursor
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
        # lanes: down to c1's channel and jump between its events
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
        assert "c1/ch0 0xcaf000d4 COPY2: allocated" in timeline.status_text()
        # fold the c1 group and unfold it
        await pilot.press("up", "up", "space")
        assert len(timeline.rows) == ROWS - 2 and timeline.rows[0].label.startswith("▸")
        await pilot.press("enter")
        assert len(timeline.rows) == ROWS


@pilot_test
async def test_timeline_mouse(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline, _, _ = parts(app)
        x = timeline.label_width + timeline.plot_width // 2
        await pilot.click(Timeline, offset=(x, 4))  # border, ruler, c1 heading, c1 calls, c1/ch0
        assert timeline.selected_row.entity == "chan/c1/ch0"
        assert timeline.cursor == timeline.window.time_at(timeline.plot_width // 2 - 1)  # less the border
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
async def test_events_follow_and_lead_the_cursor(boots):
    app = open_app(boots[0])
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, _ = parts(app)
        events.focus()
        await pilot.press("down", "down", "down")
        chosen = [m for m in messages if isinstance(m, RecordChosen)]
        assert chosen[-1].seq == 3 and chosen[-1].origin == "events"
        assert timeline.cursor == app.workspace.run.t_rel_of(3)
        await pilot.press("end")
        assert events.pointer == 105 and timeline.cursor == app.workspace.run.t_rel_of(105)
        await pilot.press("pageup", "home")
        assert events.pointer == 0
        await pilot.press("pagedown")
        assert events.pointer > 10


@pilot_test
async def test_enter_opens_fields_and_hex_as_a_driver_engineer_reads_them(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        events.focus()
        await pilot.press("down", "down", "enter")  # record 2: c1's RM_ALLOC of its root client
        assert isinstance(app.screen, RecordDetail) and app.screen.seq == 2
        labels = labels_of(app.screen.query_one("#fields"))
        for shown in ("op = 0x2b (RM_ALLOC)", "status = NV_OK (0x00000000)", "hObject = 0xc1d00001",
                      "hClass = 0x41", "detail = NV01_ROOT_CLIENT"):
            assert shown in labels, labels
        assert "arg/before NVOS21_PARAMETERS (32 bytes)" in labels, labels
        words = {w.strip("(),") for label in labels for w in label.split()}
        assert not words & {"None", "True", "False", "[]", "{}"}, labels  # no Python reprs
        text = str(app.screen.query_one("#hex").query_one("Static").render())
        assert "ARG/BEFORE:" in text and "0000  " in text
        await pilot.press("escape")
        assert not isinstance(app.screen, RecordDetail)


@pilot_test
async def test_filter_screen(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        run = app.workspace.run
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
        expected = [s for s in range(run.record_count) if run.row(s).source == "SEMA" and run.row(s).error]
        assert expected and list(events.matches) == expected and events.scan_state == ""
        assert "filter: source sema, status error" in events.border_title
        await pilot.press("f", "escape")
        assert events.row_count == len(expected)
        events.focus()
        await pilot.press("c")
        assert events.matches is None and events.row_count == 106


@pilot_test
async def test_what_a_person_types_is_never_read_as_markup(boots):
    """A filter or a search with ``[`` in it once crashed the title with a MarkupError."""
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        events.set_filter(EventFilter(text="[/b]x[bold"))
        await settle(pilot)
        assert "'[/b]x[bold'" in Content.from_markup(events.border_title).plain  # shown as typed
        await pilot.press("slash", *"[b]", "enter")
        await settle(pilot)
        await pilot.press("f")
        app.screen.query_one("#filter-pid", Input).value = "[red]"
        await pilot.press("enter")
        assert "'[red]'" in str(app.screen.query_one("#filter-error").render())


@pilot_test
async def test_search(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        await pilot.press("slash")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"hint", "enter")
        await settle(pilot)
        run = app.workspace.run
        hits = [s for s in range(run.record_count) if "COMPLETION_HINT" in run.row(s).operation]
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
async def test_objects_select_and_clear(boots):
    app = open_app(boots[0])
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
        run = app.workspace.run
        assert picked.entities == {"chan/c1/ch0", "rank/2"}
        assert picked.handles == run.object_handles("c1", 0x5C000001) and 0xCAF000D4 in picked.handles
        assert timeline.highlighted == {"chan/c1/ch0", "rank/2"}
        assert all(run.row(s).handles & picked.handles for s in events.matches)
        assert len(events.matches) > 5
        await pilot.press("escape")
        await settle(pilot)
        assert any(isinstance(m, ObjectCleared) for m in messages)
        assert timeline.highlighted == set() and events.matches is None


@pilot_test
async def test_w_jumps_to_the_wedge(boots):
    app = open_app(boots[0])
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        timeline, events, state = parts(app)
        await pilot.press("w")
        shown = [m for m in messages if isinstance(m, WedgeShown)][-1]
        run = app.workspace.run
        assert shown.wedge is run.wedges()[0] and shown.wedge.kind == "in_flight" and shown.wedge.client_id == "c2"
        assert timeline.cursor == run.wedge_time(shown.wedge)
        assert timeline.selected_row.entity == "client/c2"
        assert events.pointer_seq == shown.wedge.seq
        assert app.main.query_one(TabbedContent).active == "tab-wedges"
        text = plain(wedge_text(app.workspace), width=200)
        assert "in_flight" in text and "1. c2 pid 1002 is blocked in UVM_REGISTER_GPU" in text
        await pilot.press("s")
        assert app.main.query_one(TabbedContent).active == "tab-state"
        table = state.query_one("DataTable")
        assert any("in_flight" in str(table.get_row_at(i)[1]) for i in range(table.row_count))
        assert "pub_calls=" in str(state.query_one("#state-counters").render())
        await pilot.press("W")
        assert shown.wedge is not run.wedges()[app.workspace.wedge_index]  # back around to the last


@pilot_test
async def test_goto_time(boots):
    app = open_app(boots[0])
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
async def test_help_lists_every_key_scrolls_and_closes(boots):
    app = open_app(boots[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.text.plain
        for binding in (*RmtraceApp.BINDINGS, *Timeline.BINDINGS, *EventsTable.BINDINGS):
            assert binding.description in text
        assert "wedged" in text
        scroll = app.screen.query_one("#help")
        await pilot.press("end")
        assert scroll.scroll_y == scroll.max_scroll_y > 0  # at 80x24 the help is longer than its box
        await pilot.press("z", "t", "w")  # keys that mean nothing here do nothing, and close nothing
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is app.main
        for key in ("q", "question_mark"):
            await pilot.press("question_mark")
            await pilot.press(key)
            assert app.screen is app.main
        assert app.return_code is None  # q closed the help; it did not quit


@pilot_test
async def test_diff_aligns_lanes_and_marks_the_divergence(boots):
    app = open_app(*boots)
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
        text = plain(divergence_text(app.workspace), width=200)
        assert "first divergence" in text and "c2: UVM_REGISTER_GPU" in text and "c2: c2:" not in text
        assert events.title().startswith("Events A")
        await pilot.press("x")
        assert app.workspace.active == 1 and events.title().startswith("Events B")


@pilot_test
async def test_keys_that_do_not_apply_are_off(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.check_action("switch_run", ()) is False
        assert app.check_action("toggle_follow", ()) is False
        await pilot.press("x")
        assert app.workspace.active == 0


@pilot_test
async def test_follow_a_growing_trace_whose_fold_fails(tmp_path):
    path = str(tmp_path / "live.trace")
    writer = TraceWriter(path, {"backend": "fixture"}, threaded=False)

    def rec(i):
        return Record(Source.RM, Phase.ENTER if i % 2 == 0 else Phase.EXIT, 0x2A, time_ns=1_000_000 + i * 1000,
                      pid=7, tid=7, call_id=i // 2, buffers=(Buffer(Role.ARG, When.BEFORE, bytes(32)),))
    for i in range(10):
        writer.write(rec(i))
    writer.sync()

    def fold_with_a_bug(path, decoders):
        raise ValueError("a bug in the fold")  # the screen says so; the events still follow
    app = open_app(path, services=replace(library_services(), load_model=fold_with_a_bug), follow=True)
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
        # The app polls every FOLLOW_POLL_S; a loaded machine may be slow.  row_count reads the run's record
        # count, which the poll grows before its TraceGrew is dispatched (and the pointer moved): wait for both.
        for _ in range(100):
            await pilot.pause(0.1)
            if events.row_count == 30 and any(isinstance(m, TraceGrew) for m in messages):
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
async def test_small_and_large_terminals(boots, size):
    app = open_app(boots[0])
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        timeline, events, _ = parts(app)
        assert timeline.size.height >= 7 and events.size.height >= 5
        assert events.render_line(1).text.strip().startswith("+0.000ms")
        await pilot.press("w")
        assert timeline.selected_row.entity == "client/c2"


@pilot_test
async def test_80x24_shows_the_events_or_the_side_tabs_at_full_width(boots):
    app = open_app(boots[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.main
        _, events, state = parts(app)
        assert screen.narrow and events.display and events.outer_size.width == 80
        line = events.render_line(9).text  # record 8: c1's RM_CONTROL NV2080_CTRL_CMD_GPU_GET_INFO_V2
        assert "RM_CONTROL NV2080" in line and "GPU_GET_INFO_V2" in line and "NV_OK" in line
        assert " c1 " in line  # the client column stays
        await pilot.press("s")
        assert not events.display and state.outer_size.width == 80
        assert any(b.binding.description == "Events" for b in screen.active_bindings.values())
        rows = [state.query_one("DataTable").get_row_at(i) for i in range(3)]
        assert all(str(state_cell).strip(" ~-=").split() for _, state_cell, _ in rows)  # states whole, not one letter
        await pilot.press("e")
        assert events.display and app.focused is events
        await pilot.press("w")
        assert not events.display and app.main.query_one(TabbedContent).active == "tab-wedges"
        run_line = str(screen.query_one("#run-line").render())
        assert "\n" not in run_line.strip() and len(run_line.strip()) <= 78


@pilot_test
async def test_a_terminal_made_narrow_keeps_the_focus_where_it_shows(boots):
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _, events, _ = parts(app)
        await pilot.press("s")  # wide: the tab changes, the events keep the focus
        assert app.focused is events and events.display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.main.narrow and not events.display and app.focused is not events
        await pilot.press("e")
        assert events.display and app.focused is events
        await pilot.resize_terminal(*SIZE)
        await pilot.pause()
        assert not app.main.narrow and events.display and app.main.query_one(TabbedContent).display


def test_the_document_names_every_key(repo_root):
    text = (repo_root / "docs" / "tui.md").read_text()
    for owner in (RmtraceApp, MainScreen, Timeline, EventsTable, ObjectsTree, RecordDetail, FilterScreen, HelpScreen):
        for binding in owner.BINDINGS:
            assert binding.description in text, f"docs/tui.md does not mention {owner.__name__}: {binding.description}"


@pilot_test
async def test_a_large_object_tree_fills_on_expand(boots, monkeypatch):
    from rmtrace.tui.widgets.objects import tree as tree_module
    monkeypatch.setattr(tree_module, "EAGER_NODES", 1)
    app = open_app(boots[0])
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



@pilot_test
async def test_the_footer_is_rebuilt_only_when_its_keys_change(boots, monkeypatch):
    """KeysFooter: a focus move that keeps the keys shown rebuilds nothing (Textual's Footer rebuilt its key
    widgets on every bindings signal, twice per focus move); one that changes them shows the new keys."""
    from rmtrace.tui.widgets.footer import KeysFooter
    from textual.widgets import Footer

    rebuilt: list[int] = []
    recompose = Footer.recompose

    async def counted(self):
        rebuilt.append(1)
        await recompose(self)
    monkeypatch.setattr(KeysFooter, "recompose", counted)
    app = open_app(boots[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        def shown() -> str:
            return " ".join(str(key.render()) for key in app.main.query_one(KeysFooter).query("FooterKey"))
        assert "Fields + hex" in shown() and "Zoom in" not in shown()  # the events table has the focus
        before = len(rebuilt)
        for _ in range(3):  # bindings signals that leave the keys as they are
            app.main.refresh_bindings()
            await pilot.pause()
        app.main.query_one(EventsTable).blur()
        app.main.query_one(EventsTable).focus()
        await settle(pilot)
        assert len(rebuilt) == before
        await pilot.press("t")  # the timeline: its keys
        await settle(pilot)
        assert len(rebuilt) == before + 1
        assert "Zoom in" in shown() and "Fields + hex" not in shown()


_FOOTER_BINDINGS_CHANGED = '''def bindings_changed(self, screen: Screen) -> None:
    self._bindings_ready = True
    if not screen.app.app_focus:
        return
    if self.is_attached and screen is self.screen:
        self.call_after_refresh(self.recompose)
'''


def test_keys_footer_copies_the_footer_of_the_textual_it_runs_on():
    """KeysFooter.bindings_changed is Textual 8.2's Footer.bindings_changed with its recompose coalesced, and it
    sets the private flag that Footer.compose reads: a Textual whose Footer differs must fail here rather than
    draw an empty or stale footer with every other test green."""
    import inspect
    import textwrap

    from textual.widgets import Footer

    assert textwrap.dedent(inspect.getsource(Footer.bindings_changed)) == _FOOTER_BINDINGS_CHANGED
    assert "if not self._bindings_ready:" in inspect.getsource(Footer.compose)
