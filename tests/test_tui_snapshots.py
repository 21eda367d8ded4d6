"""One SVG per screen at a fixed terminal size (pytest-textual-snapshot); update with --snapshot-update."""

import pytest
from textual.widgets import Input

from rmtrace.tui.app import RmtraceApp
from tests.tui_doubles import double_services, wedge_story

SIZE = (120, 34)


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch):
    """A blinking input cursor would make the SVGs differ from run to run (harlequin's fix)."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture
def models(tmp_path):
    a, b = str(tmp_path / "run1.trace"), str(tmp_path / "run2.trace")
    return {a: wedge_story(a), b: wedge_story(b, second_client_recovers=True)}


def app_for(models, n=1):
    return RmtraceApp.open(list(models)[:n], double_services(models))


async def settled(pilot):
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def keys(*pressed):
    async def run_before(pilot):
        await settled(pilot)
        for key in pressed:
            await pilot.press(key)
            await settled(pilot)
    return run_before


def test_main_screen(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys(), terminal_size=SIZE)


def test_wedge_view(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys("w"), terminal_size=SIZE)


def test_diff(snap_compare, models):
    assert snap_compare(app_for(models, 2), run_before=keys("d"), terminal_size=SIZE)


def test_small_terminal(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys("w"), terminal_size=(80, 24))


def test_help_screen(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys("question_mark"), terminal_size=SIZE)


def test_record_detail(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys("down", "enter"), terminal_size=SIZE)


def test_filter_screen(snap_compare, models):
    assert snap_compare(app_for(models), run_before=keys("f"), terminal_size=SIZE)
