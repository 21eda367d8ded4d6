"""A recording session's directory: the files the shim and the recorder share.

``RMTRACE_SESSION_DIR`` names it to every traced process.  It holds
``session.ctl`` (shared counters and the recording state), ``capture.tab``
(the capture table) and one ``ring-<pid>-<tid>-<image>.rb`` per traced thread;
see ``kmod_shim/rmtrace_ring.h``.  It lives in /dev/shm (memory, not disk)
where that exists, and is removed when the recording ends.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
from collections.abc import Iterator

from rmtrace.capture.ring import Ring, RingNotReady
from rmtrace.capture.shm import SESSION, SESSION_VERSION, SessionState

SHM_DIR = "/dev/shm"
RING_NAME = re.compile(r"^ring-(\d+)-(\d+)-(\d+)\.rb$")
SESSION_FILE = "session.ctl"
TABLE_FILE = "capture.tab"


SESSION_DIR = re.compile(r"^rmtrace-(\d+)-")


def _base_dir() -> str:
    if os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK):
        return SHM_DIR
    import tempfile  # only without /dev/shm: its import (random, hashlib) is a few ms of every start
    return tempfile.gettempdir()


def _make_dir(base: str, prefix: str) -> str:
    """A new directory only we may use (as tempfile.mkdtemp makes one)."""
    while True:
        path = os.path.join(base, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_sessions(base: str | None = None) -> list[str]:
    """Remove the session folders of recorders that died without cleaning up (SIGKILL, OOM): their
    rings hold memory in /dev/shm.  A traced program still running keeps its mappings; it only
    cannot make new rings (counted as lost_noring in a session nobody reads any more)."""
    base = base or _base_dir()
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        match = SESSION_DIR.match(name)
        path = os.path.join(base, name)
        if match and not alive(int(match.group(1))) and os.path.isfile(os.path.join(path, SESSION_FILE)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class Session:
    """Creates the session directory and watches it for rings."""

    def __init__(self, table: bytes, recorder_pid: int | None = None) -> None:
        pid = recorder_pid or os.getpid()
        self.dir = _make_dir(_base_dir(), f"rmtrace-{pid}-")
        with open(os.path.join(self.dir, TABLE_FILE), "wb") as f:
            f.write(table)
        ctl = SESSION.pack(version=SESSION_VERSION, size=SESSION.size, recorder_pid=pid, state=SessionState.RECORDING,
                           next_image=0, lost_noring=0)
        path = os.path.join(self.dir, SESSION_FILE)
        with open(path, "wb") as f:
            f.write(ctl)
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            self._ctl = mmap.mmap(fd, len(ctl), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._seen: set[str] = set()

    def stop(self) -> None:
        """Tell every shim to stop writing (and never wait on a full ring)."""
        SESSION["state"].put(self._ctl, SessionState.STOPPED)

    @property
    def lost_noring(self) -> int:
        return SESSION["lost_noring"].get(self._ctl)

    @property
    def images(self) -> int:
        """Process images that started under the shim."""
        return SESSION["next_image"].get(self._ctl)

    def new_rings(self) -> Iterator[Ring]:
        """Rings that appeared since the last call and are ready to read."""
        with os.scandir(self.dir) as entries:
            names = [e.name for e in entries if e.name not in self._seen and RING_NAME.match(e.name)]
        for name in sorted(names, key=lambda n: tuple(map(int, RING_NAME.findall(n)[0]))):
            try:
                ring = Ring(os.path.join(self.dir, name))
            except (RingNotReady, FileNotFoundError):
                continue  # its producer is still setting it up: next time
            self._seen.add(name)
            yield ring

    def remove_ring(self, ring: Ring) -> None:
        ring.close()
        try:
            os.unlink(ring.path)
        except FileNotFoundError:
            pass

    def cleanup(self) -> None:
        self._ctl.close()
        shutil.rmtree(self.dir, ignore_errors=True)
