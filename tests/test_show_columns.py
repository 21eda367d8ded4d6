"""rmtrace show's lines printed from the call table's columns are the decoders' lines, call by call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rmtrace.decoders import Level, decoders_for, render
from rmtrace.decoders.filters import CallFilter

from rmtrace import captures
from rmtrace.calls import CallState
from rmtrace.columns.lines import ColumnCall, ColumnLines
from rmtrace.columns.select import selected_calls
from rmtrace.columns.table import CallTableBuilder
from rmtrace.trace import RecordFilter, TraceReader

REPLAYS = Path(captures.path()).parent / "replays"
TRACES = (*captures.shipped(), "cuda-streams.sequential-3.sigint.nvidia.trace",
          "cuda-streams.model-fixed.oracle-nvidia.trace")
"""Every shipped capture, a replay cut by SIGINT (a call left in flight), and one with GSP and sema traffic."""


def _path(name: str) -> str:
    return str(REPLAYS / name) if name.endswith(".trace") else captures.path(name)


def _lines(path: str) -> tuple[list[str], list[str], set[CallState], set[int]]:
    """(made without the decoders, made by them) for every call show prints without them, and those
    calls' states and operation names."""
    with TraceReader(path) as reader:
        decoders = decoders_for(reader)
        builder = CallTableBuilder(reader, decoders)
        builder.update()
        table = builder.table()
        start, end = reader.time_span
        lines = ColumnLines(decoders, table)
        everything = RecordFilter(), CallFilter()
        columns, decoded, states, names = [], [], set(), set()
        for item, call in zip(selected_calls(reader, decoders, table, *everything, lines),
                              selected_calls(reader, decoders, table, *everything), strict=True):
            if isinstance(item, ColumnCall):
                columns.append(item.line(start, end))
                decoded.append(render.line(decoders.decode(call, Level.CALL), call, start, end))
                states.add(item.state)
                names.add(item.decoded.name)
    return columns, decoded, states, names


@pytest.mark.parametrize("name", TRACES)
def test_a_line_from_the_columns_is_the_decoders_line(name):
    columns, decoded, _, names = _lines(_path(name))
    assert len(columns) >= 10 and {"RM_ALLOC", "RM_CONTROL"} <= names  # in every one of them
    assert columns == decoded


def test_a_call_left_in_flight_prints_from_the_columns_too():
    _, _, states, _ = _lines(_path("cuda-streams.sequential-3.sigint.nvidia.trace"))
    assert CallState.IN_FLIGHT in states


def test_show_prints_from_the_columns_and_the_records_in_one_stream(monkeypatch, capsys, tmp_path):
    """Rows from the columns and rows decoded, in order: the output of a show that prints none from the
    columns, byte for byte (every filter is checked so in tests/test_show.py)."""
    from rmtrace.cli import show
    from rmtrace.cli.main import main
    from rmtrace.columns import lines
    monkeypatch.setattr(show, "TABLE_FROM_RECORDS", 0)
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    path = _path("cuda-streams.model-fixed.oracle-nvidia.trace")
    main(["show", path])
    both = capsys.readouterr().out
    monkeypatch.setattr(lines.ColumnLines, "kinds", lambda self, rows: np.zeros(len(rows), dtype=np.int64))
    main(["show", path])
    assert capsys.readouterr().out == both
    assert "RM_ALLOC(" in both and "GSP_" in both and "SEMA_" in both
