"""The consumer side of one thread's ring (the producer is kmod_shim/shim_record.c).

The traced process is untrusted: every head, tail and record length read from
shared memory is bounds-checked, and a ring that breaks its contract is
retired with a reason instead of being trusted further.  The ordering rules
are tabled in ``kmod_shim/rmtrace_ring.h``; the loads and stores here are
aligned 8-byte accesses through ``mmap``, which have acquire/release meaning
on x86-64 only (``check_machine``).
"""

from __future__ import annotations

import mmap
import os
import platform
import struct

from rmtrace.capture.shm import (
    RING_COUNTERS,
    RING_CTL_SIZE,
    RING_MAGIC,
    RING_MIN_SIZE,
    RING_OFFSETS,
    RING_VERSION,
    RingState,
)
from rmtrace.errors import RmtraceError
from rmtrace.record import BUFFER, HEADER, HEADER_SIZE, RECORD_MAGIC, RECORD_VERSION

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_RECORD_START = struct.Struct("<IHHI")  # magic, version, header_size, total_len
ORDERED_MACHINES = ("x86_64", "AMD64", "amd64")


def check_machine() -> None:
    """RmtraceError unless plain loads and stores order the ring correctly here (x86-64 TSO)."""
    if platform.machine() not in ORDERED_MACHINES:
        raise RmtraceError(f"rmtrace record runs on x86-64 only (its ring consumer relies on x86-64 memory "
                           f"ordering); this machine is {platform.machine()}")


_BUF_LEN = struct.Struct("<I")
_BUF_LEN_AT = 4  # rmt_buffer.len
assert BUFFER.size == 24


def well_formed(raw: bytes) -> tuple | None:
    """The header tuple (rmtrace.record.HEADER order) of a record whose buffers all lie
    inside it, else None: the checks decode_record makes, without building the record."""
    h = HEADER.unpack_from(raw)
    if h[0] != RECORD_MAGIC or h[1] != RECORD_VERSION or h[2] < HEADER_SIZE or h[3] != len(raw):
        return None
    pos, end = h[2], h[3]
    for _ in range(h[16]):
        if pos + BUFFER.size > end:
            return None
        pos += BUFFER.size + ((_BUF_LEN.unpack_from(raw, pos + _BUF_LEN_AT)[0] + 7) & ~7)
    return h if pos <= end else None


class RingNotReady(Exception):
    """The file exists but its producer has not finished setting it up."""


class Ring:
    """One ring file, mapped read-write (the consumer stores tail)."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size < RING_CTL_SIZE + RING_MIN_SIZE:
                raise RingNotReady(path)
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        if self._u32("magic") != RING_MAGIC:
            self._mm.close()
            raise RingNotReady(path)
        version, ctl_size = struct.unpack_from("<HH", self._mm, 4)
        data_size = self._u64("data_size")
        self.pid = self._u32("pid")
        self.tid = self._u32("tid")
        self.image_id = self._u64("image_id")
        self.broken: str | None = None
        if version != RING_VERSION or ctl_size != RING_CTL_SIZE or data_size & (data_size - 1) \
                or data_size != size - RING_CTL_SIZE:
            self.broken = f"bad ring header (version {version}, control {ctl_size}, data {data_size}, file {size})"
        self.size = data_size
        self._mask = data_size - 1
        self._tail = self._u64("tail")
        self._data = memoryview(self._mm)[RING_CTL_SIZE:]

    def _u64(self, name: str) -> int:
        return _U64.unpack_from(self._mm, RING_OFFSETS[name])[0]

    def _u32(self, name: str) -> int:
        return _U32.unpack_from(self._mm, RING_OFFSETS[name])[0]

    def _bytes(self, pos: int, n: int) -> bytes:
        """n bytes at never-wrapped position pos; a record across the end is bounce-copied."""
        off = pos & self._mask
        end = off + n
        if end <= self.size:
            return bytes(self._data[off:end])
        return bytes(self._data[off:]) + bytes(self._data[:end - self.size])

    def drain(self) -> list[bytes]:
        """Every complete record the producer has published since the last call."""
        if self.broken:
            return []
        head = self._u64("head")  # load-acquire on x86-64
        pos = self._tail
        if head < pos or head - pos > self.size:
            self.broken = f"head {head} impossible for tail {pos} and size {self.size}"
            return []
        out = []
        while head - pos >= HEADER_SIZE:
            magic, _version, header_size, total = _RECORD_START.unpack(self._bytes(pos, _RECORD_START.size))
            if magic != RECORD_MAGIC or total % 8 or total < header_size or header_size < HEADER_SIZE \
                    or total > head - pos:
                self.broken = f"bad record at ring position {pos} (magic {magic:#x}, length {total})"
                break
            out.append(self._bytes(pos, total))
            pos += total
        if pos != head and not self.broken:
            self.broken = f"{head - pos} stray bytes at ring position {pos}"
        self._tail = pos
        struct.pack_into("<Q", self._mm, RING_OFFSETS["tail"], pos)  # store-release on x86-64
        return out

    @property
    def closed(self) -> bool:
        """The producer thread exited: after one more drain nothing new can come."""
        return self._u32("state") == RingState.CLOSED

    def counters(self) -> dict[str, int]:
        return {name: self._u64(name) for name in RING_COUNTERS}

    def close(self) -> None:
        self._data.release()
        self._mm.close()
