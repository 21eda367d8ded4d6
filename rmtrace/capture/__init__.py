"""Capture: run a command tree under the LD_PRELOAD shim and write every RM/UVM call into a trace.

    from rmtrace.capture import RecordOptions, record_command
    result = record_command(RecordOptions(command=["./app"], output="run1.trace"))
    result.exit_status, result.records, result.in_flight

The shim is C (kmod_shim/interposer.c and friends, built by the install);
docs/capture.md describes what it records and how the rings work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmtrace.capture.recorder import Recorder, RecordOptions, RecordResult, record_command  # noqa: F401


def __getattr__(name: str) -> Any:
    """The recorder on first use (PEP 562): a module of this package (capture.kmod's tables, which the
    decoders read) is imported without it, and every command that decodes would otherwise pay for it."""
    if name in __all__:
        from rmtrace.capture import recorder
        return getattr(recorder, name)
    raise AttributeError(f"module 'rmtrace.capture' has no attribute {name!r}")


__all__ = ["RecordOptions", "RecordResult", "Recorder", "record_command"]
