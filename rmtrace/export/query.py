"""SQL over a dataset of exported calls, with DuckDB: the table ``calls`` and rmtrace's percentiles.

``query(sql, root)`` opens an in-memory DuckDB, makes ``calls`` a view over
every Parquet file under ``root`` (Hive partitioning: ``host`` and ``day``
come from the directories) and runs ``sql``.  Two macros give percentiles as
``rmtrace stats`` computes them (the value at index floor(q·n) of the sorted
values, the largest when that is past the end), so a fleet's figures and one
trace's ``stats`` agree: ``p99(x)`` and ``percentile(x, q)``.  DuckDB's own
``quantile_disc(x, q)`` takes index floor(q·(n-1)) instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

from rmtrace.errors import RmtraceError

MACROS = (
    "CREATE MACRO percentile(x, q) AS list_sort(list(x))[least(count(x), floor(count(x) * q)::BIGINT + 1)]",
    "CREATE MACRO p99(x) AS percentile(x, 0.99)",
)


def connect(root: str | os.PathLike) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the dataset at ``root`` as the view ``calls``."""
    folder = Path(root)
    if not folder.is_dir():
        raise RmtraceError(f"{root}: no such dataset directory (write one with 'rmtrace export --format parquet')")
    if next(folder.glob("**/*.parquet"), None) is None:
        raise RmtraceError(f"{root} holds no .parquet files")
    con = duckdb.connect()
    pattern = str(folder / "**" / "*.parquet").replace("'", "''")
    con.execute(f"CREATE VIEW calls AS SELECT * FROM read_parquet('{pattern}', hive_partitioning = true)")
    for macro in MACROS:
        con.execute(macro)
    return con


def query(sql: str, root: str | os.PathLike) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The column names and rows of ``sql`` over the dataset at ``root``."""
    con = connect(root)
    try:
        result = con.execute(sql)
    except duckdb.Error as exc:
        raise RmtraceError(f"query: {exc}") from None
    columns = [d[0] for d in result.description or ()]
    return columns, result.fetchall()
