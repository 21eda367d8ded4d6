"""One replayed client: a process of its own that issues what the target tells it, and nothing else.

Run as ``python -I -S executor.py`` by ``process.py`` (the standard library
only, so that it starts fast and its address space stays small).  It reads
requests on stdin and writes answers on stdout, each a 4-byte little-endian
length and a ``marshal``-ed tuple (docs/replay-nvidia.md, "The client
process"); it does not know what a call means -- every decision (safety,
remapping) was made by the target.  Per request:

* ``reserve``: map the address ranges the recorded process had where its calls
  point, at the same addresses when they are free (else elsewhere, and says
  where): PROT_NONE, read-write where RM pins pages;
* ``open``, ``close``, ``dup``, ``mmap``, ``munmap``: those syscalls; mmap and
  munmap touch only ranges this process reserved or mapped itself, never
  memory of its own interpreter;
* ``ioctl``: the buffers are copied into memory of this process, each link
  (a user pointer) is filled with the address of its buffer, the mappings the
  target says the recorded process had dropped are dropped, the ioctl is
  issued and timed on CLOCK_MONOTONIC around the call alone, and the buffers
  that come back are read (their links restored to the recorded values);
* ``teardown``: close the UVM fds, free the RM clients still alive, close every
  other fd, unmap, answer and exit.  End of input (the target died) does the same.

Requests name a thread: one thread per recorded thread issues that thread's
calls in order, so a recording's threads (and ``--streams`` lanes) run at once.
SIGINT is ignored: Ctrl-C reaches the target, which tears this process down.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import marshal
import os
import queue
import signal
import struct
import sys
import threading
import time
from typing import Any

PROT_NONE, PROT_RW = 0, 3
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE, MAP_FIXED = 0x02, 0x20, 0x4000, 0x10
MAP_FIXED_NOREPLACE = 0x100000
MAP_FAILED = ctypes.c_void_p(-1).value
LENGTH = struct.Struct("<I")

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
libc.mmap.restype = ctypes.c_void_p
libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class Own:
    """The address ranges this process reserved or mapped itself (sorted, disjoint)."""

    def __init__(self) -> None:
        self.spans: list[list[int]] = []
        self.lock = threading.Lock()

    def add(self, lo: int, hi: int) -> None:
        with self.lock:
            self.spans.append([lo, hi])
            self.spans.sort()
            merged: list[list[int]] = []
            for s in self.spans:
                if merged and s[0] <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], s[1])
                else:
                    merged.append(s)
            self.spans = merged

    def covers(self, lo: int, hi: int) -> bool:
        with self.lock:
            return any(a <= lo and hi <= b for a, b in self.spans)

    def take(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of [lo, hi) this process owns, which it gives up."""
        with self.lock:
            out, keep = [], []
            for a, b in self.spans:
                x, y = max(a, lo), min(b, hi)
                if x < y:
                    out.append((x, y))
                    if a < x:
                        keep.append([a, x])
                    if y < b:
                        keep.append([y, b])
                else:
                    keep.append([a, b])
            self.spans = keep
            return out


