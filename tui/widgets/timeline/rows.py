"""The timeline's rows: a heading per lane group (a client, or the host's ranks), its lanes below.

In a diff the same lane of both runs sits on adjacent rows (``A c1/ch0`` over
``B c1/ch0``), matched by entity id, which the session model keeps stable
across runs of the same program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from rmtrace.tui.states import LOOKS
from rmtrace.tui.view import LaneRow
from rmtrace.tui.widgets.timeline.scale import LaneIndex
from rmtrace.tui.workspace import Workspace

SEVERITY = {state: look.severity for state, look in LOOKS.items()}
KIND_ORDER = {"client": 0, "channel": 1, "rank": 2}


@dataclass(eq=False)
class TimelineRow:
    """One line of the timeline: a group's heading, or a lane.  Plain (not frozen, equal only to itself, as
    the drawn lines' cache keys it by id): ``build_rows`` makes one per lane, 12,537 at 1M records, and a
    frozen dataclass's ``__init__`` made that a third slower on the UI thread."""

    group: str
    label: str
    run: int = 0
    lane: LaneRow | None = None
    cache: dict[int, tuple[LaneRow, LaneIndex]] = field(default_factory=dict, repr=False, compare=False)
    """Where the lane's index is kept between ``build_rows`` calls (``build_rows``' cache)."""

    @cached_property
    def index(self) -> LaneIndex | None:
        """The lane's index, built when the row is first drawn or asked about (most rows never are)."""
        return None if self.lane is None else _index(self.lane, self.cache)

    @property
    def is_group(self) -> bool:
        return self.lane is None

    @property
    def entity(self) -> str | None:
        return None if self.lane is None else self.lane.entity


def build_rows(workspace: Workspace, collapsed: frozenset[str] = frozenset(),
               cache: dict[int, tuple[LaneRow, LaneIndex]] | None = None) -> list[TimelineRow]:
    """Every row in screen order; a collapsed group keeps only its heading.

    ``cache`` keeps each lane's index between calls (by lane identity; the
    entry holds the lane so the id stays valid); a row indexes its lane when
    first drawn.
    """
    cache = {} if cache is None else cache
    per_run = [run.lanes() for run in workspace.runs]
    current = {id(lane) for lanes in per_run for lane in lanes}
    for gone in [key for key in cache if key not in current]:  # a refold's old lanes (a followed trace)
        del cache[gone]
    headings: dict[str, str] = {}
    for run in workspace.runs:
        for group, label in run.group_labels().items():
            headings.setdefault(group, label)
    # each group's lanes by (kind, entity) in order of first appearance (a dict: a fleet's trace has
    # thousands of lanes, a list's membership test made this quadratic per group)
    entities: dict[str, dict[tuple[str, str], None]] = {}
    for lanes in per_run:
        for lane in lanes:
            entities.setdefault(lane.group, {})[lane.kind, lane.entity] = None
    groups = sorted(entities, key=lambda g: g == "host")
    by_key: list[Mapping[tuple[str, str], LaneRow]] = [
        {(lane.kind, lane.entity): lane for lane in lanes} for lanes in per_run]
    rows: list[TimelineRow] = []
    tags = [workspace.tag(run_index) for run_index in range(len(by_key))]
    for group in groups:
        mark = "▸" if group in collapsed else "▾"
        rows.append(TimelineRow(group, f"{mark} {headings.get(group, group)}"))
        if group in collapsed:
            continue
        for key in sorted(entities[group], key=lambda k: KIND_ORDER.get(k[0], 9)):
            for run_index, run_lanes in enumerate(by_key):
                shown = run_lanes.get(key)
                if shown is None:
                    continue
                tag = tags[run_index]
                rows.append(TimelineRow(group, f"  {tag + ' ' if tag else ''}{lane_label(shown)}", run_index, shown,
                                        cache))
    return rows


def lane_label(lane: LaneRow) -> str:
    """A lane's label under its group's heading: a client's own lane is its calls; the group prefix goes."""
    if lane.kind == "client":
        return "calls"
    prefix = f"{lane.group}/"
    return lane.label[len(prefix):] if lane.label.startswith(prefix) else lane.label


def _index(lane: LaneRow, cache: dict[int, tuple[LaneRow, LaneIndex]]) -> LaneIndex:
    hit = cache.get(id(lane))
    if hit is None or hit[0] is not lane:
        hit = cache[id(lane)] = (lane, LaneIndex.build([(t0, t1, state) for t0, t1, state, _ in lane.segments], SEVERITY))
    return hit[1]


def find_row(rows: Sequence[TimelineRow], entity: str, run: int | None = None) -> int | None:
    for i, row in enumerate(rows):
        if row.entity == entity and (run is None or row.run == run):
            return i
    return None
