"""Parquet from the call table and the object columns holds, row for row, what the session fold says of each call.

The oracle folds every call with the decoders, one at a time (``StreamingFold``), and makes each row from
the call, its ``CallInfo`` and the fold's objects right after it: what ``export_trace`` wrote before it
read the table.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pyarrow.dataset as ds
import pytest

from rmtrace import captures
from rmtrace.calls import CallState
from rmtrace.export.parquet import SCHEMA, export_dataset, export_trace
from rmtrace.export.progress import Progress
from rmtrace.export.source import EPOCH, ExportInput
from rmtrace.record import Source
from rmtrace.session import load_session
from tests.export_support import StreamingFold, legacy_replay  # noqa: F401 -- legacy_replay is a fixture


def folded_rows(path: str) -> list[dict]:
    rows = []
    with ExportInput(path, progress=False) as src:
        fold = StreamingFold(src.decoders, transitions=False)
        offset = src.wall_offset_ns or 0
        for call in src.calls():
            info = fold.fold(call)
            first = call.first
            objects = fold.folder.objects
            names = {} if info.client_id is None else {
                name: objects[(info.client_id, h)].stable_name for name, h in info.handles.items()
                if (info.client_id, h) in objects}
            latency = info.latency_ns if info.exit_seq is not None and info.exit_seq != info.enter_seq else None
            in_flight = call.state in (CallState.IN_FLIGHT, CallState.UNFINISHED)
            rows.append({
                "time_ns": first.time_ns + offset, "t_ns": first.time_ns - src.start_ns, "seq": first.seq,
                "pid": first.pid, "tid": first.tid, "client": info.client_id, "source": Source(first.source).name,
                "op": info.name, "detail": info.detail, "status": info.status_name, "status_code": info.status,
                "ok": info.ok, "state": call.state.value, "latency_ns": latency,
                "duration_ns": src.end_ns - first.time_ns if in_flight else latency,
                "handles": list(info.handles.items()), "objects": list(names.items()), "bytes": info.bytes})
    return rows


def dataset_rows(root) -> list[dict]:
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    assert table.schema.remove(table.schema.get_field_index("host")).remove(
        table.schema.get_field_index("day") - 1) == SCHEMA
    return sorted(table.to_pylist(), key=lambda r: r["seq"])


@pytest.mark.parametrize("trace", [*captures.shipped(), "legacy-replay"])
def test_table_rows_are_the_folds(trace, tmp_path, legacy_replay):  # noqa: F811
    path = legacy_replay if trace == "legacy-replay" else str(captures.path(trace))
    export_dataset([path], tmp_path)
    got = dataset_rows(tmp_path)
    expected = folded_rows(path)
    assert len(got) == len(expected)
    for row, want in zip(got, expected):
        assert row["time"] == EPOCH + timedelta(microseconds=row["time_ns"] // 1000)
        assert {k: row[k] for k in want} == want, want["seq"]
    assert any(r["objects"] for r in got)


def test_a_replays_clients_are_the_ones_it_was_made_for(tmp_path):
    """A replay names its clients in its metadata; the rows' clients are those, as the session model's."""
    from rmtrace.replayer import Schedule, build_plan, make_target, replay
    out = str(tmp_path / "concurrent.trace")
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(2)
    replay(plan, Schedule.parse("concurrent"), make_target("model:fixed", plan), output=out)
    export_dataset([out], tmp_path / "ds")
    clients = {r["seq"]: r["client"] for r in dataset_rows(tmp_path / "ds")}
    model = load_session(out)
    assert {c.enter_seq: c.client_id for c in model.calls} == clients
    assert {"c1", "c2"} <= set(clients.values())


def test_the_progress_line_counts_every_record(tmp_path):
    shown = io.StringIO()
    with ExportInput(str(captures.path("cuda-streams-3x-sequential"))) as src:
        total = src.reader.record_count
        src.progress = Progress("rmtrace export", total, stream=shown, enabled=True, interval_s=0)
        export_trace(src, tmp_path)
    drawn = shown.getvalue().split("\r")[1:]
    assert drawn and drawn[-1].startswith(f"rmtrace export: {total:,} of {total:,} records (100%), ")
