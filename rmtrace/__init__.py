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

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmtrace.errors import RmtraceError, TraceError

__version__ = "0.1.0"

_LAZY = {name: "rmtrace.record" for name in ("Buffer", "MarkOp", "Phase", "Record", "Role", "Source", "SysOp", "When")}
_LAZY.update({name: "rmtrace.trace" for name in ("Cursor", "Recovery", "TraceReader", "TraceWriter")})
"""Names loaded on first use (PEP 562): ``import rmtrace``, which every command does, costs no construct or
zstandard until a trace is opened (bench/cli_startup.py)."""

if TYPE_CHECKING:
    from rmtrace.record import Buffer, MarkOp, Phase, Record, Role, Source, SysOp, When  # noqa: F401
    from rmtrace.trace import Cursor, Recovery, TraceReader, TraceWriter  # noqa: F401
    from rmtrace.trace import open_trace as open  # noqa: A001, F401


def __getattr__(name: str) -> Any:
    import importlib
    if name == "open":  # rmtrace.open(path) is the documented entry point
        return importlib.import_module("rmtrace.trace").open_trace
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rmtrace' has no attribute {name!r}")


__all__ = [
    "open", "TraceReader", "TraceWriter", "Cursor", "Recovery", "Record", "Buffer", "Source", "Phase",
    "Role", "When", "SysOp", "MarkOp", "RmtraceError", "TraceError", "__version__",
]
