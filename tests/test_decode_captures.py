"""Decode coverage on every committed real capture (captures/*.trace): all named, no exceptions.

Prints the numbers ``rmtrace stats --decode`` prints (run with ``-s`` to see them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rmtrace.decoders import decoders_for
from rmtrace.decoders.coverage import decode_coverage

from rmtrace.trace import TraceReader

CAPTURES = sorted((Path(__file__).resolve().parent.parent / "captures").glob("*.trace"))


@pytest.mark.skipif(not CAPTURES, reason="no real captures committed under captures/ yet")
@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_record_class_and_control_is_named(path):
    with TraceReader(path) as reader:
        decoders = decoders_for(reader)
        cov = decode_coverage(reader, decoders)
    s = cov.summary()
    print(f"\n{path.name} (driver {reader.meta.get('driver_version')}, profile {decoders.profile.version}): "
          f"{s['records']} records, {s['records_named_pct']:.2f}% named; {s['allocs']} allocations, "
          f"{s['classes_named_pct']:.2f}% classes named; {s['controls']} controls, "
          f"{s['controls_full_name_pct']:.2f}% by full name, "
          f"{s['controls_at_least_class_and_category_pct']:.2f}% at least by class and category, "
          f"{s['controls_field_by_field_pct']:.2f}% field by field "
          f"({s['params_decoded_where_profile_has_layout_pct']:.2f}% of those the profile has a layout for); "
          f"{s['exceptions']} exceptions")
    assert s["records_named_pct"] == 100.0, dict(cov.unnamed_ops)
    assert s["classes_named_pct"] == 100.0, dict(cov.unnamed_classes)
    assert s["controls_at_least_class_and_category_pct"] == 100.0, dict(cov.partly_named_controls)
    assert s["exceptions"] == 0, cov.exception_examples
    assert s["params_decoded_where_profile_has_layout_pct"] == 100.0, dict(cov.params_not_decoded)
