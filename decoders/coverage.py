"""How much of a trace the decoders name and unfold: the numbers ``rmtrace stats --decode`` prints.

* records: how many have a decoder for their (source, op) (the rest show raw);
* allocated classes: RM_ALLOC and GSP_RM_ALLOC calls whose class the profile names;
* control commands (RM_CONTROL and GSP_RM_CONTROL calls), by how far they are named:
  full name from the profile, class and category name, class and category number
  (``NV2081_CTRL_CMD_0x01_0x02``: the headers define nothing in that category),
  not even the class;
* field by field: controls whose params were decoded with a layout, and of
  those the profile has a layout for, how many params fit it exactly;
* exceptions: decoders that failed on a record (the raw form was shown instead).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from rmtrace.decoders.base import Level, RawOp
from rmtrace.decoders.decoderset import DecoderSet
from rmtrace.decoders.names import ControlNaming, names

from rmtrace.record import Record, Role, Source

CONTROL_CALLS = {(Source.RM, "RM_CONTROL"), (Source.GSP, "GSP_RM_CONTROL")}
ALLOC_CALLS = {(Source.RM, "RM_ALLOC"), (Source.GSP, "GSP_RM_ALLOC")}


@dataclass
class Coverage:
    records: int = 0
    records_named: int = 0
    calls: int = 0
    allocs: int = 0
    allocs_named: int = 0
    controls: int = 0
    controls_by_naming: dict[str, int] = field(default_factory=lambda: {n.name.lower(): 0 for n in ControlNaming})
    controls_field_by_field: int = 0
    controls_with_layout: int = 0       # the profile has a params layout for the command
    params_not_decoded: Counter = field(default_factory=Counter)  # ... but these params did not fit it
    exceptions: int = 0
    unnamed_ops: Counter = field(default_factory=Counter)
    unnamed_classes: Counter = field(default_factory=Counter)
    partly_named_controls: Counter = field(default_factory=Counter)
    exception_examples: list[str] = field(default_factory=list)

    @property
    def controls_at_least_class_and_category(self) -> int:
        by = self.controls_by_naming
        return by["full"] + by["category"] + by["class"]

    def percent(self, part: int, whole: int) -> float:
        return 100.0 if whole == 0 else 100.0 * part / whole

    def summary(self) -> dict[str, Any]:
        """The headline percentages and counts (JSON-ready)."""
        by = self.controls_by_naming
        return {
            "records": self.records, "records_named_pct": self.percent(self.records_named, self.records),
            "calls": self.calls,
            "allocs": self.allocs, "classes_named_pct": self.percent(self.allocs_named, self.allocs),
            "controls": self.controls,
            "controls_full_name_pct": self.percent(by["full"], self.controls),
            "controls_class_category_name_pct": self.percent(by["category"], self.controls),
            "controls_class_category_number_pct": self.percent(by["class"], self.controls),
            "controls_at_least_class_and_category_pct": self.percent(self.controls_at_least_class_and_category,
                                                                     self.controls),
            "controls_field_by_field_pct": self.percent(self.controls_field_by_field, self.controls),
            "params_decoded_where_profile_has_layout_pct": self.percent(
                self.controls_with_layout - sum(self.params_not_decoded.values()), self.controls_with_layout),
            "exceptions": self.exceptions,
        }

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(self.summary())
        for key in ("unnamed_ops", "unnamed_classes", "partly_named_controls", "params_not_decoded"):
            out[key] = dict(getattr(self, key).most_common())
        return out


def decode_coverage(records: Iterable[Record], decoders: DecoderSet) -> Coverage:
    """Decode every call of ``records`` in full and count what was named."""
    cov = Coverage()
    lookups = names(decoders.profile)
    class_names = {c.name for c in decoders.profile.classes.values()}
    for call in decoders.calls(records):
        cov.calls += 1
        for rec in call.records:
            cov.records += 1
            if isinstance(decoders.op(rec.source, rec.op), RawOp):
                cov.unnamed_ops[f"{Source(rec.source).name} op {rec.op:#x}"] += 1
            else:
                cov.records_named += 1
        d = decoders.decode(call, Level.FULL)
        if "exception" in d.extra:
            cov.exceptions += 1
            if len(cov.exception_examples) < 10:
                cov.exception_examples.append(f"seq {call.first.seq} {d.name}: {d.extra['exception']}")
            continue
        kind = (call.first.source, d.name)
        if kind in ALLOC_CALLS:
            cov.allocs += 1
            if d.detail in class_names:
                cov.allocs_named += 1
            else:
                cov.unnamed_classes[d.detail or "?"] += 1
        elif kind in CONTROL_CALLS:
            cov.controls += 1
            cmd = d.extra.get("cmd")
            naming = lookups.control(cmd)[1] if cmd is not None else ControlNaming.NUMBER
            cov.controls_by_naming[naming.name.lower()] += 1
            if naming is not ControlNaming.FULL:
                cov.partly_named_controls[d.detail or "?"] += 1
            params = [b for b in d.buffers if b.role == Role.PARAMS]
            control = decoders.profile.controls.get(cmd) if cmd is not None else None
            if control is not None and control.params and params:
                cov.controls_with_layout += 1
                if any(b.layout is None or b.note for b in params):
                    cov.params_not_decoded[f"{d.detail}: {next(b.note for b in params if b.note or b.layout is None)}"] += 1
            if any(b.layout is not None for b in params):
                cov.controls_field_by_field += 1
    return cov
