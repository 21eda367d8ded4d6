"""The terminal the TUI draws on: the user's own, even when its standard streams are redirected.

Textual reads keys from file descriptor 0 and draws on descriptor 2, so
``rmtrace tui 2>/dev/null`` drew nowhere: a blank screen.  Like less(1) and
fzf, the TUI uses the controlling terminal (``/dev/tty``) for whichever of
the two is not a terminal, for as long as the app runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from rmtrace.errors import RmtraceError

KEYS_FD, SCREEN_FD = 0, 2
"""Where Textual's driver reads keys (stdin) and draws (stderr)."""


@contextlib.contextmanager
def on_terminal() -> Iterator[None]:
    """Point stdin and stderr at ``/dev/tty`` where they are not a terminal; put them back after.

    Raises RmtraceError when there is no terminal at all (a cron job, CI).
    """
    moved = [fd for fd in (KEYS_FD, SCREEN_FD) if not os.isatty(fd)]
    if not moved:
        yield
        return
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise RmtraceError("the TUI needs a terminal (for a text listing use 'rmtrace show')") from None
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in moved}
    try:
        for fd in moved:
            os.dup2(tty, fd)
        yield
    finally:
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(tty)
