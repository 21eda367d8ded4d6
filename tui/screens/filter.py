"""The filter screen (``f``) and the one-line prompts (``/`` search, ``g`` go to a time)."""

from __future__ import annotations

from rmtrace.tui.filters import FIELDS, EventFilter
from rmtrace.tui.screens.modal import Modal
from rmtrace.tui.widgets.footer import KeysFooter
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.widgets import Input, Label, Static

from rmtrace.errors import RmtraceError
from rmtrace.timefmt import parse_duration

HINTS = {
    "pid": "1447,1448",
    "client": "c1,c2",
    "channel": "c1/ch0 or 0xcaf000d4",
    "source": "rm,uvm,gsp,sema,sys,mark",
    "operation": "a name or part of one: REGISTER_GPU",
    "status": "error, ok, in_flight or a status name",
    "text": "anywhere in the row",
}


class FilterScreen(Modal[EventFilter | None]):
    """One input per field; Enter applies, Escape leaves the filter as it was."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+r", "reset", "Clear all"),
    ]

    DEFAULT_CSS = """
    FilterScreen { align: center middle; }
    FilterScreen > Vertical { width: 72; max-width: 96%; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    FilterScreen Grid { grid-size: 2; grid-columns: 11 1fr; grid-rows: 1; grid-gutter: 0 1; height: auto; }
    FilterScreen Input { border: none; height: 1; padding: 0; }
    FilterScreen #filter-error { color: $error; height: auto; }
    """

    def __init__(self, current: EventFilter) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        values = self.current.as_fields()
        with Vertical():
            yield Static("Filter the events (Enter applies, Escape cancels)", classes="title")
            with Grid():
                for name in FIELDS:
                    yield Label(name)
                    yield Input(values[name], placeholder=HINTS[name], id=f"filter-{name}")
            if self.current.object_label:
                yield Static(f"object: {self.current.object_label} (from the objects tree; Esc there clears it)", markup=False)
            yield Static("", id="filter-error", markup=False)
            yield KeysFooter()

    def values(self) -> dict[str, str]:
        return {name: self.query_one(f"#filter-{name}", Input).value for name in FIELDS}

    @on(Input.Submitted)
    def _apply(self) -> None:
        try:
            flt = EventFilter.parse(self.values(), keep=self.current)
        except RmtraceError as exc:
            self.query_one("#filter-error", Static).update(str(exc))
            return
        self.dismiss(flt)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_reset(self) -> None:
        for name in FIELDS:
            self.query_one(f"#filter-{name}", Input).value = ""


class PromptScreen(Modal[str | None]):
    """One line of input at the bottom: search text or a time."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    PromptScreen { align: center bottom; }
    PromptScreen > Vertical { height: auto; width: 100%; background: $surface; border-top: solid $accent; }
    PromptScreen Input { border: none; height: 1; }
    PromptScreen #prompt-error { color: $error; height: auto; }
    """

    def __init__(self, prompt: str, placeholder: str = "", value: str = "", *, time: bool = False) -> None:
        super().__init__()
        self.prompt = prompt
        self.placeholder = placeholder
        self.value = value
        self.time = time

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.prompt)
            yield Input(self.value, placeholder=self.placeholder)
            yield Static("", id="prompt-error", markup=False)

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if self.time and text:
            try:
                parse_duration(text)
            except RmtraceError as exc:
                self.query_one("#prompt-error", Static).update(str(exc))
                return
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
