"""One SVG per screen at 120x34 and at 80x24 (pytest-textual-snapshot); update with --snapshot-update.

Every trace is folded by the real session model: the main screen on a real
capture (the shipped H200 recording of three CUDA clients in a row); the
wedge on a replay of the real cuda-streams capture, three times in a row,
against the legacy host-service model (the second client wedges); the wedge
and the diff also on the constructed second-client wedge (tests/scenarios.py)
beside its fixed boot.
"""

import pytest
from textual.widgets import Input

from rmtrace import captures
from tests.tui_support import open_app, settle, write_boots

SIZE = (120, 34)


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch):
    """A blinking input cursor would make the SVGs differ from run to run (harlequin's fix)."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(scope="module")
def legacy_replay(tmp_path_factory):
    """The shipped cuda-streams capture replayed 3x sequentially against the legacy model: c2 wedges."""
    from rmtrace.replayer import Schedule, build_plan, make_target, replay
    out = tmp_path_factory.mktemp("replay") / "legacy-replay.trace"
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
    replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=str(out))
    return str(out)


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    return write_boots(tmp_path_factory.mktemp("boots"))


def app_for(*paths):
    return open_app(*paths)


def keys(*pressed):
    async def run_before(pilot):
        await settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle(pilot)
    return run_before


CAPTURE = str(captures.path())


def test_main_screen(snap_compare):
    assert snap_compare(app_for(CAPTURE), run_before=keys(), terminal_size=SIZE)


def test_main_screen_at_the_second_client(snap_compare):
    """The cursor where the second client starts (events, timeline and state follow it)."""
    assert snap_compare(app_for(CAPTURE), run_before=keys("g", *"420ms", "enter"), terminal_size=SIZE)


def test_legacy_replay_wedge(snap_compare, legacy_replay):
    assert snap_compare(app_for(legacy_replay), run_before=keys("w"), terminal_size=SIZE)


def test_wedge_view(snap_compare, boots):
    assert snap_compare(app_for(boots[0]), run_before=keys("w"), terminal_size=SIZE)


def test_wedge_view_zoomed(snap_compare, boots):
    assert snap_compare(app_for(boots[0]), run_before=keys("w", "t", "plus", "plus", "plus", "plus", "plus"),
                        terminal_size=SIZE)


def test_diff(snap_compare, boots):
    assert snap_compare(app_for(*boots), run_before=keys("d"), terminal_size=SIZE)


SMALL = (80, 24)
"""A first-class size: the events table and the side tabs take turns at the full width."""


def test_small_terminal(snap_compare, boots):
    """``w`` at 80x24: the wedge's chain where the events were."""
    assert snap_compare(app_for(boots[0]), run_before=keys("w"), terminal_size=SMALL)


def test_small_terminal_events(snap_compare):
    """The real capture's events at 80x24: control names readable, the run line on one line."""
    assert snap_compare(app_for(CAPTURE), run_before=keys(*["down"] * 12), terminal_size=SMALL)


def test_small_terminal_state(snap_compare):
    assert snap_compare(app_for(CAPTURE), run_before=keys("g", *"420ms", "enter", "s"), terminal_size=SMALL)


def test_small_terminal_help(snap_compare):
    """The help scrolls at 80x24 (here after two ↓)."""
    assert snap_compare(app_for(CAPTURE), run_before=keys("question_mark", "down", "down"), terminal_size=SMALL)


def test_small_terminal_record_detail(snap_compare):
    """The field tree above the hex at 80x24."""
    assert snap_compare(app_for(CAPTURE), run_before=keys(*["down"] * 9, "enter"), terminal_size=SMALL)


def test_objects(snap_compare):
    assert snap_compare(app_for(CAPTURE), run_before=keys("o"), terminal_size=SIZE)


def test_help_screen(snap_compare):
    assert snap_compare(app_for(CAPTURE), run_before=keys("question_mark"), terminal_size=SIZE)


def test_record_detail(snap_compare):
    """An RM_ALLOC of the real capture: its decoded fields beside the hex."""
    assert snap_compare(app_for(CAPTURE), run_before=keys(*["down"] * 9, "enter"), terminal_size=SIZE)


def test_filter_screen(snap_compare):
    assert snap_compare(app_for(CAPTURE), run_before=keys("f"), terminal_size=SIZE)
