"""rmtrace: a record/replay debugger for NVIDIA RM/GSP traffic.

The Python API scripts and the other parts of rmtrace use::

    import rmtrace
    with rmtrace.open("run1.trace") as trace:
        print(trace.meta["driver_version"], trace.record_count)
        for rec in trace.records(source=rmtrace.Source.RM, phase=rmtrace.Phase.EXIT):
            ...

    with rmtrace.TraceWriter("out.trace", meta={...}) as w:
        w.write(rmtrace.Record(source=rmtrace.Source.MARK, phase=rmtrace.Phase.EVENT, ...))
"""

from rmtrace.errors import RmtraceError, TraceError
from rmtrace.record import Buffer, MarkOp, Phase, Record, Role, Source, SysOp, When
from rmtrace.trace import Cursor, Recovery, TraceReader, TraceWriter, open_trace

open = open_trace  # noqa: A001  (rmtrace.open(path) is the documented entry point)

__version__ = "0.1.0"

__all__ = [
    "open", "TraceReader", "TraceWriter", "Cursor", "Recovery", "Record", "Buffer", "Source", "Phase",
    "Role", "When", "SysOp", "MarkOp", "RmtraceError", "TraceError", "__version__",
]
