"""Wedges and a diff's divergence, in plain words."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from rmtrace.tui.view import RunView
from rmtrace.tui.workspace import Workspace
from textual.containers import VerticalScroll
from textual.widgets import Static

from rmtrace.timefmt import format_duration, format_offset

INDENT = 4
SHOWN_WEDGES = 40
"""Wedges listed at once (a large trace can have thousands); the current one is always among them."""


def _shown(count: int, current: int) -> range:
    """The SHOWN_WEDGES indexes around the current wedge (from the first while none is current)."""
    first = max(0, min(current - SHOWN_WEDGES // 2, count - SHOWN_WEDGES))
    return range(first, min(count, first + SHOWN_WEDGES))


def wedge_text(workspace: Workspace) -> Group:
    """Every wedge of every run; the one jumped to (``w``) with its whole chain, numbered."""
    parts: list = []
    for run_index, run in enumerate(workspace.runs):
        if not run.loaded:
            continue
        tag = workspace.tag(run_index)
        wedges = run.wedges()
        if not wedges:
            parts.append(Text(f"{tag + ': ' if tag else ''}no wedge found", style="green"))
        for i in _shown(len(wedges), workspace.wedge_index if run_index == workspace.active else -1):
            current = run_index == workspace.active and i == workspace.wedge_index
            parts.extend(_one(run, wedges[i], f"{tag}{' ' if tag else ''}#{i + 1}", current))
        if len(wedges) > SHOWN_WEDGES:
            parts.append(Text(f"  … {len(wedges) - SHOWN_WEDGES} more ({len(wedges)} in all; w / W step through them)",
                              style="dim"))
    if not parts:
        parts.append(Text("building the session model…"))
    return Group(*parts)


def _one(run: RunView, wedge: Any, name: str, current: bool) -> list:
    """A heading line, the summary, and (for the current wedge) the chain; wrapped lines keep their indent."""
    at = run.wedge_time(wedge)
    since = None if wedge.since_ns is None else wedge.since_ns - run.start_ns
    stuck = f", stuck since {format_offset(since)} ({format_duration(run.end_rel - since)} by the end)" \
        if since is not None and since <= at else ""
    who = f"client {wedge.client_id}" if wedge.client_id else "the host"
    out: list = [Text(f"{'▶ ' if current else '  '}{name} {wedge.kind}  {who}  at {format_offset(at)}{stuck}",
                      style="bold red" if current else "bold"),
                 Padding(Text(wedge.summary), (0, 0, 0, INDENT))]
    if current:
        out.extend(Padding(Text(f"{step}. {line}"), (0, 0, 0, INDENT)) for step, line in enumerate(wedge.chain, 1))
    return out


def divergence_text(workspace: Workspace) -> Text:
    div = workspace.divergence
    if not workspace.is_diff:
        return Text("one run: start rmtrace tui with two traces to compare them")
    if div is None:
        loaded = all(run.loaded for run in workspace.runs)
        return Text("the runs do not diverge" if loaded else "building the session models…")
    out = Text("first divergence\n", style="bold magenta")
    for tag, t, seq in zip(("A", "B"), div.t_rel, div.seq):
        if any(s is not None for s in div.seq):  # a whole client missing has no record to point at
            out.append(f"  {tag}: {'no such call' if seq is None or t is None else f'record {seq} at {format_offset(t)}'}\n")
    for line in div.lines:
        out.append(f"  {line}\n")
    return out


class TextPanel(VerticalScroll):
    """A scrolling page of plain words about the workspace, written again on ``reload()``."""

    DEFAULT_CSS = "TextPanel > Static { width: 1fr; }"
    TEXT_ID: str
    """The id of the Static that holds the page."""

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(Static(id=self.TEXT_ID), id=id)
        self.workspace = workspace

    def on_mount(self) -> None:
        self.reload()

    def page(self) -> Group | Text:
        raise NotImplementedError

    def reload(self) -> None:
        self.query_one(f"#{self.TEXT_ID}", Static).update(self.page())


class WedgePanel(TextPanel):
    TEXT_ID = "wedge-text"

    def page(self) -> Group:
        return wedge_text(self.workspace)


class DiffPanel(TextPanel):
    TEXT_ID = "diff-text"

    def page(self) -> Text:
        return divergence_text(self.workspace)
