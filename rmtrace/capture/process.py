"""The traced command tree: starting it, reaping it, stopping it.

The recorder makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so a
process whose parent exits is re-parented to the recorder rather than to
init: the whole tree stays ours to wait for and, if it wedges, to end.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from rmtrace.errors import ProgramNotFoundError, ProgramNotRunnableError

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants; False where the kernel refuses (then orphans go to init)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def launch(command: list[str], env: dict[str, str]) -> int:
    """Start the command (found on PATH) with env; its pid.

    Not subprocess.Popen: a Popen object reaps its child when it is
    collected, and the recorder must be the one that reaps it.
    """
    try:
        return os.posix_spawnp(command[0], command, env)
    except FileNotFoundError:
        raise ProgramNotFoundError(f"cannot run {command[0]!r}: no such program") from None
    except PermissionError:
        raise ProgramNotRunnableError(f"cannot run {command[0]!r}: permission denied") from None
    except OSError as exc:
        raise ProgramNotRunnableError(f"cannot run {command[0]!r}: {exc.strerror}") from None


class Reaped(NamedTuple):
    pid: int
    status: int
    time_ns: int


@dataclass
class Tree:
    """The direct child and everything the recorder has reaped so far."""

    root: int
    root_status: int | None = None
    reaped: list[Reaped] = field(default_factory=list)
    no_children: bool = False
    _root_fd: int | None = field(default=None, repr=False)
    """A pidfd of the root (Linux 5.3+) while it runs: readable once it exits (``wait``)."""

    def __post_init__(self) -> None:
        try:
            self._root_fd = os.pidfd_open(self.root)
        except OSError:  # an older kernel, or the root already reaped: wait() sleeps its whole time
            self._root_fd = None

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, woken at once when the root exits: a short command's
        recording ends when it does, not at the recorder's next poll."""
        if self._root_fd is None:
            time.sleep(timeout)
        else:
            select.select([self._root_fd], [], [], timeout)

    def reap(self) -> list[Reaped]:
        """Reap every exited child (the root, and orphans re-parented to us)."""
        new = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.no_children = True
                break
            if pid == 0:
                self.no_children = False
                break
            r = Reaped(pid, status, time.monotonic_ns())
            new.append(r)
            if pid == self.root:
                self.root_status = status
                if self._root_fd is not None:
                    os.close(self._root_fd)  # it stays readable: wait() sleeps from now on
                    self._root_fd = None
        self.reaped.extend(new)
        return new

    @property
    def exited(self) -> bool:
        """The root exited and no descendant is left."""
        return self.root_status is not None and self.no_children


def descendants(pid: int) -> list[int]:
    """Live descendants of pid, from /proc (children before grandchildren)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def terminate(tree: Tree, grace_s: float) -> list[int]:
    """SIGTERM every descendant, SIGKILL what is left after grace_s; the pids signalled."""
    pids = descendants(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
                os.kill(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only when it runs
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            tree.reap()
            if tree.no_children or not descendants(os.getpid()):
                break
            time.sleep(0.02)
        if not descendants(os.getpid()):
            break
    tree.reap()
    return pids
