"""Decoders: name and unfold every RM, UVM, GSP and sema message, for the exact driver.

The API the session model, the TUI and the CLI use::

    from rmtrace.decoders import decoders_for, Level
    decoders = decoders_for(trace)                  # profile from trace.meta["driver_version"]
    for call in decoders.calls(trace.records()):    # enter+exit, request+response folded
        d = decoders.decode(call)                   # Decoded: name, detail, status, handles, buffers...
        print(d.name, d.detail, d.status_name, d.to_dict())
    decoders.label(record)                          # name level only: never parses params

One module per record source (rm, uvm, gsp, sema, system, mark), each a table
from operation number to decoder bound with ``bind_source``; docs/decoders.md.
"""

from rmtrace.decoders import gsp, kcall, mark, rm, sema, system, uvm  # noqa: F401  (each binds its source's table)
from rmtrace.decoders.base import Decoded, DecodedBuffer, Label, Level, Op, bind_source
from rmtrace.decoders.decoderset import DecoderSet, decoders_for

__all__ = ["DecoderSet", "decoders_for", "Decoded", "DecodedBuffer", "Label", "Level", "Op", "bind_source"]
