"""Marks (source MARK): what the recorder or a replay says about a trace.

The ops are rmtrace's own (``MarkOp``): IN_FLIGHT names a call (pid, tid,
call_id) still in flight when recording stopped; LOST, VERDICT and STOP carry
JSON in a TEXT buffer; NOTE carries free text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rmtrace.decoders.base import Decoded, DecodedBuffer, Level, Op, bind_source
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import MarkOp, Record, Role, Source


@dataclass(frozen=True)
class MarkKind(Op):
    """One mark op: its name and whether its TEXT is JSON."""

    name: str
    op: int
    json_text: bool = False

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        rec = records[0]
        out = Decoded(Source.MARK, rec.op, self.name, level=level)
        if rec.op == MarkOp.IN_FLIGHT:
            out.args = {"pid": rec.pid, "tid": rec.tid, "call_id": rec.call_id}
        for buf in rec.buffers:
            value: Any = buf.data
            if buf.role == Role.TEXT:
                value = buf.data.decode("utf-8", "replace")
                if self.json_text:
                    try:
                        value = json.loads(value)
                    except ValueError:
                        out.known = False
                        out.note("TEXT is not JSON")
                out.args["text" if isinstance(value, str) else "data"] = value
            if level >= Level.FULL:
                out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, value=value))
        return out


MARK_OPS: dict[int, Op] = {
    MarkOp.IN_FLIGHT: MarkKind("MARK_IN_FLIGHT", MarkOp.IN_FLIGHT),
    MarkOp.LOST: MarkKind("MARK_LOST", MarkOp.LOST, json_text=True),
    MarkOp.NOTE: MarkKind("MARK_NOTE", MarkOp.NOTE),
    MarkOp.VERDICT: MarkKind("MARK_VERDICT", MarkOp.VERDICT, json_text=True),
    MarkOp.STOP: MarkKind("MARK_STOP", MarkOp.STOP, json_text=True),
}


def mark_table(profile: DriverProfile) -> dict[int, Op]:
    return dict(MARK_OPS)


bind_source(Source.MARK, mark_table)
