"""The footer of every screen: Textual's, rebuilt only when the keys it shows change.

Textual's ``Footer`` removes and mounts a widget per key whenever the screen
says its bindings may have changed: twice per focus move (the focus's watcher,
then after the refresh), and on every reactive that has bindings.  Most of
those moves show the same keys, yet each rebuild (restyling and laying out a
dozen widgets) cost 30-60 ms of the UI thread, seven times in the second after
the first paint of a 1M-record trace, while the worker loading the session
model waited for the interpreter (bench/tui_open.py).  This footer draws the
same, and rebuilds at most once per refresh, and then only when what it would
show (each shown key, its text, whether it is enabled) differs from what it
shows.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """``Footer``, recomposed only when its keys change (see the module)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[tuple[object, ...], ...] | None = None
        """The keys of the last rebuild (``_keys``); None before the first."""
        self._pending = False
        """A rebuild is asked for after the next refresh."""

    def bindings_changed(self, screen: Screen) -> None:
        # Footer.bindings_changed, with its recompose coalesced and kept for a change of keys
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._pending:
            self._pending = True
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        self._pending = False
        if not self.is_attached:  # its screen closed meanwhile
            return
        keys = self._keys()
        if keys != self._shown:
            self._shown = keys
            await self.recompose()

    def _keys(self) -> tuple[tuple[object, ...], ...]:
        """What ``Footer.compose`` draws from the screen's bindings, per key it shows."""
        return tuple((b.key, self.app.get_key_display(b), b.description, b.action, b.group, enabled, tooltip)
                     for _, b, enabled, tooltip in self.screen.active_bindings.values() if b.show)
