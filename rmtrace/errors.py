"""Errors rmtrace raises for bad input.

Every error a user can cause (a missing, truncated, corrupt or foreign file, an
unknown driver version, a bad argument) is an ``RmtraceError``: the CLI prints
its message and exits with the error's ``exit_code`` (2, or the number
rmtrace/exitcodes.py gives the case), never a traceback.
"""

from rmtrace.exitcodes import ExitCode


class RmtraceError(Exception):
    """A user-facing error: the message says what is wrong and what to do."""

    exit_code: ExitCode = ExitCode.ERROR


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


class ProgramNotFoundError(RmtraceError):
    """A command to run (``record -- CMD``) that is not on PATH or not there."""

    exit_code = ExitCode.NOT_FOUND


class ProgramNotRunnableError(RmtraceError):
    """A command to run that exists but cannot be executed (no permission, not an executable)."""

    exit_code = ExitCode.CANNOT_RUN
