"""The target's end of one client process (``executor.py``): start it, send it requests, read its answers."""

from __future__ import annotations

import marshal
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rmtrace.errors import RmtraceError

EXECUTOR = Path(__file__).with_name("executor.py")
LENGTH = struct.Struct("<I")
READY_TIMEOUT_S = 20.0


class ClientProcess:
    """One executor process: requests out, answers ``(op id, ret, errno, start ns, ns, extra)`` in."""

    def __init__(self, label: str) -> None:
        self.label = label
        try:
            # A session of its own: the terminal's Ctrl-C reaches only the target, which tears this down in order.
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(EXECUTOR)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, start_new_session=True, bufsize=0)
        except OSError as exc:
            raise RmtraceError(f"cannot start the process replaying {label}: {exc.strerror or exc}") from None
        if self.proc.stdin is None or self.proc.stdout is None:
            raise RmtraceError(f"the process replaying {label} has no pipes")
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.out = self._stdout.fileno()
        os.set_blocking(self.out, False)
        self._buf = bytearray()
        self._next = 1
        self.closed = False
        ready = self._first(time.monotonic() + READY_TIMEOUT_S)
        self.pid = int(ready[1])

    def _first(self, until: float) -> tuple:
        with selectors.DefaultSelector() as sel:
            sel.register(self.out, selectors.EVENT_READ)
            while time.monotonic() < until:
                sel.select(until - time.monotonic())
                answers = self.read()
                if answers:
                    return answers[0]
                if self.closed:
                    break
        self.kill()
        raise RmtraceError(f"the process replaying {self.label} did not start (exit status {self.proc.poll()})")

    def send(self, tid: int, kind: str, *args: Any) -> int:
        """Send one request; its op id (the answer carries it)."""
        op_id = self._next
        self._next += 1
        blob = marshal.dumps((op_id, tid, kind) + args)
        try:
            self._stdin.write(LENGTH.pack(len(blob)) + blob)
        except (BrokenPipeError, ValueError):
            self.closed = True
        return op_id

    def read(self) -> list[tuple]:
        """Every whole answer that has arrived (never blocks); sets ``closed`` at end of output."""
        while True:
            try:
                chunk = os.read(self.out, 1 << 20)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                break
            self._buf += chunk
        out = []
        while len(self._buf) >= LENGTH.size:
            n = LENGTH.unpack_from(self._buf)[0]
            if len(self._buf) < LENGTH.size + n:
                break
            out.append(marshal.loads(bytes(self._buf[LENGTH.size:LENGTH.size + n])))
            del self._buf[:LENGTH.size + n]
        return out

    def died(self) -> str | None:
        """How the process ended, once it has (None while it runs)."""
        code = self.proc.poll()
        if code is None:
            return None
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"

    def wait(self, timeout_s: float) -> bool:
        try:
            self.proc.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self) -> None:
        """SIGKILL: the kernel closes its fds, and RM and UVM free what they held for it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self._stdin, self._stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self.closed = True
