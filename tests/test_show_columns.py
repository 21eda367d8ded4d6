"""rmtrace show's lines made without their records (from the call table's columns, the arguments' bytes in
their chunks, the memo of decoded summaries) are the decoders' lines, call by call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rmtrace.decoders import Level, decoders_for, render
from rmtrace.decoders.filters import CallFilter

from rmtrace import captures
from rmtrace.calls import CallState
from rmtrace.columns.lines import FROM_ARGUMENT, FROM_COLUMNS, MEMO, ColumnLines, Lines
from rmtrace.columns.memokey import VOLATILE_SPAN
from rmtrace.columns.select import selected_calls
from rmtrace.columns.table import CallTableBuilder
from rmtrace.record import Phase
from rmtrace.trace import RecordFilter, TraceReader

REPLAYS = Path(captures.path()).parent / "replays"
TRACES = (*captures.shipped(), "cuda-streams.sequential-3.sigint.nvidia.trace",
          "cuda-streams.model-fixed.oracle-nvidia.trace")
"""Every shipped capture, a replay cut by SIGINT (a call left in flight), and one with GSP and sema traffic."""


def _path(name: str) -> str:
    return str(REPLAYS / name) if name.endswith(".trace") else captures.path(name)


class Made:
    """Of every call show prints without its records: that line, the decoders' line, and its call."""

    def __init__(self, path: str) -> None:
        with TraceReader(path) as reader:
            decoders = decoders_for(reader)
            builder = CallTableBuilder(reader, decoders)
            builder.update()
            table = builder.table()
            start, end = reader.time_span
            everything = RecordFilter(), CallFilter()
            lines = ColumnLines(decoders, table, reader, everything[1], start, end)
            self.kinds = set(lines.kinds(np.arange(len(table))).tolist())
            self.columns: list[str] = []
            self.decoded: list[str] = []
            self.calls: list[tuple[str, CallState]] = []
            calls = selected_calls(reader, decoders, table, *everything)
            for item in selected_calls(reader, decoders, table, *everything, lines):
                if not isinstance(item, Lines):
                    assert item == next(calls)
                    continue
                for text in item.texts:  # the lines of consecutive calls
                    call = next(calls)
                    d = decoders.decode(call, Level.CALL)
                    self.columns.append(text)
                    self.decoded.append(render.line(d, call, start, end))
                    self.calls.append((d.name, call.state))
            assert next(calls, None) is None
            self.memo = lines.memo


def _lines(path: str) -> tuple[list[str], list[str], set[CallState], set[str]]:
    made = Made(path)
    return made.columns, made.decoded, {s for _, s in made.calls}, {n for n, _ in made.calls}


@pytest.mark.parametrize("name", TRACES)
def test_a_line_from_the_columns_is_the_decoders_line(name):
    made = Made(_path(name))
    names = {n for n, _ in made.calls}
    assert len(made.columns) >= 10 and {"RM_ALLOC", "RM_CONTROL", "SYS_OPEN"} <= names  # in every one of them
    assert {FROM_COLUMNS, FROM_ARGUMENT, MEMO} <= made.kinds
    assert made.memo.hits and made.memo.misses  # lines made from kept summaries, and the first of each
    assert made.columns == made.decoded


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


def test_a_filtered_show_prints_from_the_columns_as_the_decoders_do(monkeypatch, capsys):
    """A call filter (--name, --status, --failed) is checked on lines made without their records too."""
    from rmtrace.cli import show
    from rmtrace.cli.main import main
    from rmtrace.columns import lines
    monkeypatch.setattr(show, "TABLE_FROM_RECORDS", 0)
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    path = _path("cuda-streams.model-fixed.oracle-nvidia.trace")
    argv = ["show", path, "--name", "RM_ALLOC,RM_CONTROL,SYS_*,UVM_*", "--status", "NV_OK,0,8,9"]
    main(argv)
    both = capsys.readouterr().out
    monkeypatch.setattr(lines.ColumnLines, "kinds", lambda self, rows: np.zeros(len(rows), dtype=np.int64))
    main(argv)
    assert capsys.readouterr().out == both
    assert "RM_ALLOC(" in both and "SYS_OPEN(" in both and "UVM_" in both


