"""What the TUI's tests share: real traces, the real session model, Pilot helpers, key bursts.

Every app here is opened with ``library_services()``: the trace is folded by
``rmtrace.session.load_session``, its wedges found by ``rmtrace.analysis``.
The traces are the constructed boots of ``tests/scenarios.py`` (the second
client wedges, or the fixed host lets all three run) and the shipped captures.
"""

from __future__ import annotations

import asyncio
import functools
import io
import unicodedata
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from rmtrace.tui.app import RmtraceApp
from rmtrace.tui.services import Services, library_services
from textual import events
from textual.app import _character_to_key, _get_unicode_name_from_key
from textual.keys import REPLACED_KEYS
from textual.pilot import Pilot

from tests.scenarios import sequential


def write_boots(folder: Path) -> tuple[str, str]:
    """The constructed boot whose second client wedges, and the same boot with the fixed host."""
    return str(sequential(folder / "wedge.trace", True)), str(sequential(folder / "fixed.trace", False))


def open_app(*paths: str, services: Services | None = None, follow: bool = False) -> RmtraceApp:
    return RmtraceApp.open(list(paths), services or library_services(), follow=follow)


def pilot_test(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an ``async def`` test in its own event loop (no asyncio plugin needed); fixtures still work."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))
    return run


async def settle(pilot: Pilot) -> None:
    """Until the workers (the fold, scans, searches) are done and what they posted is handled."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def plain(renderable: Any, width: int = 80) -> str:
    """What a Rich renderable shows, as text (for asserting on panels built from Groups)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def key_event(key: str) -> events.Key:
    """The Key event a terminal driver posts for ``key`` (as Pilot builds it)."""
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


def burst(app: RmtraceApp, keys: Iterable[str]) -> None:
    """Post ``keys`` at once, as a terminal delivers a held key or ``tmux send-keys``: none waits for the one
    before it to be handled (Pilot's ``press`` does, and so never shows what a burst does)."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        event = key_event(key)
        event.set_sender(app)
        driver.send_message(event)
