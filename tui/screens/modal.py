"""The base of every screen the TUI opens over the main screen.

Textual's ``dismiss`` pops whatever screen is on top.  Keys arrive in bursts
(a held arrow key, fast typing, ``tmux send-keys``), and a burst is queued for
the screen that was on top when it came: a modal that closes on a key, or on
Enter in an input, would be asked to close again by the rest of the burst
after it has gone, and would pop the main screen below it.  A modal here
closes only itself, once.
"""

from __future__ import annotations

from typing import TypeVar

from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class Modal(ModalScreen[ResultT]):
    """A modal screen whose ``dismiss`` does nothing once it is no longer the screen on top."""

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        if not self.is_active:  # already closed: what is still queued for it must not close the screen below
            return AwaitComplete.nothing()
        return super().dismiss(result)
