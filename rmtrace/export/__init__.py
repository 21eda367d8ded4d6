"""Exports: a trace in the formats other tools read (layer 4: reads the trace, the decoders and the session model).

* ``pcapng``: one packet per record, one interface per source, for Wireshark
  and tshark with the generated Lua dissector (``dissector``);
* ``perfetto``: calls, channel and rank states, flows and host counters for
  ui.perfetto.dev;
* ``jsonl``: the objects of ``rmtrace show --json``, one a line;
* ``parquet``: one table of calls, many traces into one dataset partitioned
  by host and day, for DuckDB (``rmtrace query``), Spark or Trino.

Every exporter streams, a block of calls at a time (what still grows with the trace's length: docs/export.md).
``FORMATS`` maps a format's name to the function that writes it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

FORMATS: dict[str, str] = {
    "pcapng": "rmtrace.export.pcapng:write_pcapng",
    "perfetto": "rmtrace.export.perfetto:write_perfetto",
    "jsonl": "rmtrace.export.jsonl:write_jsonl",
}
"""Single-trace formats: name -> ``module:function(ExportInput, out) -> count`` (imported when asked for:
each pulls in its own library). Parquet datasets are ``rmtrace.export.parquet.export_dataset``."""


def writer(name: str) -> Callable[[Any, str], int]:
    """The function that writes format ``name``."""
    module, _, function = FORMATS[name].partition(":")
    return getattr(importlib.import_module(module), function)
