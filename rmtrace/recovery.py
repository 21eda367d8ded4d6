"""Finding a trace's chunks, whole or damaged, and saying what was lost.

``TraceReader`` opens a file through ``find_chunks``: every chunk is checked
(its header's CRC, its payload's CRC) whether the index was found or not, and
a chunk that fails is skipped and reported, never allowed to refuse the file:

* With a valid footer and index, the index says where each chunk is and how
  many records it holds, so a damaged chunk's loss is known exactly.  An index
  that does not describe the chunks it points at (chunks moved, swapped) is
  not trusted: the file is scanned instead.
* Without one (a recorder killed, a copy cut short, a damaged footer), the
  chunks are found by walking from the front: past damage by searching for
  the next chunk header whose CRC holds.
* A chunk whose header was hit but whose payload is a whole zstd frame with a
  matching content checksum is read all the same (the frame proves itself).
* A chunk cut short by the end of the file gives the records that lie wholly
  in its first bytes (``ChunkDecoder.salvage``).

``Recovery`` is the account: what was read, each stretch lost with the
records it held (from the header or index, or from the gap in sequence
numbers), and notes on damage that cost no records (metadata, the file
header's fields).  docs/trace-format.md describes the procedure for readers
in other languages.
"""

from __future__ import annotations

import re
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from rmtrace.chunk import CHUNK_HEADER_SIZE, CHUNK_MAGIC, ChunkDecoder, ChunkInfo, decode_chunk_header
from rmtrace.errors import CorruptTraceError
from rmtrace.record import TIME

Pread = Callable[[int, int], bytes]
Held = dict[int, tuple[array, memoryview]]
"""Chunks decoded while they were found (salvaged ones), by file offset."""


@dataclass(frozen=True)
class Loss:
    """A stretch of the file that could not be read."""

    offset: int
    length: int
    reason: str
    records: int | None = None
    """Records it held, when a header, the index or the sequence numbers around it say."""
    first_seq: int | None = None
    torn: bool = False
    """The end of the file cuts it (a torn tail), rather than damage inside it."""

    def describe(self) -> str:
        what = f"{self.records:,} record{'s' if self.records != 1 else ''}" if self.records is not None \
            else "an unknown number of records"
        seqs = f", seq {self.first_seq}-{self.first_seq + self.records - 1}" \
            if self.first_seq is not None and self.records else ""
        if self.torn:
            return f"torn tail at byte {self.offset} ({self.length:,} bytes): {self.reason}; {what} lost{seqs}"
        return f"{what} lost at byte {self.offset} ({self.length:,} bytes{seqs}): {self.reason}"


@dataclass(frozen=True)
class Recovery:
    """How the reader found the file: complete, or what it read and what it lost."""

    complete: bool
    """True when footer, index and every chunk checked out: nothing was lost or repaired."""
    records: int
    chunks: int
    from_index: bool = False
    """The chunk list came from a valid index (else from scanning the file)."""
    losses: tuple[Loss, ...] = ()
    salvaged: int = 0
    """Records read from chunks that were cut short or whose header was damaged."""
    notes: tuple[str, ...] = ()
    """Damage that cost no records (metadata, file header fields), and why the index was not used."""
    reason: str = ""

    @property
    def skipped(self) -> tuple[tuple[int, int], ...]:
        """(offset, length) of the damaged stretches skipped (not the torn tail)."""
        return tuple((loss.offset, loss.length) for loss in self.losses if not loss.torn)

    @property
    def torn_offset(self) -> int | None:
        """Where a torn tail starts (None: the file ends cleanly)."""
        return next((loss.offset for loss in self.losses if loss.torn), None)

    @property
    def torn_bytes(self) -> int:
        return sum(loss.length for loss in self.losses if loss.torn)

    @property
    def lost_records(self) -> int:
        """Records known to be lost (a torn tail may have held more that nothing counts)."""
        return sum(loss.records or 0 for loss in self.losses)

    def describe(self) -> str:
        if self.complete:
            return "complete (footer and index intact)"
        head = ("footer and index intact" if self.from_index else "recovered by scanning (no valid footer and index)")
        parts = [f"{head}: {self.records:,} records in {self.chunks} chunks"]
        if self.salvaged:
            parts.append(f"{self.salvaged:,} of them salvaged from cut or damaged chunks")
        if len(self.losses) > 1:
            parts.append(f"{self.lost_records:,} records known lost in {len(self.losses)} places")
        parts += [loss.describe() for loss in self.losses]
        parts += list(self.notes)
        if self.reason and self.torn_offset is None:
            parts.append(self.reason)
        return "; ".join(parts)


