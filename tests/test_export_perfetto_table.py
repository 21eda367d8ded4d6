"""Perfetto from the call table and the columnar fold is byte for byte what the decoders' call-by-call path writes.

The reference pairs and decodes every call with the decoders (``ExportInput.calls``), folds each with the
session fold one call at a time (``StreamingFold``: its transitions handed out once final, an exited client
forgotten), and gives each call and transition to the same writer, in call order: what ``write_perfetto``
did before it read the table.  The table's path folds a block of rows ahead of the writer; the file does
not depend on how many.
"""

from __future__ import annotations

import io

import pytest

from rmtrace import captures
from rmtrace.export.fold import BLOCK_ROWS
from rmtrace.export.perfetto import CallRow, PerfettoWriter, write_perfetto
from rmtrace.export.progress import Progress
from rmtrace.export.source import ExportInput
from tests.export_support import StreamingFold, legacy_replay  # noqa: F401 -- legacy_replay is a fixture


def decoders_perfetto(path: str, out: str) -> int:
    with ExportInput(path, progress=False) as src, open(out, "wb") as f:
        fold = StreamingFold(src.decoders)
        writer = PerfettoWriter(f, src, fold)
        writer.clock_snapshot()
        for call in src.calls():
            info = fold.fold(call)
            for tr in fold.transitions.final(call.first.time_ns):
                writer.transition(tr)
            writer.retire()
            first = call.first
            writer.call(CallRow(first.source, first.op, call.state, first.pid, first.tid, first.time_ns,
                                call.last.time_ns, info.enter_seq, info.name, info.full_name, info.status_name,
                                info.client_id, call))
        for tr in fold.transitions.final():
            writer.transition(tr)
        writer.finish()
        writer.flush()
        return writer.packets


def table_perfetto(path: str, out: str, block_rows: int | None = None) -> int:
    with ExportInput(path, progress=False) as src:
        return write_perfetto(src, out) if block_rows is None else write_perfetto(src, out, block_rows)


@pytest.mark.parametrize("trace", [*captures.shipped(), "legacy-replay"])
def test_table_perfetto_is_the_decoders_byte_for_byte(trace, tmp_path, legacy_replay):  # noqa: F811
    path = legacy_replay if trace == "legacy-replay" else str(captures.path(trace))
    expected, got = tmp_path / "decoders.pftrace", tmp_path / "table.pftrace"
    assert table_perfetto(path, str(got)) == decoders_perfetto(path, str(expected))
    assert got.read_bytes() == expected.read_bytes()


@pytest.mark.parametrize("trace", ["cuda-streams-3x-sequential", "legacy-replay"])
def test_the_file_does_not_depend_on_the_rows_folded_ahead(trace, tmp_path, legacy_replay):  # noqa: F811
    # blocks of a few rows: a call's transitions made in one block, handed out in a later one
    path = legacy_replay if trace == "legacy-replay" else str(captures.path(trace))
    whole, small = tmp_path / "whole.pftrace", tmp_path / "small.pftrace"
    table_perfetto(path, str(whole), block_rows=1 << 30)
    table_perfetto(path, str(small), block_rows=7)
    assert small.read_bytes() == whole.read_bytes()


def test_the_progress_line_counts_every_record(tmp_path, legacy_replay):  # noqa: F811
    shown = io.StringIO()
    with ExportInput(legacy_replay) as src:  # GSP exchanges in parts: a call of more than two records
        total = src.reader.record_count
        src.progress = Progress("rmtrace export", total, stream=shown, enabled=True, interval_s=0)
        write_perfetto(src, str(tmp_path / "out.pftrace"), block_rows=64)
    drawn = shown.getvalue().split("\r")[1:]
    assert len(drawn) >= 2  # as it went, then once more at the end
    assert drawn[-1].startswith(f"rmtrace export: {total:,} of {total:,} records (100%), ") and drawn[-1].endswith("\n")


def pid_reused(out: str) -> tuple[int, int]:
    """cuda-streams-3x-sequential written again with rmtrace's writer, the second CUDA process given the first's
    pid (and the fork that made it returning that pid): a pid that exits and is used again at once, within one
    block of rows.  Returns (the reused pid, the seq of its first exit)."""
    import dataclasses

    from rmtrace.record import Source, SysOp
    from rmtrace.trace import TraceReader, TraceWriter

    with TraceReader(str(captures.path("cuda-streams-3x-sequential"))) as reader:
        records = list(reader.records())
        meta = reader.meta
    exits = [(rec.seq, rec.pid) for rec in records if rec.source == Source.SYS and rec.op == SysOp.EXIT]
    (first_exit, old), (_, new) = exits[0], exits[1]  # the first two CUDA processes, one after the other
    assert old != new
    with TraceWriter(out, meta) as writer:
        for rec in records:
            if rec.pid == new:
                rec = dataclasses.replace(rec, pid=old, tid=old if rec.tid == new else rec.tid)
            elif rec.source == Source.SYS and rec.op == SysOp.FORK and rec.ret == new:
                rec = dataclasses.replace(rec, ret=old)
            writer.write(rec)
    return old, first_exit


def test_a_pid_used_again_within_a_block_keeps_the_new_process_s_channels(tmp_path):
    path = str(tmp_path / "pid-reused.trace")
    pid, exit_seq = pid_reused(path)
    with ExportInput(path, progress=False) as src:
        assert src.reader.record_count < BLOCK_ROWS  # the exit and the new process's calls fold in one block
        later = [rec for rec in src.reader.records() if rec.seq > exit_seq and rec.pid == pid]
        assert later and later[0].seq == exit_seq + 2  # used again right after its exit (the parent's fork between)
    expected, got, small = tmp_path / "decoders.pftrace", tmp_path / "table.pftrace", tmp_path / "small.pftrace"
    assert table_perfetto(path, str(got)) == decoders_perfetto(path, str(expected))
    assert got.read_bytes() == expected.read_bytes()
    table_perfetto(path, str(small), block_rows=7)
    assert small.read_bytes() == expected.read_bytes()
