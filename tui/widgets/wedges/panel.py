"""Wedges and a diff's divergence, in plain words."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from rmtrace.timefmt import format_duration, format_offset
from rmtrace.tui.workspace import Workspace


def wedge_text(workspace: Workspace) -> Text:
    """Every wedge of every run, the one jumped to (``w``) first with its whole chain."""
    out = Text()
    any_run_loaded = False
    for run_index, run in enumerate(workspace.runs):
        if not run.loaded:
            continue
        any_run_loaded = True
        tag = workspace.tag(run_index)
        wedges = run.wedges()
        if not wedges:
            out.append(f"{tag + ': ' if tag else ''}no wedge found\n", style="green")
            continue
        for i, wedge in enumerate(wedges):
            current = run_index == workspace.active and i == workspace.wedge_index
            out.append_text(_one(wedge, run.start_ns + run.wedge_time(wedge), run.start_ns,
                                 f"{tag}{' ' if tag else ''}#{i + 1}", current))
    if not any_run_loaded:
        out.append("building the session model…")
    return out


def _one(wedge: Any, t_ns: int, start_ns: int, name: str, current: bool) -> Text:
    out = Text()
    marker = "▶ " if current else "  "
    since = wedge.since_ns
    waited = f", stuck {format_duration(t_ns - since)}" if since is not None and since <= t_ns else ""
    who = f"client {wedge.client_id}" if wedge.client_id else "the host"
    out.append(f"{marker}{name} {wedge.kind}  {who}  at {format_offset(t_ns - start_ns)}{waited}\n",
               style="bold red" if current else "bold")
    out.append(f"    {wedge.summary}\n")
    if current:
        for step, line in enumerate(wedge.chain, 1):
            out.append(f"    {step}. {line}\n")
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
        where = "no such record" if seq is None else f"record {seq} at {format_offset(t)}"
        out.append(f"  {tag}: {where}\n")
    for line in div.lines:
        out.append(f"  {line}\n")
    return out


class WedgePanel(VerticalScroll):
    DEFAULT_CSS = "WedgePanel > Static { width: 1fr; }"

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(Static(id="wedge-text"), id=id)
        self.workspace = workspace

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self.query_one("#wedge-text", Static).update(wedge_text(self.workspace))


class DiffPanel(VerticalScroll):
    DEFAULT_CSS = "DiffPanel > Static { width: 1fr; }"

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(Static(id="diff-text"), id=id)
        self.workspace = workspace

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self.query_one("#diff-text", Static).update(divergence_text(self.workspace))
