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

from rmtrace.capture.shm import (
    READ_COUNTERS,
    RING,
    RING_COUNTERS,
    RING_CTL_SIZE,
    RING_MAGIC,
    RING_MIN_SIZE,
    RING_VERSION,
    RingState,
)
from rmtrace.errors import RmtraceError
from rmtrace.record import BUFFER_HEADER_SIZE, BUFFER_LEN, HEADER, HEADER_SIZE, RECORD, RECORD_MAGIC, RECORD_VERSION, H

_RECORD_START = RECORD.prefix("total_len")  # enough of a header to frame the record
_MAGIC, _HEADER_SIZE, _TOTAL = H.magic, H.header_size, H.total_len
_HEAD, _TAIL, _STATE, _WRITING = RING["head"], RING["tail"], RING["state"], RING["writing"]
GIVE_UP_TAIL = 1 << 63
"""The tail the recorder stores in a ring it retired (kmod_shim/rmtrace_ring.h)."""
ORDERED_MACHINES = ("x86_64", "AMD64", "amd64")


def check_machine() -> None:
    """RmtraceError unless plain loads and stores order the ring correctly here (x86-64 TSO)."""
    machine = os.uname().machine  # platform.machine() without platform's import
    if machine not in ORDERED_MACHINES:
        raise RmtraceError(f"rmtrace record runs on x86-64 only (its ring consumer relies on x86-64 memory "
                           f"ordering); this machine is {machine}")


def well_formed(raw: bytes) -> tuple | None:
    """The header tuple (rmtrace.record.HEADER, indexed by ``H``) of a record whose buffers all
    lie inside it, else None: the checks decode_record makes, without building the record."""
    h = HEADER.unpack_from(raw)
    if h[_MAGIC] != RECORD_MAGIC or h[H.version] != RECORD_VERSION or h[_HEADER_SIZE] < HEADER_SIZE \
            or h[_TOTAL] != len(raw):
        return None
    pos, end = h[_HEADER_SIZE], h[_TOTAL]
    for _ in range(h[H.nbufs]):
        if pos + BUFFER_HEADER_SIZE > end:
            return None
        pos += BUFFER_HEADER_SIZE + ((BUFFER_LEN.get(raw, pos) + 7) & ~7)
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
        if RING["magic"].get(self._mm) != RING_MAGIC:
            self._mm.close()
            raise RingNotReady(path)
        ctl = RING.unpack(self._mm)
        version, ctl_size, data_size = ctl.version, ctl.ctl_size, ctl.data_size
        self.pid = ctl.pid
        self.tid = ctl.tid
        self.image_id = ctl.image_id
        self.broken: str | None = None
        if version != RING_VERSION or ctl_size != RING_CTL_SIZE or data_size & (data_size - 1) \
                or data_size != size - RING_CTL_SIZE:
            self._give_up(f"bad ring header (version {version}, control {ctl_size}, data {data_size}, file {size})")
        self.size = data_size
        self._mask = data_size - 1
        self._tail = ctl.tail
        self._data = memoryview(self._mm)[RING_CTL_SIZE:]

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
        head = _HEAD.get(self._mm)  # load-acquire on x86-64
        pos = self._tail
        if head < pos or head - pos > self.size:
            self._give_up(f"head {head} impossible for tail {pos} and size {self.size}")
            return []
        out = []
        while head - pos >= HEADER_SIZE:
            start = _RECORD_START.unpack(self._bytes(pos, _RECORD_START.size))
            magic, header_size, total = start[_MAGIC], start[_HEADER_SIZE], start[_TOTAL]
            if magic != RECORD_MAGIC or total % 8 or total < header_size or header_size < HEADER_SIZE \
                    or total > head - pos:
                self.broken = f"bad record at ring position {pos} (magic {magic:#x}, length {total})"
                break
            out.append(self._bytes(pos, total))
            pos += total
        if pos != head and not self.broken:
            self.broken = f"{head - pos} stray bytes at ring position {pos}"
        self._tail = pos
        if self.broken:
            self._give_up(self.broken)
        else:
            _TAIL.put(self._mm, pos)  # store-release on x86-64
        return out

    def _give_up(self, reason: str) -> None:
        """Retire the ring, and tell its producer: a tail beyond its head makes the shim drop what
        it would write there (counted in lost_stopped) rather than wait for room that never comes."""
        self.broken = reason
        _TAIL.put(self._mm, GIVE_UP_TAIL)

    @property
    def writing(self) -> int:
        """The producer's ``writing`` stamp: a floor of the time of the record it is writing, 0 when none
        (read it before ``drain``: kmod_shim/rmtrace_ring.h, *time order*)."""
        return 0 if self.broken else _WRITING.get(self._mm)

    @property
    def closed(self) -> bool:
        """The producer thread exited: after one more drain nothing new can come."""
        return _STATE.get(self._mm) == RingState.CLOSED

    def counters(self) -> dict[str, int]:
        """The producer's counters: losses and waits (RING_COUNTERS), then how it read (READ_COUNTERS)."""
        return {name: RING[name].get(self._mm) for name in RING_COUNTERS + READ_COUNTERS}

    def close(self) -> None:
        self._data.release()
        self._mm.close()
