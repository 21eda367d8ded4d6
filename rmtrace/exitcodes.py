"""The exit statuses every rmtrace command uses: one table (docs/exit-codes.md).

A CI job reads the status alone: 0 nothing found, 1 a difference found,
2 the job itself is wrong (a typo, an unreadable trace, a refused output),
3 something is wedged.  The small numbers follow diff(1) (0 same,
1 different, 2 trouble); ``record`` passes the recorded command's own status
through and takes its other numbers from timeout(1) and env(1): 124 for a
planned ``--duration`` stop, 126 for a program that cannot be run, 127 for
one that does not exist, 128 + N for a command killed by signal N.
"""

from __future__ import annotations

import enum
import signal


class ExitCode(enum.IntEnum):
    """One meaning per number, the same for every command."""

    OK = 0
    """Done, and nothing found: the runs agree, nothing is wedged, every client is green."""
    FOUND = 1
    """A difference found, short of a wedge: runs diverge (diff, replay), calls slower than --slow (wedges)."""
    ERROR = 2
    """A usage or input error: a bad option, an unreadable trace, an output that may not be written."""
    WEDGED = 3
    """Something is wedged: a call that never returned, a replayed client that never got its answer."""
    TIMEOUT = 124
    """record: --duration stopped the command, as timeout(1) says."""
    CANNOT_RUN = 126
    """record: the program exists but cannot be run, as env(1) says."""
    NOT_FOUND = 127
    """record: no such program, as env(1) and the shell say."""
    INTERRUPTED = 128 + signal.SIGINT
    """Ctrl-C (SIGINT), as the shell says: 128 + the signal's number."""