@dataclass
class Found:
    """The chunks of a file, in sequence order, and what finding them cost."""

    chunks: list[ChunkInfo] = field(default_factory=list)
    held: Held = field(default_factory=dict)
    losses: list[Loss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    salvaged: int = 0
    resume: int = 0
    """Where a later scan (a file still being written) goes on: after the last whole chunk."""
    from_index: bool = False
    reason: str = ""

    def recovery(self, index_valid: bool) -> Recovery:
        complete = index_valid and not self.losses and not self.notes and not self.salvaged
        return Recovery(complete, sum(c.count for c in self.chunks), len(self.chunks), self.from_index,
                        tuple(self.losses), self.salvaged, tuple(self.notes), self.reason)


IndexRow = tuple[int, int, int, int, int, int, int]
"""(offset, first_seq, last_seq, t_min, t_max, count, comp_len) of one chunk, as the index lists it."""


class ChunkFinder:
    """Checks a file's chunks through ``pread`` (the reader's), from its index or by scanning."""

    def __init__(self, pread: Pread, size: int, data_offset: int, decoder: ChunkDecoder, index_magic: int) -> None:
        self._pread = pread
        self._size = size
        self._data_offset = data_offset
        self._decoder = decoder
        self._index_magic = index_magic.to_bytes(4, "little")

    # -- from the index

    def from_index(self, entries: list[IndexRow]) -> Found | None:
        """The index's chunks, each checked; None when the index does not describe this file."""
        found = Found(from_index=True)
        for offset, first, last, _t_min, _t_max, count, comp_len in entries:
            blob = self._pread(CHUNK_HEADER_SIZE + comp_len, offset)
            try:
                info = decode_chunk_header(blob[:CHUNK_HEADER_SIZE], offset)
            except CorruptTraceError as exc:
                if not self._take_frame(found, offset, blob[CHUNK_HEADER_SIZE:], (first, count)):
                    found.losses.append(Loss(offset, len(blob), _why(exc), count, first))
                continue
            if (info.first_seq, info.last_seq, info.count, info.comp_len) != (first, last, count, comp_len):
                return None  # chunks moved or swapped: the index is about another layout
            if zlib.crc32(blob[CHUNK_HEADER_SIZE:]) != info.payload_crc:
                found.losses.append(Loss(offset, len(blob), "the chunk's payload fails its checksum", count, first))
                continue
            found.chunks.append(info)
        found.resume = self._size
        return found

    # -- by scanning

    def scan(self, start: int | None = None) -> Found:
        """Walk the chunks from ``start`` (the first chunk) to the end of the file."""
        pos = self._data_offset if start is None else start
        found = Found(resume=pos)
        size = self._size
        while pos < size:
            if size - pos < CHUNK_HEADER_SIZE:
                found.losses.append(Loss(pos, size - pos, "the file ends inside a chunk header", torn=True))
                found.reason = "last chunk header cut short"
                break
            head = self._pread(CHUNK_HEADER_SIZE, pos)
            if head[:4] == self._index_magic and (found.chunks or found.losses):
                found.reason = "an index follows the chunks, but it or the footer is damaged or cut"
                break
            try:
                info = decode_chunk_header(head, pos)
            except CorruptTraceError as exc:
                nxt = self._past_damage(found, pos, exc)
                if nxt is None:
                    break
                pos = found.resume = nxt
                continue
            if info.end > size:
                self._salvage(found, info, self._pread(size - pos - CHUNK_HEADER_SIZE, pos + CHUNK_HEADER_SIZE))
                break
            if zlib.crc32(self._pread(info.comp_len, pos + CHUNK_HEADER_SIZE)) != info.payload_crc:
                # the header's own checksum holds, so its length is right: step over the chunk
                found.losses.append(Loss(pos, CHUNK_HEADER_SIZE + info.comp_len,
                                         "the chunk's payload fails its checksum", info.count, info.first_seq))
            else:
                found.chunks.append(info)
            pos = found.resume = info.end
        _count_gaps(found)
        return found

    def _past_damage(self, found: Found, pos: int, exc: CorruptTraceError) -> int | None:
        """Step over a stretch whose header is damaged: read its payload if it proves itself,
        else skip to the next chunk header whose checksum holds; None when there is none."""
        nxt = self.find_chunk(pos + 1)
        end = self._size if nxt is None else nxt
        payload = self._pread(max(end - pos - CHUNK_HEADER_SIZE, 0), pos + CHUNK_HEADER_SIZE)
        if self._take_frame(found, pos, payload, None):
            return nxt
        if nxt is None:
            found.losses.append(Loss(pos, self._size - pos, f"{_why(exc)}, and no chunk follows", torn=True))
            found.reason = "unreadable bytes up to the end"
            return None
        found.losses.append(Loss(pos, nxt - pos, _why(exc)))
        return nxt

    def find_chunk(self, start: int) -> int | None:
        """Offset of the next chunk header whose own checksum holds, or None."""
        needle = CHUNK_MAGIC.to_bytes(4, "little")
        pos = start
        step = 1 << 20
        while pos < self._size:
            block = self._pread(step + CHUNK_HEADER_SIZE, pos)
            i = block.find(needle)
            while i != -1:
                try:
                    decode_chunk_header(self._pread(CHUNK_HEADER_SIZE, pos + i), pos + i)
                    return pos + i
                except CorruptTraceError:
                    i = block.find(needle, i + 1)
            pos += step
        return None

    # -- reading what damage left

    def _take_frame(self, found: Found, offset: int, payload: bytes, expect: tuple[int, int] | None) -> bool:
        """A chunk whose header is damaged, read from its payload if that is a whole, checksummed
        frame (holding ``expect`` = (first_seq, count) when the index says so)."""
        got = self._decoder.decode_frame(payload)
        if got is None:
            return False
        info, offsets, records, frame_len = got
        if expect is not None and (info.first_seq, info.count) != expect:
            return False
        info = ChunkInfo(offset, frame_len, info.raw_len, info.count, info.first_seq, info.last_seq, info.t_min,
                         info.t_max, info.payload_crc)
        found.chunks.append(info)
        found.held[offset] = (offsets, records)
        found.salvaged += info.count
        found.notes.append(f"the header of the chunk at byte {offset} is damaged; its payload proved intact by its "
                           f"zstd checksum ({info.count:,} records read)")
        return True

    def _salvage(self, found: Found, info: ChunkInfo, prefix: bytes) -> None:
        """The last chunk, cut by the end of the file: keep the records wholly before the cut."""
        offsets, records = self._decoder.salvage(info, prefix)
        kept = len(offsets)
        lost = info.count - kept
        if kept:
            times = [TIME.get(records, off) for off in offsets]
            part = ChunkInfo(info.offset, len(prefix), 4 * info.count + len(records), kept, info.first_seq,
                             info.first_seq + kept - 1, min(times), max(times), 0)
            found.chunks.append(part)
            found.held[info.offset] = (offsets, records)
            found.salvaged += kept
        found.losses.append(Loss(info.offset, CHUNK_HEADER_SIZE + len(prefix),
                                 f"the file ends inside this chunk ({len(prefix):,} of its {info.comp_len:,} bytes; "
                                 f"{kept:,} of its {info.count:,} records read)", lost, info.first_seq + kept, torn=True))
        found.reason = "last chunk cut short"


def _why(exc: CorruptTraceError) -> str:
    """A chunk error's reason without its 'at byte N' (a Loss says where)."""
    return re.sub(r" at byte \d+", "", str(exc))


def _count_gaps(found: Found) -> None:
    """Put the chunks in sequence order (a file may hold them out of order), drop repeats, and
    give each loss of unknown size the records missing from the sequence where it lies."""
    by_offset = sorted(found.chunks, key=lambda c: c.offset)
    ordered = sorted(by_offset, key=lambda c: c.first_seq)
    if [c.offset for c in ordered] != [c.offset for c in by_offset]:
        found.notes.append("chunks lie out of sequence order in the file: read in sequence order")
    kept: list[ChunkInfo] = []
    for c in ordered:
        if kept and c.first_seq <= kept[-1].last_seq:
            found.notes.append(f"the chunk at byte {c.offset} repeats records {c.first_seq}-{c.last_seq}: skipped")
            found.held.pop(c.offset, None)
            continue
        kept.append(c)
    found.chunks = kept
    known = sorted([(c.offset, c.first_seq, c.last_seq) for c in kept]
                   + [(loss.offset, loss.first_seq, loss.first_seq + loss.records - 1)
                      for loss in found.losses if loss.records and loss.first_seq is not None])
    out = []
    for loss in found.losses:
        if loss.records is not None or loss.torn:
            out.append(loss)
            continue
        before = [k for k in known if k[0] < loss.offset]
        after = [k for k in known if k[0] > loss.offset]
        first = before[-1][2] + 1 if before else 0
        if after and after[0][1] >= first:
            out.append(Loss(loss.offset, loss.length, loss.reason, after[0][1] - first, first, loss.torn))
        else:
            out.append(loss)
    found.losses = out
