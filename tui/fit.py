"""Text fitted to the columns it has, and the width below which the screens change their layout.

Names of RM calls are long (``RM_CONTROL NV2080_CTRL_CMD_BUS_GET_PCIE_SUPPORTED_GPU_ATOMICS``)
and what tells two of them apart is at both ends: the verb and the class at
the start, the command at the end.  So a name that does not fit loses its
middle, not its end.
"""

from __future__ import annotations

NARROW_WIDTH = 100
"""Below this many columns the main screen shows the events table or the side tabs, one at a time and at
full width (``e``; ``s`` ``o`` ``w`` ``d``), and the field view puts its tree above the hex."""
ELLIPSIS = "…"
MIN_TAIL = 8
"""A middle cut keeps at least this much of the end, or it is made in the middle of the text instead."""


def elide(text: str, width: int) -> str:
    """``text`` cut at the end to ``width`` columns, with an ellipsis when cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS if width > 0 else ""


def elide_middle(text: str, width: int) -> str:
    """``text`` in ``width`` columns, its middle replaced by an ellipsis.

    The head keeps every word but the last and that word's first ``_`` part
    (``→ RM_CONTROL NV2080…SUPPORTED_GPU_ATOMICS``); the tail takes the rest.
    """
    if len(text) <= width:
        return text
    if width < 2 * MIN_TAIL:
        return elide(text, width)
    room = width - 1
    prefix, _, last = text.rpartition(" ")
    head = f"{prefix} {last.split('_', 1)[0]}" if prefix and "_" in last else ""
    if not head or len(head) > room - MIN_TAIL:
        head = text[: (room + 1) // 2]
    return head + ELLIPSIS + text[len(text) - (room - len(head)):]

