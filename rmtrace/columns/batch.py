"""A batch of chunks in one buffer, and its record headers read in place: the first step of every column reader.

``TraceReader.read_chunks`` decompresses consecutive chunks back to back into
one buffer; ``read_headers`` takes every record header of it as whole words
into the header's numpy dtype (derived from the construct mirror,
``rmtrace.columns.dtypes``) and checks them as
``rmtrace.record.decode_record`` does (a record that fails raises the same
``RecordError``).  ``ByteViews`` gathers anything else at byte positions of
the buffer.  This module needs no decoders (``rmtrace info`` counts headers
with it alone).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rmtrace.chunk import ChunkInfo
from rmtrace.columns.dtypes import HEADER_DTYPE
from rmtrace.columns.native import SCAN
from rmtrace.errors import RecordError
from rmtrace.record import ALIGN, RECORD_MAGIC, RECORD_VERSION
from rmtrace.trace import ChunkSpan


class ByteViews:
    """Typed views of a batch's record bytes, for gathers at byte positions."""

    def __init__(self, u1: np.ndarray) -> None:
        self.u1 = u1  # a whole number of 8-byte words
        self.typed = {1: u1, 2: u1.view("<u2"), 4: u1.view("<u4"), 8: u1.view("<u8")}

    def rows(self, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The structs of ``dtype`` at byte positions ``pos``, copied in C (``rmt_scan_rows``: half the CPU of
        numpy's gather of whole rows from a window view of the words)."""
        out = np.empty(len(pos), dtype=dtype)
        pos = np.ascontiguousarray(pos, dtype=np.int64)
        bad = SCAN.rows(self.u1.ctypes.data, len(self.u1), len(pos), pos.ctypes.data, dtype.itemsize, out.ctypes.data)
        if bad >= 0:
            raise IndexError(f"a {dtype.itemsize}-byte row at byte {pos[bad]} runs past the batch's {len(self.u1)}")
        return out

    def starts_with(self, start: np.ndarray, length: np.ndarray, prefix: bytes) -> np.ndarray:
        """Whether the data at ``start`` (-1: none) of ``length`` bytes begins with ``prefix``."""
        out = np.zeros(len(start), dtype=bool)
        rows = np.flatnonzero((start >= 0) & (length >= len(prefix)))
        if rows.size:
            window = sliding_window_view(self.u1, len(prefix))
            out[rows] = (window[start[rows]] == np.frombuffer(prefix, dtype=np.uint8)).all(axis=1)
        return out

    def read(self, pos: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The numbers of ``dtype`` (a little-endian integer) at byte positions ``pos``."""
        size = dtype.itemsize
        if size == 1 or not (pos % size).any():
            return self.typed[size][pos // size].view(dtype)
        out = np.zeros(len(pos), dtype=np.uint64)  # unaligned: put the bytes together, little-endian
        for i in range(size):
            out |= self.u1[pos + i].astype(np.uint64) << np.uint64(8 * i)
        return out.astype(f"<u{size}").view(dtype)


class Where:
    """Which record is where, to name the first bad one."""

    def __init__(self, local: np.ndarray, chunk: np.ndarray) -> None:
        self.local, self.chunk = local, chunk

    def check(self, bad: np.ndarray, what: str) -> None:
        """RecordError naming the first record ``bad`` marks, if any."""
        if bad.any():
            self.fail(int(np.argmax(bad)), what)

    def fail(self, k: int, what: str) -> NoReturn:
        raise RecordError(f"record at byte {self.local[k]} of chunk {self.chunk[k]}: {what}")


BATCH_RECORDS = 16_384
"""Records decoded per batch: numpy's cost per call is paid per batch, not per record."""


def batches(chunks: Sequence[ChunkInfo], start: int, records: int) -> Iterator[range]:
    """Runs of consecutive chunks from ``start`` on, each of at most ``records`` records (or one chunk)."""
    while start < len(chunks):
        stop, count = start, 0
        while stop < len(chunks) and (count == 0 or count + chunks[stop].count <= records):
            count += chunks[stop].count
            stop += 1
        yield range(start, stop)
        start = stop


@dataclass
class Headers:
    """The record headers of a batch of chunks, checked: where each record is and its header."""

    data: ByteViews
    where: Where
    off: np.ndarray
    """Each record's position in the batch's buffer."""
    end: np.ndarray
    """Where its bytes end: the next record's position, or its chunk's end for a chunk's last record
    (what ``TraceReader.raw_records`` gives as a record's bytes)."""
    head: np.ndarray
    """Each record's header (``HEADER_DTYPE``)."""
    header_size: np.ndarray
    total: np.ndarray
    """Its header's size and its whole size (int64)."""


def read_headers(buffer: bytearray, spans: Sequence[ChunkSpan]) -> Headers:
    """The headers of the records of consecutive chunks, in file order, that ``TraceReader.read_chunks``
    put in ``buffer``, read in place and checked as ``rmtrace.record.decode_record`` checks them."""
    counts = np.array([len(span.offsets) for span in spans], dtype=np.int64)
    n = int(counts.sum())
    bases = np.array([span.start for span in spans], dtype=np.int64)
    lengths = np.array([span.end - span.start for span in spans], dtype=np.int64)
    data = ByteViews(np.frombuffer(buffer, dtype=np.uint8, count=len(buffer) - len(buffer) % ALIGN))
    local = np.concatenate([np.frombuffer(span.offsets, dtype=np.uint32) for span in spans]).astype(np.int64)
    chunk_of = np.repeat(np.arange(len(spans)), counts)
    off = local + bases[chunk_of]
    end = np.empty(n, dtype=np.int64)
    end[:-1] = off[1:]
    end[np.cumsum(counts)[counts > 0] - 1] = (bases + lengths)[counts > 0]
    where = Where(local, np.array([span.index for span in spans], dtype=np.uint32)[chunk_of])
    where.check((end < off) | (local % ALIGN != 0), "record offset table out of order or unaligned")
    room = end - off
    where.check(room < HEADER_DTYPE.itemsize, f"fewer bytes than a {HEADER_DTYPE.itemsize}-byte header")
    head = data.rows(off, HEADER_DTYPE)
    where.check(head["magic"] != RECORD_MAGIC, "bad magic")
    where.check(head["version"] != RECORD_VERSION, f"record version is not {RECORD_VERSION}")
    header_size, total = head["header_size"].astype(np.int64), head["total_len"].astype(np.int64)
    where.check((header_size < HEADER_DTYPE.itemsize) | (header_size % ALIGN != 0) | (total < header_size)
                | (total % ALIGN != 0) | (total > room), "bad sizes")
    return Headers(data, where, off, end, head, header_size, total)
