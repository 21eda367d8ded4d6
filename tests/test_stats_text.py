"""``rmtrace stats``' text: its operation lines are made from the operations' columns a block at a time
(``rmtrace.cli.stats._operation_lines``); they are each row's dict formatted on its own, as the command
printed them before (``reference_line``), on every committed trace, in blocks of any size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rmtrace.columns.stats as columns_stats
from rmtrace import captures
from rmtrace.analysis.stats import stats_parts
from rmtrace.cli import stats as cli_stats
from rmtrace.cli.main import main
from rmtrace.session.model import load_objects
from rmtrace.timefmt import format_duration
from tests.golden_outputs import COMMITTED_TRACES


def reference_line(row: dict[str, Any]) -> str:
    """One operation row's line, from its dict (``OpStats.to_dict``'s)."""
    lat = row["latency_ns"]
    latency = "-" if lat is None else "/".join(format_duration(lat[k]) for k in ("min", "median", "p99", "max"))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items(), key=lambda kv: -kv[1]))
    return (f"{row['pid']:>7} {row['client'] or '-':<6} {row['source']:<5} {row['operation'][:58]:<58} "
            f"{row['count']:>6}  {latency:<34} {row['bytes']:>9}  {statuses}")


@pytest.mark.parametrize("path", COMMITTED_TRACES, ids=lambda p: Path(p).name)
def test_operation_lines_are_each_rows_dict_formatted(path, monkeypatch):
    ops = stats_parts(load_objects(path, cache=False))["operations"]
    want = [reference_line(row) for row in ops.rows()]
    assert list(cli_stats._operation_lines(ops)) == want
    monkeypatch.setattr(ops, "blocks", lambda block=4096, blocks=ops.blocks: blocks(3))
    assert list(cli_stats._operation_lines(ops)) == want


def test_rows_with_several_statuses_are_among_them():
    """The lines above hold rows of several statuses (sorted, most first), ties among them."""
    ops = stats_parts(load_objects(captures.path("cuda-streams-3x-sequential"), cache=False))["operations"]
    several = [list(row["statuses"].values()) for row in ops.rows() if len(row["statuses"]) > 1]
    assert any(counts != sorted(counts, reverse=True) for counts in several)
    assert any(len(set(counts)) < len(counts) for counts in several)


def test_rows_in_blocks_of_any_size_are_the_same():
    ops = stats_parts(load_objects(COMMITTED_TRACES[0], cache=False))["operations"]
    want = list(ops.rows())
    assert len(want) > 3
    for block in (1, 2, 7, len(want), len(want) + 1):
        assert list(ops.rows(block)) == want


def test_the_command_prints_the_rows(capsys, monkeypatch):
    """The whole text, through the command's batched writes (more lines than one batch)."""
    path = COMMITTED_TRACES[0]
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    monkeypatch.setattr(cli_stats, "LINES_AT_ONCE", 5)
    assert main(["stats", str(path)]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[-1] == ""  # the text ends with a newline, as print gave it
    stats = stats_parts(load_objects(path, cache=False))
    header = lines.index("") + 1
    assert lines[header].startswith("    pid client source")
    assert lines[header + 1:-1] == [reference_line(row) for row in stats["operations"].rows()]
    assert isinstance(stats["operations"], columns_stats.Operations)
