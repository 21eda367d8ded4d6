"""Every key, by area (``?``), generated from the bindings themselves so it cannot drift."""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from rmtrace.tui.states import legend

MOUSE = (
    ("click on a lane", "select it and put the cursor there"),
    ("click on a group heading", "fold or unfold the group"),
    ("wheel over the lanes", "zoom around the pointer (shift: pan)"),
    ("wheel over the labels", "scroll the lanes"),
    ("drag over the lanes", "pan"),
    ("click on an event", "select it"),
)

KEY_NAMES = {
    "left": "←", "right": "→", "up": "↑", "down": "↓", "shift+left": "shift+←", "shift+right": "shift+→",
    "plus": "+", "equals_sign": "=", "minus": "-", "left_square_bracket": "[", "right_square_bracket": "]",
    "question_mark": "?", "slash": "/", "space": "space", "pageup": "PgUp", "pagedown": "PgDn",
}


def key_label(keys: str) -> str:
    return " ".join(KEY_NAMES.get(k, k) for k in keys.split(","))


def binding_rows(bindings: Iterable[Binding | tuple]) -> list[tuple[str, str]]:
    out = []
    for b in bindings:
        binding = b if isinstance(b, Binding) else Binding(*b)
        out.append((key_label(binding.key), binding.description or binding.action))
    return out


class HelpScreen(ModalScreen[None]):
    """Any key closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; max-width: 96%; height: 90%; border: thick $accent; background: $surface; }
    """

    def __init__(self, areas: Sequence[tuple[str, Sequence]], symbols: dict[str, str]) -> None:
        super().__init__()
        self.areas = areas
        self.symbols = symbols

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("rmtrace tui: keys (any key closes this)", style="bold"))
            for title, bindings in self.areas:
                yield Static(self._table(title, binding_rows(bindings)))
            yield Static(self._table("Mouse", MOUSE))
            yield Static(self._legend())

    @staticmethod
    def _table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
        table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in rows:
            table.add_row(key, what)
        return table

    def _legend(self) -> Table:
        return self._table("Lane states (symbol, state)", legend(self.symbols))

    def on_key(self, event) -> None:
        event.stop()
        self.dismiss(None)

    def on_click(self) -> None:
        self.dismiss(None)
