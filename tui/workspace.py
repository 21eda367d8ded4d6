"""The runs on screen and what they share: the cursor, which run the tables show, a diff's divergence.

One run for ``rmtrace tui FILE``, two for ``rmtrace tui A B``.  Widgets get
this object (never a path); the application changes it and tells the widgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmtrace.tui.view import RunView

if TYPE_CHECKING:
    from rmtrace.analysis.diff import Divergence as AnalysisDivergence

RUN_TAGS = ("A", "B")
"""How a diff names its runs on screen."""


@dataclass(frozen=True)
class Divergence:
    """Where two runs first differ, as the screen marks it."""

    t_rel: tuple[int | None, int | None]
    """Time of the divergent record in each run (None: that run has no such record)."""
    seq: tuple[int | None, int | None]
    lines: tuple[str, ...]
    """What differs, in plain words."""


@dataclass
class Workspace:
    runs: Sequence[RunView]
    active: int = 0
    cursor: int = 0
    """The time cursor, ns relative to each run's start."""
    follow: bool = False
    divergence: Divergence | None = None
    wedge_index: int = -1

    @property
    def run(self) -> RunView:
        return self.runs[self.active]

    @property
    def is_diff(self) -> bool:
        return len(self.runs) > 1

    @property
    def end_rel(self) -> int:
        return max(r.end_rel for r in self.runs)

    def tag(self, index: int) -> str:
        return RUN_TAGS[index] if self.is_diff else ""

    def divergence_from(self, div: AnalysisDivergence | None) -> Divergence | None:
        """The analysis' answer in screen terms (see ``rmtrace.analysis.diff``)."""
        if div is None:
            return None
        seq_a, seq_b = (None if call is None else call.enter_seq for call in (div.a, div.b))
        run_a, run_b = self.runs
        seqs = (seq_a, seq_b)
        times = (None if seq_a is None else run_a.t_rel_of(seq_a), None if seq_b is None else run_b.t_rel_of(seq_b))
        return Divergence(times, seqs, (div.summary, *div.details))  # the summary names its client
