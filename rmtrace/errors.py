"""Errors rmtrace raises for bad input.

Every error a user can cause (a missing, truncated, corrupt or foreign file, an
unknown driver version, a bad argument) is an ``RmtraceError``: the CLI prints
its message and exits with status 2, never a traceback.
"""


class RmtraceError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""


class RecordError(RmtraceError):
    """Bytes that are not a well-formed record."""


class TraceError(RmtraceError):
    """A trace file that cannot be read."""


class NotATraceError(TraceError):
    """The file is not an rmtrace trace at all (foreign or empty)."""


class TraceVersionError(TraceError):
    """A trace written in a format version this rmtrace does not read."""


class CorruptTraceError(TraceError):
    """A trace whose bytes fail their checks where no recovery is possible."""
