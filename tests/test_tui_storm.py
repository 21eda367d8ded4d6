"""Key storms: hundreds of random keys in bursts on every screen, and the TUI still answers ``q``.

A burst is posted the way a terminal delivers a held key or ``tmux send-keys``:
no key waits for the one before it.  That is what once closed the help screen
twice and popped the main screen under it (issue 14).  The seeds are fixed, so
a failure names the keys that caused it; ``RMTRACE_STORM_KEYS`` raises the
number of keys per screen.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.screens.detail import RecordDetail
from rmtrace.tui.screens.filter import FilterScreen, PromptScreen
from rmtrace.tui.screens.help import HelpScreen
from rmtrace.tui.screens.main import MainScreen
from rmtrace.tui.widgets.events.table import EventsTable
from rmtrace.tui.widgets.objects.tree import ObjectsTree
from rmtrace.tui.widgets.state.panel import StatePanel
from rmtrace.tui.widgets.timeline.timeline import Timeline
from textual.widgets import DataTable

from tests.tui_support import burst, open_app, pilot_test, settle, write_boots

KEYS_PER_SCREEN = int(os.environ.get("RMTRACE_STORM_KEYS", "200"))
BURST = (1, 24)
"""Keys per burst, at random in this range; the app catches its breath between bursts."""

STORM_KEYS = (
    # every key some screen binds, but q: it quits the main screen (the storm ends with it)
    "question_mark", "w", "W", "f", "slash", "g", "t", "e", "s", "o", "d", "x", "F", "n", "N", "p", "c", "0",
    "plus", "equals_sign", "minus", "left_square_bracket", "right_square_bracket", "ctrl+r",
    "left", "right", "up", "down", "shift+left", "shift+right", "home", "end", "pageup", "pagedown",
    "enter", "escape", "space", "tab", "shift+tab", "backspace", "delete",
    # text, as typed into the filter, search and go-to inputs
    *"abhjkmruvyz12345679.,-", "ms", "full_stop",
)

Opener = Callable[[RmtraceApp], None]


def focus(widget_type: type) -> Opener:
    return lambda app: app.main.query_one(widget_type).focus()


def in_state_table(app: RmtraceApp) -> None:
    app.main.query_one(StatePanel).query_one(DataTable).focus()


SCREENS: dict[str, tuple[tuple[str, ...], Opener | None, Callable[[RmtraceApp], bool]]] = {
    "timeline": (("t",), None, lambda app: isinstance(app.focused, Timeline)),
    "events": (("e",), None, lambda app: isinstance(app.focused, EventsTable)),
    "objects": (("o",), focus(ObjectsTree), lambda app: isinstance(app.focused, ObjectsTree)),
    "state": (("s",), in_state_table, lambda app: isinstance(app.focused, DataTable)),
    "help": (("question_mark",), None, lambda app: isinstance(app.screen, HelpScreen)),
    "filter": (("f",), None, lambda app: isinstance(app.screen, FilterScreen)),
    "go to and search": (("g",), None, lambda app: isinstance(app.screen, PromptScreen)),
    "fields": (("e", "enter"), None, lambda app: isinstance(app.screen, RecordDetail)),
}


@pytest.fixture(scope="module")
def boots(tmp_path_factory):
    return write_boots(tmp_path_factory.mktemp("storm"))


async def back_to_main(pilot) -> None:
    for _ in range(6):
        if pilot.app.screen is pilot.app.main:
            return
        await pilot.press("escape")
        await settle(pilot)
    raise AssertionError(f"escape does not lead back to the main screen from {pilot.app.screen!r}")


async def storm(pilot, rng: random.Random, screen: str) -> list[list[str]]:
    """KEYS_PER_SCREEN keys in bursts, reopening ``screen`` whenever a burst has left it; returns the bursts."""
    keys, opener, is_open = SCREENS[screen]
    app = pilot.app
    sent: list[list[str]] = []
    while sum(map(len, sent)) < KEYS_PER_SCREEN:
        if not is_open(app):
            await back_to_main(pilot)
            await pilot.press(*keys)
            if opener is not None:
                opener(app)
            await pilot.pause()
        keys_now = rng.choices(STORM_KEYS, k=rng.randint(*BURST))
        sent.append(keys_now)
        burst(app, keys_now)
        await pilot.pause()
    await settle(pilot)
    return sent


async def still_answers_q(pilot) -> None:
    app = pilot.app
    assert isinstance(app.screen_stack[0], MainScreen)
    await back_to_main(pilot)
    await pilot.press("q")
    await pilot.pause()
    assert app.return_code == 0, "q did not quit"


@pytest.mark.parametrize("screen", list(SCREENS))
@pilot_test
async def test_a_key_storm_on_every_screen(boots, screen):
    rng = random.Random(f"storm {screen}")
    app = open_app(boots[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        sent = await storm(pilot, rng, screen)
        assert app._exception is None, f"the storm on {screen} raised; its bursts: {sent}"
        await still_answers_q(pilot)


@pilot_test
async def test_a_key_storm_on_a_diff(boots):
    rng = random.Random("storm diff")
    app = open_app(*boots)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        sent = await storm(pilot, rng, "events")
        assert app._exception is None, f"the storm on the diff raised; its bursts: {sent}"
        await still_answers_q(pilot)


@pilot_test
async def test_two_keys_at_once_on_the_help_screen_do_not_close_what_is_below(boots):
    """The issue's own case: ``?``, two ↓ at once, then ``t``."""
    app = open_app(boots[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        help_screen = app.screen
        scroll = help_screen.query_one("#help")
        assert scroll.max_scroll_y > 0  # at 80x24 the help is longer than its box: it scrolls
        burst(app, ["down", "down"])
        await pilot.pause()
        await app.animator.wait_until_complete()
        assert app.screen is help_screen and scroll.scroll_y > 0  # it scrolled and stayed
        burst(app, ["escape", "escape", "t"])  # the second escape comes to the main screen: nothing to close
        await pilot.pause()
        assert app.screen is app.main and isinstance(app.focused, Timeline)
        await still_answers_q(pilot)
