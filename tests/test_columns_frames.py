"""A column of mixed values goes through ``save_columns`` and ``load_columns`` as it was, type for type: the
JSON text kept per (type, value) never gives one value another's equal of another type (True and 1, 1.0)."""

from __future__ import annotations

from rmtrace.columns.frames import load_columns, save_columns
from rmtrace.session.entities import LaneState


def test_mixed_values_come_back_type_for_type(tmp_path):
    values = [LaneState.RUNNING, "x", 1, True, 1.0, None, (1, True), (1, 1), {2}, LaneState.RUNNING,
              True, 1, "x", (1, True), [3, False], {"k": b"\x00"}, 1.0, LaneState.FREED]
    frame = save_columns({"value": values, "n": list(range(len(values)))}, tmp_path, "rows")
    assert frame["rows"] == len(values) and frame["columns"] == {"value": "json", "n": "int"}
    back = load_columns(frame, tmp_path, "rows")
    assert back["n"] == list(range(len(values)))
    assert back["value"] == values
    assert [type(v) for v in back["value"]] == [type(v) for v in values]
    assert [[type(x) for x in v] for v in back["value"] if isinstance(v, tuple)] == \
        [[type(x) for x in v] for v in values if isinstance(v, tuple)]
