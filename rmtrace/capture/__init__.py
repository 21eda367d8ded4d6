"""Capture: run a command tree under the LD_PRELOAD shim and write every RM/UVM call into a trace.

    from rmtrace.capture import RecordOptions, record_command
    result = record_command(RecordOptions(command=["./app"], output="run1.trace"))
    result.exit_status, result.records, result.in_flight

The shim is C (kmod_shim/interposer.c and friends, built by the install);
docs/capture.md describes what it records and how the rings work.
"""

from rmtrace.capture.recorder import Recorder, RecordOptions, RecordResult, record_command

__all__ = ["RecordOptions", "RecordResult", "Recorder", "record_command"]
