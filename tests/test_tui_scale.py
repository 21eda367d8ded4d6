"""Timeline arithmetic: windows, zoom and pan, the ruler, and which state a column shows."""

from rmtrace.tui.widgets.timeline.scale import MIN_SPAN_NS, LaneIndex, Window, fit, ruler, tick_step

SEV = {"allocated": 1, "waiting": 7, "wedged": 12}


def test_fit_shows_the_whole_run_and_its_last_instant():
    w = fit(1_000_000, 100)
    assert w.t0 == 0 and w.t1 > 1_000_000 and w.width == 100
    assert 0 <= w.column(1_000_000) < 100
    assert w.column(0) == 0


def test_column_and_time_round_trip():
    w = Window(1000, 2000, 10)
    assert w.ns_per_col == 100
    assert [w.column(t) for t in (1000, 1099, 1100, 1999)] == [0, 0, 1, 9]
    assert [w.time_at(c) for c in (0, 1, 10)] == [1000, 1100, 2000]


def test_zoom_keeps_the_anchor_in_place_and_stops_at_the_limits():
    w = Window(0, 10_000, 100)
    z = w.zoomed(0.5, 5000, total=10_000)
    assert z.span == 5000 and z.column(5000) == w.column(5000)
    tiny = Window(0, 2_000, 10)
    for _ in range(20):
        tiny = tiny.zoomed(0.5, 500, total=10_000)
    assert tiny.span == MIN_SPAN_NS
    out = w.zoomed(100, 5000, total=10_000)
    assert out.t0 == 0 and out.span == 10_000


def test_pan_and_showing_stay_inside_the_run():
    w = Window(0, 1000, 10)
    assert w.panned(-5, total=5000).t0 == 0
    assert w.panned(100, total=5000) == Window(4000, 5000, 10)
    moved = w.showing(3000, total=5000)
    assert moved.contains(3000) and moved.span == 1000
    assert w.showing(500, total=5000) is w


def test_ruler_has_round_ticks_with_labels():
    w = Window(0, 10_000_000, 100)
    step = tick_step(w)
    assert step in (1_000_000, 2_000_000, 5_000_000) and step / w.ns_per_col >= 14
    line = ruler(w)
    assert len(line) == 100
    assert line.startswith("|0ns") and "|2.000ms" in line


def test_the_most_severe_state_wins_a_shared_column():
    lane = LaneIndex.build([(0, 1000, "allocated"), (1000, 1010, "wedged"), (1010, 5000, "waiting")], SEV)
    coarse = Window(0, 5000, 5)
    cells = lane.cells(coarse)
    assert [lane.states[c] for c in cells] == ["allocated", "wedged", "waiting", "waiting", "waiting"]
    fine = Window(0, 2000, 20)
    states = [None if c is None else lane.states[c] for c in lane.cells(fine)]
    assert states[:10] == ["allocated"] * 10 and states[10] == "wedged" and states[11] == "waiting"


def test_columns_without_a_segment_are_empty():
    lane = LaneIndex.build([(100, 200, "waiting")], SEV)
    cells = lane.cells(Window(0, 400, 4))
    assert cells[0] is None and cells[2] is None and cells[3] is None
    assert lane.states[cells[1]] == "waiting"


def test_next_and_previous_change():
    lane = LaneIndex.build([(300, 400, "waiting"), (100, 300, "allocated")], SEV)
    assert lane.order == (1, 0)
    assert lane.next_change(0) == 100 and lane.next_change(100) == 300 and lane.next_change(300) is None
    assert lane.previous_change(300) == 100 and lane.previous_change(100) is None


def test_marks_never_cut_a_label():
    """A wedge (W) or divergence (≠) mark drops the label it would land in: never ``|10.W00s``."""
    w = Window(0, 10_000_000, 100)
    plain = ruler(w)
    col = plain.index("|2.000ms")
    marked = ruler(w, {col + 3: "W", 0: "≠"})
    assert marked[col] == "|" and marked[col + 3] == "W" and "2.000ms" not in marked and marked[0] == "≠"
    for label in ("|4.000ms", "|6.000ms"):
        assert label in marked
    tokens = [t.strip() for t in marked.replace("≠", "").replace("W", "").split("|")]
    assert all(not t or t.endswith("ms") and t[0].isdigit() for t in tokens)  # every label whole


def test_a_label_that_would_run_off_the_right_edge_is_left_out():
    w = Window(0, 8_300_000, 83)  # a tick every 2ms (20 columns): the one at 8ms sits 3 columns from the edge
    line = ruler(w)
    assert len(line) == 83 and "|6.000ms" in line and line.rstrip().endswith("|") and "|8." not in line
