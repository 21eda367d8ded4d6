"""What a memo of decoded calls may key by: which decoders decode a call the same wherever its records'
bytes are the same (``memoizable``), and which bytes of a record say which call it is, not what it says
(``VOLATILE``, ``VOLATILE_SPAN``).  Show's memo of summaries (``rmtrace.columns.lines``) and jsonl's memo
of lines (``rmtrace.export.jsonl``) both key by these.

No numpy here: jsonl, which reads call by call, imports it, and numpy's import would be a fifth of a
small export's time.
"""

from __future__ import annotations

from rmtrace.decoders.base import Op
from rmtrace.decoders.ioctl import IoctlOp
from rmtrace.decoders.system import SysCall

from rmtrace.flat import field_offset
from rmtrace.record import ALIGN, RecordHeader

MEMO_OPS = (IoctlOp, SysCall)
"""Decoders whose call-level decode is a function of the call's records' bytes alone (not of which call it
is: seq, time, pid, tid, call id; nor of the calls before it), so that a summary can be kept by them."""
_BUILT_IN = frozenset({"rmtrace.decoders.ioctl", "rmtrace.decoders.rm", "rmtrace.decoders.uvm", "rmtrace.decoders.system"})
"""The decoders' own modules: a user's decoder may keep state, so its calls are never memoized."""


def memoizable(decoder: Op) -> bool:
    """Whether a call of ``decoder`` decodes the same wherever its records' bytes are the same: one of
    ``MEMO_OPS``, and the decoders' own (a user's decoder may keep state)."""
    return isinstance(decoder, MEMO_OPS) and type(decoder).__module__ in _BUILT_IN


VOLATILE = ("seq", "time_ns", "pid", "tid", "call_id")
"""The header fields that say which call a record is, not what it says: the rest of a record (its other
header fields and its buffers) is what a decoder reads."""


def _volatile_span() -> tuple[int, int]:
    sizes = {sub.name: sub.sizeof() for sub in RecordHeader.subcons}
    spans = sorted((field_offset(RecordHeader, n), field_offset(RecordHeader, n) + sizes[n]) for n in VOLATILE)
    if any(a[1] != b[0] for a, b in zip(spans, spans[1:])) or spans[0][0] % ALIGN or spans[-1][1] % ALIGN:
        raise AssertionError(f"the record header's {VOLATILE} are not whole words side by side")  # the mirror changed
    return spans[0][0], spans[-1][1]


VOLATILE_SPAN = _volatile_span()
"""Where ``VOLATILE`` lies in a record: bytes [start, end) (whole words, so that a block's can be cleared
as words: ``Block.content_ids``)."""