def test_the_summary_memo_is_bounded_in_entries():
    from rmtrace.decoders.base import Decoded

    from rmtrace.columns.lines import Kept, SummaryMemo
    from rmtrace.record import Source

    memo = SummaryMemo(kept=2)
    one = Decoded(Source.RM, 0x2A, "RM_FREE")
    memo.keep(1, Kept(one, "a", None, True))
    memo.keep((2, 3), Kept(one, "b", None, True))
    assert memo.get(1) == (one, "a", None, True)  # a hit: 1 is now the most recent
    memo.keep(4, Kept(one, "c", None, True))  # a third entry: the least recently used ((2, 3)) goes
    assert memo.get((2, 3)) is None and memo.get(1) is not None and memo.get(4) is not None and len(memo) == 2


def test_calls_have_equal_content_ids_exactly_when_their_records_say_the_same():
    """Block.content_ids: the memo's keys ignore which call a record is (seq, time, pid, tid, call id),
    and nothing else: the state, and every other byte, of either record."""
    from rmtrace.columns.summary import BlockReader
    from rmtrace.trace import TraceReader

    with TraceReader(_path("cuda-streams.model-fixed.oracle-nvidia.trace")) as reader:
        block = BlockReader(reader).block(np.arange(reader.record_count, dtype=np.int64))
        words = block.typed[8]
        enters = np.flatnonzero(block.header("phase") == Phase.ENTER)[:400]
        first, no_second = enters, np.full(len(enters), -1, dtype=np.int64)
        ids = block.content_ids(first, no_second, np.zeros(len(enters), dtype=np.int64))
        by_bytes = {}
        for i, a in enumerate(first.tolist()):
            record = bytearray(block.u1[block.at[a]:block.at[a] + block.header("total_len")[a]].tobytes())
            lo, hi = VOLATILE_SPAN
            record[lo:hi] = bytes(hi - lo)
            by_bytes.setdefault(bytes(record), set()).add(ids[i])
        assert all(len(found) == 1 for found in by_bytes.values())  # equal bytes, one id
        assert len({next(iter(found)) for found in by_bytes.values()}) == len(by_bytes)  # unequal bytes, unequal ids
        assert 1 < len(by_bytes) < len(first)  # the capture repeats calls, and not only one
        before = words.copy()
        marked = block.content_ids(first, no_second, np.ones(len(enters), dtype=np.int64))
        assert not set(marked) & set(ids)  # the state is part of the id
        # a second record's fields cleared, as a first's with mark 0
        pairs = block.content_ids(first, first[::-1].copy(), np.zeros(len(enters), dtype=np.int64))
        assert pairs == list(zip(ids, ids[::-1]))
        assert (words == before).all()  # the block's bytes are put back


def test_a_compiled_line_is_its_template_formatted():
    from rmtrace.columns.lines import _compiled

    for template in ("[{0}/{1}] {2} X(a={5}, b={6}) = NV_OK <{4}>", "{{{0}}}'\"\\n\0\n…{{}}{3}", "", "no fields",
                     "{1}{0}{1}"):
        arity = 7
        args = [f"<{k}'\\{{}}>" for k in range(arity)]
        assert _compiled(template, arity)(*args) == template.format(*args)
    with pytest.raises(ValueError):
        _compiled("{0!r}", 1)
    with pytest.raises(ValueError):
        _compiled("{2}", 2)


def test_row_blocks_cover_every_row_once_and_grow_to_their_cap():
    from rmtrace.columns.select import FIRST_ROWS, ROWS_AT_ONCE, blocks

    for n in (0, 1, FIRST_ROWS, FIRST_ROWS + 1, 10 * ROWS_AT_ONCE + 7):
        spans = list(blocks(n))
        assert [a for a, _ in spans] == ([0] if n else []) + [b for _, b in spans[:-1]]  # each where the last stops
        assert (spans[-1][1] if spans else 0) == n
        sizes = [b - a for a, b in spans]
        assert sizes[:1] in ([], [min(n, FIRST_ROWS)]) and max(sizes, default=0) <= ROWS_AT_ONCE
    assert [b - a for a, b in blocks(10 * ROWS_AT_ONCE)][:4] == [FIRST_ROWS, 2 * FIRST_ROWS, 4 * FIRST_ROWS, 8 * FIRST_ROWS]
