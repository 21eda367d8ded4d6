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
The rows are the call table's (``rmtrace.columns``: built, or loaded from
the trace's cache entry), a block of ``ROW_GROUP`` calls at a time, each a
row group (split where a day ends); the stable object names come from the
RM objects as columns (``rmtrace.export.call_rows``), no call is decoded.
The clients are the session model's, so a replay's are the ones it was made
for (its metadata), as ``rmtrace stats`` names them.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rmtrace.errors import RmtraceError
from rmtrace.export.call_rows import CallColumns, object_names
from rmtrace.export.source import ExportInput, trace_id

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
        self.rows = 0
        self.paths: dict[str, Path] = {}

    def add(self, columns: dict[str, Any]) -> None:
        """Write a block of calls (``CallColumns.block``), a row group per day it holds."""
        wall = columns.pop("wall")
        days = wall // DAY_NS
        cuts = (np.flatnonzero(np.diff(days)) + 1).tolist()
        for start, stop in zip([0, *cuts], [*cuts, len(days)]):
            part = {name: value[start:stop] for name, value in columns.items()}
            part.update((name, [value] * (stop - start)) for name, value in self.constant.items())
            self._writer(utc_day(int(wall[start]))).write_table(pa.Table.from_pydict(part, schema=SCHEMA),
                                                                row_group_size=ROW_GROUP)
            self.rows += stop - start

    def _writer(self, day: str) -> pq.ParquetWriter:
        writer = self.writers.get(day)
        if writer is None:
            folder = partition_dir(self.root, self.host, day)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{self.id}.parquet"
            writer = self.writers[day] = pq.ParquetWriter(path, SCHEMA, compression="zstd")
            self.paths[day] = path
        return writer

    def close(self) -> list[tuple[Path, int]]:
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
    table, names = object_names(src)
    columns = CallColumns(src, table, names)
    first = np.asarray(table.columns["enter_seq"])
    try:
        for start in range(0, len(table), ROW_GROUP):
            stop = min(start + ROW_GROUP, len(table))
            rows.add(columns.block(np.arange(start, stop)))
            # rows are in order of their first record: the records before the next block's first are done
            src.progress.add((int(first[stop]) if stop < len(table) else src.reader.record_count) - src.progress.done)
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
