"""One record in full: the decoded field tree beside a hex view of its buffers (Enter on an event)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from rmtrace.decoders import render
from rmtrace.decoders.base import Decoded
from rmtrace.decoders.render import StatusNamer, format_arg
from rmtrace.tui.fit import NARROW_WIDTH
from rmtrace.tui.screens.modal import Modal
from rmtrace.tui.view import RunView
from rmtrace.tui.widgets.footer import KeysFooter
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from rmtrace.record import Record, Role, Source, When, enum_name, record_to_dict
from rmtrace.timefmt import format_duration, format_offset

IDENTIFIERS = frozenset({"hClass", "cmd"})
"""Numbers the RM decoders keep beside the fields (a class, a control command): read in hex, as in the headers."""


def value_text(name: str, value: Any, handles: Mapping[str, int]) -> str:
    """A decoded value as a driver engineer reads it: handles, classes, commands and large numbers in hex,
    booleans ``true``/``false``, text quoted (``rmtrace show``'s rules, ``render.format_arg``)."""
    if isinstance(value, int) and not isinstance(value, bool) and name in IDENTIFIERS:
        return f"{value:#x}"
    return format_arg(name, value, handles)


def status_text(dec: Decoded) -> str | None:
    """``NV_OK (0x00000000)``; a plain return value as it is (in hex when it is an address)."""
    if dec.status is None:
        return dec.status_name
    if dec.status_name and dec.status_name != str(dec.status):
        return f"{dec.status_name} ({dec.status & 0xFFFFFFFF:#010x})"
    return value_text("status", dec.status, {})


def call_lines(dec: Decoded, status_name: StatusNamer | None) -> list[tuple[int, str]]:
    """(depth, text) of the field tree: the call's own facts, its handles and arguments, then every buffer
    field by field as ``rmtrace show -V`` prints it (``render.tree``, one place for how a member reads)."""
    lines = [(0, f"source = {enum_name(Source, dec.source)}"), (0, f"op = {dec.op:#x} ({dec.name})")]
    if dec.detail:
        lines.append((0, f"detail = {dec.detail}"))
    status = status_text(dec)
    if status is not None:
        lines.append((0, f"status = {status}"))
    if dec.errno:
        lines.append((0, f"errno = {dec.errno} (the ioctl failed before RM saw it)"))
    if not dec.known:
        lines.append((0, "# partly raw: the driver profile does not name every part"))
    for title, values in (("handles", dec.handles), ("args", dec.args), ("extra", dec.extra)):
        if values:
            lines.append((0, title))
            lines.extend(_value_lines(values, 1, dec.handles))
    for line in render.tree(dec, status_name, hex_dump=False):
        text = line.lstrip(" ")
        lines.append(((len(line) - len(text)) // 2 - 2, text))  # render indents buffers by 4, members by 2 more
    return lines


def _value_lines(values: Mapping[str, Any], depth: int, handles: Mapping[str, int]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for name, value in values.items():
        if hasattr(value, "items"):
            out.append((depth, str(name)))
            out.extend(_value_lines(value, depth + 1, handles))
        else:
            out.append((depth, f"{name} = {value_text(str(name), value, handles)}"))
    return out


def record_lines(rec: Record) -> list[tuple[int, str]]:
    """A record no decoder has named yet: its header, numbers as ``rmtrace show --raw`` reads them."""
    fields = {k: v for k, v in record_to_dict(rec).items() if k != "buffers"}
    return [(0, f"{k} = {value_text(k, v, {}) if k != 'op' else f'{v:#x}'}") for k, v in fields.items()]


def fill_tree(root: TreeNode, lines: Sequence[tuple[int, str]]) -> None:
    """Lines with their depth as a tree: a line with deeper lines after it is a branch, open."""
    stack: list[tuple[int, TreeNode]] = [(-1, root)]
    for i, (depth, text) in enumerate(lines):
        while stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1]
        if i + 1 < len(lines) and lines[i + 1][0] > depth:
            stack.append((depth, parent.add(Text(text), expand=True)))
        else:
            parent.add_leaf(Text(text))


def buffers_text(records: tuple[Record, ...]) -> Text:
    """Every buffer of the call's records, each with its role, size and address, then its bytes
    (``hexdump``'s layout; a run of equal lines is one ``*``)."""
    out = Text()
    if not any(rec.buffers for rec in records):
        out.append("no buffers\n", style="dim")
    for buf in (b for rec in records for b in rec.buffers):
        cut = f", cut from {buf.orig_len}" if buf.orig_len != len(buf.data) else ""
        slot = f" slot {buf.slot}" if buf.slot else ""
        out.append(f"{enum_name(Role, buf.role)}/{enum_name(When, buf.when)}{slot}: {len(buf.data)} bytes{cut}"
                   f" @ {buf.addr:#x}\n", style="bold")
        for line in render.hexdump(buf.data):
            out.append(line + "\n")
    return out


class RecordDetail(Modal[None]):
    """Field tree on the left, hex on the right (narrow: the tree above the hex); Escape closes."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("tab", "focus_next", "Tree ⇄ hex", show=False),
    ]

    DEFAULT_CSS = """
    RecordDetail { align: center middle; }
    RecordDetail > Vertical { width: 96%; height: 94%; border: thick $accent; background: $surface; }
    RecordDetail #detail-title { height: auto; padding: 0 1; text-style: bold; }
    RecordDetail Horizontal { height: 1fr; }
    RecordDetail Tree { width: 1fr; border-right: solid $primary; }
    RecordDetail #hex { width: 1fr; overflow-x: auto; }
    RecordDetail #hex > Static { width: auto; }
    RecordDetail.-narrow Horizontal { layout: vertical; }
    RecordDetail.-narrow Tree { width: 1fr; height: 1fr; border-right: none; border-bottom: solid $primary; }
    RecordDetail.-narrow #hex { width: 1fr; height: 1fr; }
    """

    def __init__(self, run: RunView, seq: int) -> None:
        super().__init__()
        self.run = run
        self.seq = seq

    def compose(self) -> ComposeResult:
        row = self.run.row(self.seq)
        dec, records = self.run.decoded_call(self.seq)
        latency = f"  latency {format_duration(row.latency_ns)}" if row.latency_ns is not None else ""
        title = (f"record {self.seq}  {format_offset(row.t_rel)}  [{row.pid}/{row.tid}]  {row.client or '-'}  "
                 f"{row.source} {row.operation}  {row.status}{latency}")
        tree: Tree[None] = Tree("fields", id="fields")
        tree.show_root = False
        fill_tree(tree.root, call_lines(dec, self.run.status_namer()) if dec is not None else record_lines(records[0]))
        with Vertical():
            yield Static(title, id="detail-title", markup=False)
            with Horizontal():
                yield tree
                with ScrollableContainer(id="hex"):
                    yield Static(buffers_text(records))
            yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Tree).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")  # the hex's 16 bytes a line need the width
