"""Every key, by area (``?``), generated from the bindings themselves so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.text import Text
from rmtrace.tui.screens.modal import Modal
from rmtrace.tui.states import legend
from rmtrace.tui.widgets.footer import KeysFooter
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

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


def help_text(areas: Sequence[tuple[str, Sequence]], symbols: Mapping[str, str]) -> Text:
    """Every area's keys, the mouse, and the lane states with their symbols."""
    sections = [(title, binding_rows(bindings)) for title, bindings in areas]
    sections.append(("Mouse", list(MOUSE)))
    sections.append(("Lane states (symbol: state)", legend(symbols)))
    width = max(len(key) for _, rows in sections for key, _ in rows) + 2
    out = Text("rmtrace tui: keys (Esc, q or ? closes this; ↑ ↓ PgUp PgDn scroll)\n", style="bold")
    for title, rows in sections:
        out.append(f"\n{title}\n", style="bold underline")
        for key, what in rows:
            out.append(f"  {key.ljust(width)}", style="bold cyan")
            out.append(f"{what}\n")
    return out


class HelpScreen(Modal[None]):
    """A page to scroll (↑ ↓ PgUp PgDn Home End) and close (Esc, q, ?), as less(1) does: other keys do nothing."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 96%; height: 1fr; max-height: 90%; border: thick $accent;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, areas: Sequence[tuple[str, Sequence]], symbols: Mapping[str, str]) -> None:
        super().__init__()
        self.text = help_text(areas, symbols)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(self.text, id="help-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#help").focus()

    def on_click(self, event: events.Click) -> None:
        if event.widget is self:  # outside the page
            self.dismiss(None)
