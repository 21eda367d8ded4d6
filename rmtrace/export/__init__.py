"""Exports: a trace in the formats other tools read (layer 4: reads the trace, the decoders and the session model).

* ``pcapng``: one packet per record, one interface per source, for Wireshark
  and tshark with the generated Lua dissector (``dissector``);
* ``perfetto``: calls, channel and rank states, flows and host counters for
  ui.perfetto.dev;
* ``jsonl``: the objects of ``rmtrace show --json``, one a line;
* ``parquet``: one table of calls, many traces into one dataset partitioned
  by host and day, for DuckDB (``rmtrace query``), Spark or Trino.

Every exporter streams: memory does not grow with the trace's length.
``FORMATS`` maps a format's name to the function that writes it.
"""
