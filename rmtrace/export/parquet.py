"""Parquet: one table of calls; many traces from many hosts in one dataset, partitioned by host and day.

Layout (Hive partitioning, which DuckDB, Spark, Trino, pyarrow and pandas all read)::

    DIR/host=<host>/day=<YYYY-MM-DD>/<trace id>.parquet

``host`` is the trace's recorded host (or the one given), ``day`` the UTC day
of the call's wall-clock time (a trace that runs past midnight writes one file
per day), and the trace id the BLAKE2b of the trace file (``source.trace_id``):
exporting the same trace again replaces its files (with ``force``), a
different trace never collides.  ``host`` and ``day`` are the directories'
names, not columns of the files, as Hive partitioning has it.

One row per call (an enter with its exit, a GSP request with its response,
or a message that stands alone), in order; the columns are ``SCHEMA``.
Types are the ones every reader takes: ``time`` is a microsecond timestamp
(Spark does not read nanosecond ones) and ``time_ns`` keeps the nanoseconds;
handles (32-bit) are int64, not unsigned.
Rows are written in row groups of ``ROW_GROUP`` calls, so memory does not
grow with the trace.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmtrace.calls import Call, CallState
from rmtrace.errors import RmtraceError
from rmtrace.export.fold import StreamingFold
from rmtrace.export.source import ExportInput, trace_id
from rmtrace.record import Source, enum_name
from rmtrace.session import CallInfo

ROW_GROUP = 16_384

SCHEMA = pa.schema([
    pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),   # wall clock of the call's first record
    pa.field("time_ns", pa.int64(), nullable=False),                   # the same in ns since the epoch (UTC)
    pa.field("t_ns", pa.int64(), nullable=False),                      # since the trace's first record
    pa.field("seq", pa.int64(), nullable=False),                       # the first record's sequence number
    pa.field("pid", pa.int64(), nullable=False),
    pa.field("tid", pa.int64(), nullable=False),
    pa.field("client", pa.string()),                                   # c1, c2, ... as the session model names them
    pa.field("source", pa.string(), nullable=False),                   # RM, UVM, GSP, SEMA, SYS, MARK
    pa.field("op", pa.string(), nullable=False),                       # RM_ALLOC, UVM_REGISTER_GPU, GSP_RM_CONTROL, ...
    pa.field("detail", pa.string()),                                   # the class or control command
    pa.field("status", pa.string()),                                   # NV_OK, NV_ERR_*, an rc, a system result
    pa.field("status_code", pa.int64()),
    pa.field("ok", pa.bool_()),
    pa.field("state", pa.string(), nullable=False),                    # complete, in_flight, single, unfinished, resumed
    pa.field("latency_ns", pa.int64()),                                # enter to exit, for a call that returned
    pa.field("duration_ns", pa.int64()),                               # latency, or enter to the trace's end when in flight
    pa.field("handles", pa.map_(pa.string(), pa.int64())),            # hClient, hParent, hObject, ... as show names them
    pa.field("objects", pa.map_(pa.string(), pa.string())),            # the same handles' stable object names
    pa.field("bytes", pa.int64(), nullable=False),                     # buffer bytes the call's records carry
    pa.field("driver", pa.string()),                                   # the recorded driver version
    pa.field("profile", pa.string(), nullable=False),                  # the profile it was decoded with
    pa.field("trace_id", pa.string(), nullable=False),
    pa.field("trace", pa.string(), nullable=False),                    # the trace file's name
])
"""The calls table (host and day come from the dataset's directories)."""


def partition_dir(root: str | os.PathLike, host: str, day: str) -> Path:
    """``root/host=<host>/day=<day>``, the host percent-encoded as Hive partition values are."""
    return Path(root) / f"host={urllib.parse.quote(host, safe='')}" / f"day={day}"


def utc_day(wall_ns: int) -> str:
    return datetime.fromtimestamp(wall_ns // 1_000_000_000, tz=timezone.utc).strftime("%Y-%m-%d")


DAY_NS = 86_400 * 1_000_000_000
CONSTANT = ("driver", "profile", "trace_id", "trace")
"""The columns that hold one value for the whole trace (filled when a row group is made)."""
PER_CALL = tuple(f.name for f in SCHEMA if f.name not in CONSTANT)


class _Columns:
    """Rows of one row group, a tuple a call in ``PER_CALL`` order (made columns when the group is written)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def table(self, constant: dict[str, Any]) -> pa.Table:
        n = len(self.rows)
        data: dict[str, Any] = {name: list(column) for name, column in zip(PER_CALL, zip(*self.rows))}
        data.update((name, [value] * n) for name, value in constant.items())
        return pa.Table.from_pydict(data, schema=SCHEMA)


class TraceRows:
    """One trace's calls as rows, written per day into the dataset."""

    def __init__(self, src: ExportInput, root: str | os.PathLike, host: str) -> None:
        self.src = src
        self.root = root
        self.host = host
        self.id = trace_id(src.path)
        self.constant = {"driver": src.meta.get("driver_version"), "profile": src.decoders.profile.version,
                         "trace_id": self.id, "trace": os.path.basename(src.path)}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.pending: dict[str, _Columns] = {}
        self.rows = 0
        self.paths: dict[str, Path] = {}
        self._offset = src.wall_offset_ns or 0
        self._sources: dict[int, str] = {}
        self._day = ""
        self._day_span = (0, 0)  # [start, end) in wall ns of the day ``_day``: one strftime per day, not per call
        self._rows: _Columns | None = None

    def add(self, call: Call, info: CallInfo, objects: dict[str, str]) -> None:
        first = call.first
        wall = first.time_ns + self._offset
        if not self._day_span[0] <= wall < self._day_span[1]:
            self._day = utc_day(wall)
            start = wall - wall % DAY_NS
            self._day_span = (start, start + DAY_NS)
            self._rows = None
        day = self._day
        rows = self._rows
        if rows is None:
            rows = self.pending.get(day)
            if rows is None:
                rows = self.pending[day] = _Columns()
            self._rows = rows
        source = self._sources.get(first.source)
        if source is None:
            source = self._sources[first.source] = enum_name(Source, first.source)
        latency = info.latency_ns if info.exit_seq is not None and info.exit_seq != info.enter_seq else None
        in_flight = call.state in (CallState.IN_FLIGHT, CallState.UNFINISHED)
        rows.rows.append((
            wall // 1000, wall, first.time_ns - self.src.start_ns, first.seq, first.pid, first.tid,
            info.client_id, source, info.name, info.detail, info.status_name, info.status, info.ok,
            call.state.value, latency, self.src.end_ns - first.time_ns if in_flight else latency,
            list(info.handles.items()), list(objects.items()), info.bytes))
        self.rows += 1
        if len(rows) >= ROW_GROUP:
            self._flush(day)

    def _flush(self, day: str) -> None:
        rows = self.pending.pop(day, None)
        if rows is self._rows:
            self._rows = None
        if rows is None or not len(rows):
            return
        writer = self.writers.get(day)
        if writer is None:
            folder = partition_dir(self.root, self.host, day)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{self.id}.parquet"
            writer = self.writers[day] = pq.ParquetWriter(path, SCHEMA, compression="zstd")
            self.paths[day] = path
        writer.write_table(rows.table(self.constant), row_group_size=ROW_GROUP)

    def close(self) -> list[tuple[Path, int]]:
        for day in list(self.pending):
            self._flush(day)
        for writer in self.writers.values():
            writer.close()
        return [(path, pq.ParquetFile(path).metadata.num_rows) for path in self.paths.values()]


def export_trace(src: ExportInput, root: str | os.PathLike, host: str | None = None,
                 force: bool = False) -> list[tuple[Path, int]]:
    """Add one trace's calls to the dataset at ``root``; the files written and their rows."""
    rows = TraceRows(src, root, host or str(src.meta.get("host") or "unknown"))
    before = sorted(Path(root).glob(f"host=*/day=*/{rows.id}.parquet"))
    if before and not force:
        raise RmtraceError(f"{src.path} is in the dataset already ({before[0]}); use --force to replace it")
    for path in before:
        path.unlink()  # a re-export replaces the trace's rows, whatever host or days they had
    fold = StreamingFold(src.decoders, transitions=False)  # a row needs the call's CallInfo, no lane states
    try:
        for call in src.calls():
            info = fold.fold(call)
            rows.add(call, info, fold.stable_names(info))
    finally:
        written = rows.close()
    return written


def export_dataset(traces: Iterable[str], root: str | os.PathLike, driver: str | None = None,
                   host: str | None = None, force: bool = False) -> list[tuple[Path, int]]:
    """Export every trace into one dataset directory (made if missing)."""
    inputs = [Path(t).resolve() for t in traces]
    root_path = Path(root)
    if root_path.exists() and not root_path.is_dir():
        raise RmtraceError(f"{root} is not a directory: a parquet dataset is a directory of files")
    if any(p == root_path.resolve() or root_path.resolve() in p.parents for p in inputs):
        raise RmtraceError(f"{root} holds an input trace; write the dataset somewhere else")
    written: list[tuple[Path, int]] = []
    for path in inputs:
        with ExportInput(path, driver=driver, what=f"rmtrace export {path.name}") as src:
            written.extend(export_trace(src, root, host, force))
    return written
