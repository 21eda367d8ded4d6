"""The decoders of one driver profile, as one object: ``DecoderSet``.

``decoders_for(trace)`` picks the profile from the trace's recorded driver
version (the nearest of its branch, with a warning, when that exact version
is not shipped; ``override`` forces one) and builds every bound source table
for it, then lays users' own decoders and plugin tables over them.

Decoding never raises: an operation no table has decodes as raw bytes with a
note, and a decoder that fails on odd bytes gives the raw form with the error
as a note (``Decoded.extra["exception"]``, which ``coverage`` counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rmtrace.decoders.base import Decoded, Label, Level, Op, RawOp, bound_tables
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.calls import Call, CallState, Keyer, call_key, pair_calls
from rmtrace.record import Record, Source


class DecoderSet:
    """Every decoder for one profile: ``label``, ``decode``, and call pairing."""

    def __init__(self, profile: DriverProfile, warning: str | None = None, *, user: bool = True) -> None:
        from rmtrace.decoders.user import user_tables  # user decoders are the last layer
        self.profile = profile
        self.warning = warning
        self.tables: dict[int, dict[int, Op]] = bound_tables(profile)
        self.user_sources: list[str] = []
        if user:
            for origin, tables in user_tables(profile):
                self.user_sources.append(origin)
                for source, ops in tables.items():
                    self.tables.setdefault(int(source), {}).update(ops)
        self._raw: dict[tuple[int, int], RawOp] = {}

    def op(self, source: int, op: int) -> Op:
        """The decoder bound to (source, op); a RawOp when none is."""
        found = self.tables.get(source, {}).get(op)
        if found is not None:
            return found
        raw = self._raw.get((source, op))
        if raw is None:
            raw = self._raw[(source, op)] = RawOp(source, op)
        return raw

    def label(self, record: Record) -> Label:
        """Name-level: the record's name and detail, from a few peeked bytes."""
        op = self.op(record.source, record.op)
        try:
            return op.label(record)
        except Exception:  # noqa: BLE001 -- odd bytes name the record raw, never raise
            return Label(op.name, known=False)

    def decode(self, item: Record | Call, level: Level = Level.FULL) -> Decoded:
        """A record or a call (enter+exit, request+response), decoded to ``level``."""
        records = (item,) if isinstance(item, Record) else item.records
        first = records[0]
        op = self.op(first.source, first.op)
        if level <= Level.NAME:
            label = self.label(first)
            return Decoded(first.source, first.op, label.name, label.detail, label.known, level=level)
        try:
            return op.decode(records, level)
        except Exception as exc:  # noqa: BLE001 -- a decoder bug must not stop a show: raw, with the error
            out = RawOp(first.source, first.op).decode(records, level)
            out.name = op.name
            out.notes = [f"decoder error: {type(exc).__name__}: {exc}"]
            out.extra["exception"] = f"{type(exc).__name__}: {exc}"
            return out

    def keyer(self) -> Keyer:
        """A fresh keyer for ``pair_calls``: ENTER/EXIT by call id, GSP by (function, sequence)."""
        from rmtrace.decoders.gsp import GspPairing, codec_for  # GSP is the one source with its own pairing
        codec = codec_for(self.profile)
        by_source: dict[int, Keyer] = {Source.GSP: GspPairing(codec)} if codec is not None else {}
        return lambda rec: by_source.get(rec.source, call_key)(rec)

    def calls(self, records: Iterable[Record], window: int = 65536) -> Iterator[Call]:
        """Records folded into calls (see ``rmtrace.calls``), with this profile's pairing."""
        return pair_calls(records, self.keyer(), window)


def decoders_for(trace_or_meta: Any = None, override: str | None = None, *, user: bool = True) -> DecoderSet:
    """The DecoderSet for a trace (a TraceReader or its metadata dict), by its driver version."""
    from rmtrace.decoders.profiles import select_profile
    meta: Mapping[str, Any] = getattr(trace_or_meta, "meta", trace_or_meta) or {}
    profile, warning = select_profile(meta.get("driver_version"), override=override)
    return DecoderSet(profile, warning, user=user)


__all__ = ["DecoderSet", "decoders_for", "Decoded", "Label", "Level", "Call", "CallState"]
