"""One record in full: the decoded field tree beside a hex view of its buffers (Enter on an event)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from rmtrace.tui.view import RunView
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from rmtrace.record import Record, Role, When, enum_name, record_to_dict
from rmtrace.timefmt import format_duration, format_offset

HEX_WIDTH = 16
HEX_KEYS = frozenset({"hex"})
"""Keys of a decoded record's dict that hold raw bytes: the hex view beside the tree shows those."""


def hexdump(data: bytes, width: int = HEX_WIDTH) -> list[str]:
    """``offset  hex bytes  |ascii|`` lines."""
    lines = []
    for off in range(0, len(data), width):
        chunk = data[off:off + width]
        hexes = " ".join(f"{b:02x}" for b in chunk).ljust(width * 3 - 1)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{off:04x}  {hexes}  |{text}|")
    return lines


def buffers_text(records: tuple[Record, ...]) -> Text:
    """Every buffer of the call's records, each with its role, size and address, then its bytes."""
    out = Text()
    if not any(rec.buffers for rec in records):
        out.append("no buffers\n", style="dim")
    for buf in (b for rec in records for b in rec.buffers):
        cut = f", cut from {buf.orig_len}" if buf.orig_len != len(buf.data) else ""
        slot = f" slot {buf.slot}" if buf.slot else ""
        out.append(f"{enum_name(Role, buf.role)}/{enum_name(When, buf.when)}{slot}: {len(buf.data)} bytes{cut}"
                   f" @ {buf.addr:#x}\n", style="bold")
        for line in hexdump(buf.data):
            out.append(line + "\n")
    return out


def fill_tree(node: TreeNode, value: Any, name: str = "") -> None:
    """Nested dicts and lists as tree branches, scalars as leaves ``name: value``."""
    if isinstance(value, dict):
        branch = node.add(name, expand=True) if name else node
        for key, sub in value.items():
            if key not in HEX_KEYS:
                fill_tree(branch, sub, str(key))
    elif isinstance(value, (list, tuple)) and value and any(isinstance(v, (dict, list, tuple)) for v in value):
        branch = node.add(f"{name} [{len(value)}]", expand=len(value) <= 16)
        for i, sub in enumerate(value):
            fill_tree(branch, sub, f"[{i}]")
    else:
        shown = f"{value:#x}" if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF else value
        node.add_leaf(f"{name}: {shown}" if name else str(shown))


class RecordDetail(ModalScreen[None]):
    """Field tree on the left, hex on the right; Escape closes."""

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
        fields = dec.to_dict() if dec is not None else \
            {k: v for k, v in record_to_dict(records[0]).items() if k != "buffers"}
        fill_tree(tree.root, fields)
        with Vertical():
            yield Static(title, id="detail-title")
            with Horizontal():
                yield tree
                with ScrollableContainer(id="hex"):
                    yield Static(buffers_text(records))
            yield Footer()

    def on_mount(self) -> None:
        self.query_one(Tree).focus()