class Client:
    def __init__(self, out: int) -> None:
        self.out = out
        self.out_lock = threading.Lock()
        self.own = Own()
        self.fds: dict[int, str] = {}
        """fd -> the device node it is."""
        self.fd_lock = threading.Lock()
        self.threads: dict[int, queue.Queue] = {}

    # -- answers

    def answer(self, op_id: int, *values: Any) -> None:
        blob = marshal.dumps((op_id, *values))
        with self.out_lock:
            os.write(self.out, LENGTH.pack(len(blob)) + blob)

    # -- requests

    def dispatch(self, request: tuple) -> bool:
        """Run one request (on its thread); False once the process must end."""
        op_id, tid, kind = request[0], request[1], request[2]
        if kind == "reserve":
            self.answer(op_id, 0, 0, 0, 0, [self.reserve(*r) for r in request[3]])
            return True
        if kind == "teardown":
            self.answer(op_id, 0, 0, 0, 0, self.teardown(request[3], request[4]))
            return False
        work = self.threads.get(tid)
        if work is None:
            work = self.threads[tid] = queue.Queue()
            threading.Thread(target=self.worker, args=(work,), daemon=True, name=f"replay-{tid}").start()
        work.put(request)
        return True

    def worker(self, work: queue.Queue) -> None:
        while True:
            request = work.get()
            op_id, kind, args = request[0], request[2], request[3:]
            try:
                self.answer(op_id, *getattr(self, "do_" + kind)(*args))
            except Exception as exc:  # a request this process cannot carry out answers so, and it goes on
                self.answer(op_id, -1, errno.EINVAL, 0, 0, f"{type(exc).__name__}: {exc}")

    # -- syscalls

    def do_open(self, path: str) -> tuple:
        start = time.monotonic_ns()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            return -1, exc.errno or errno.EIO, start, time.monotonic_ns() - start, None
        with self.fd_lock:
            self.fds[fd] = os.path.basename(path)
        return fd, 0, start, time.monotonic_ns() - start, None

    def do_close(self, fd: int) -> tuple:
        with self.fd_lock:
            known = self.fds.pop(fd, None)
        if known is None:
            return -1, errno.EBADF, 0, 0, None  # never an fd of the interpreter's own
        start = time.monotonic_ns()
        try:
            os.close(fd)
        except OSError as exc:
            return -1, exc.errno or errno.EIO, start, time.monotonic_ns() - start, None
        return 0, 0, start, time.monotonic_ns() - start, None

    def do_dup(self, fd: int) -> tuple:
        with self.fd_lock:
            node = self.fds.get(fd)
        if node is None:
            return -1, errno.EBADF, 0, 0, None
        new = os.dup(fd)
        with self.fd_lock:
            self.fds[new] = node
        return new, 0, 0, 0, None

    def do_mmap(self, addr: int, length: int, prot: int, flags: int, fd: int, offset: int) -> tuple:
        with self.fd_lock:
            known = fd in self.fds
        if not known:
            return -1, errno.EBADF, 0, 0, None
        if flags & MAP_FIXED:
            pages = (length + 4095) & ~4095
            if not self.own.covers(addr, addr + pages):
                flags = (flags & ~MAP_FIXED) | MAP_FIXED_NOREPLACE  # never over memory of our own
        start = time.monotonic_ns()
        got = libc.mmap(addr or None, length, prot, flags, fd, offset)
        took = time.monotonic_ns() - start
        if got is None or got == MAP_FAILED:
            return -1, ctypes.get_errno(), start, took, None
        self.own.add(got, got + ((length + 4095) & ~4095))
        return got, 0, start, took, None

    def do_munmap(self, addr: int, length: int) -> tuple:
        start = time.monotonic_ns()
        parts = self.own.take(addr, addr + ((length + 4095) & ~4095))
        for lo, hi in parts:
            libc.munmap(lo, hi - lo)
        return 0, 0, start, time.monotonic_ns() - start, None

    def do_ioctl(self, fd: int, request: int, bufs: list, links: list, after: list, drop: list) -> tuple:
        with self.fd_lock:
            known = fd in self.fds
        if not known:
            return -1, errno.EBADF, 0, 0, None
        for addr, length in drop:  # a CPU mapping the recorded process had replaced with its reservation
            if self.own.covers(addr, addr + length):
                libc.mmap(addr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0)
        mem = [ctypes.create_string_buffer(bytes(b), max(len(b), 1)) for b in bufs]
        for parent, offset, child in links:
            struct.pack_into("<Q", mem[parent], offset, ctypes.addressof(mem[child]))
        # fcntl.ioctl costs a fraction of a ctypes call, so the time measured is the driver's; it passes the
        # argument in place (or, up to 1 KiB, a copy it writes back): the buffers it points to stay where they are
        arg = mem[0] if mem else 0
        err = 0
        start = time.monotonic_ns()
        try:
            ret = fcntl.ioctl(fd, request, arg, True)
        except OSError as exc:
            ret, err = -1, exc.errno or errno.EIO
        took = time.monotonic_ns() - start
        back = []
        for i in after:
            data = bytearray(mem[i].raw[:len(bufs[i])])
            for parent, offset, _child in links:
                if parent == i:  # the recorded pointer value, not ours
                    data[offset:offset + 8] = bufs[i][offset:offset + 8]
            back.append(bytes(data))
        return ret, err, start, took, back

    # -- the address space

    def reserve(self, base: int, length: int, rw: list) -> int:
        """Map [base, base + length) PROT_NONE (its rw parts read-write); where it lands."""
        flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
        got = libc.mmap(base, length, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0)
        if got is None or got == MAP_FAILED or got != base:
            if got not in (None, MAP_FAILED):
                libc.munmap(got, length)
            align = 1 << 21
            raw = libc.mmap(None, length + align, PROT_NONE, flags, -1, 0)
            if raw is None or raw == MAP_FAILED:
                return 0
            got = raw + ((base - raw) % align)  # the same offset within a 2 MiB page as the recorded range
            if got > raw:
                libc.munmap(raw, got - raw)
            end = raw + length + align
            if end > got + length:
                libc.munmap(got + length, end - got - length)
        for lo, n in rw:
            libc.mprotect(got + (lo - base), n, PROT_RW)
        self.own.add(got, got + length)
        return got

    def teardown(self, frees: list, free_request: int) -> list:
        """Free what is left: the UVM fds closed first (a program's own teardown unregisters from UVM before
        it frees its RM objects), then each RM client still alive (RM_FREE of the client, issued as
        ``free_request`` on an fd of the file it was allocated through), then every fd, then the ranges."""
        results = []
        with self.fd_lock:
            fds = dict(self.fds)
        for fd, node in fds.items():
            if node.startswith("nvidia-uvm"):
                self._close_quietly(fd)
        for fd, client in frees:
            if fd not in fds:  # RM freed the clients of that fd when it was closed
                continue
            arg = bytearray(struct.pack("<4I", client, client, client, 0))
            try:
                ret = fcntl.ioctl(fd, free_request, arg, True)
            except OSError:
                ret = -1
            results.append((client, ret, struct.unpack_from("<I", arg, 12)[0]))
        for fd in fds:
            self._close_quietly(fd)
        for lo, hi in self.own.take(0, 1 << 64):
            libc.munmap(lo, hi - lo)
        return results

    def _close_quietly(self, fd: int) -> None:
        with self.fd_lock:
            if self.fds.pop(fd, None) is None:
                return
        try:
            os.close(fd)
        except OSError:
            pass


def read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = Client(sys.stdout.fileno())
    inp = sys.stdin.fileno()
    client.answer(0, os.getpid(), 0, 0, 0, "ready")
    while True:
        head = read_exact(inp, LENGTH.size)
        body = read_exact(inp, LENGTH.unpack(head)[0]) if head is not None else None
        if body is None:  # the target is gone: closing every fd makes RM and UVM free what this process held
            client.teardown([], 0)
            return 0
        if not client.dispatch(marshal.loads(body)):
            return 0


if __name__ == "__main__":
    sys.exit(main())
