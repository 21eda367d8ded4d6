"""The trace file: header, chunks, index, footer; ``TraceWriter`` and ``TraceReader``.

Layout (docs/trace-format.md has the byte-level description)::

    FileHeader (32 bytes) | metadata JSON, zero padded to 8 |
    chunk* (ChunkHeader + zstd frame, see rmtrace.chunk) |
    IndexHeader + IndexEntry* | Footer (32 bytes, at the very end)

The writer streams: a chunk is compressed (on a worker thread, as rr's
CompressedWriter does) and appended as soon as it fills, so memory stays
bounded and a recorder killed mid-write leaves every finished chunk readable.
The reader uses the index when the footer checks out; otherwise it scans the
chunks from the front, resynchronising past damage, and stops at a torn tail,
saying what it recovered.  Reads use ``os.pread`` so cursors share one fd.
"""

from __future__ import annotations

import bisect
import json
import os
import queue
import stat
import threading
import time
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmtrace.chunk import CHUNK_HEADER_SIZE, ChunkDecoder, ChunkEncoder, ChunkInfo, decode_chunk_header
from rmtrace.errors import CorruptTraceError, NotATraceError, RmtraceError, TraceError, TraceVersionError
from rmtrace.flat import FlatStruct, lazy_mirrors
from rmtrace.record import (
    ALIGN,
    HEADER,
    TIME,
    H,
    Record,
    decode_record,
    encode_record,
    restamp,
)

FILE_MAGIC = int.from_bytes(b"RMTRACE\0", "little")
FORMAT_VERSION = 1
INDEX_MAGIC = 0x49544D52  # "RMTI"
FOOTER_MAGIC = 0x46544D52  # "RMTF"

if TYPE_CHECKING:
    from construct import Struct

    from rmtrace.recovery import ChunkFinder, Found, Held, IndexRow, Recovery  # noqa: F401  (__getattr__ below)

    FileHeader: Struct  # the construct mirrors, made on first use: __getattr__ below
    IndexHeader: Struct
    IndexEntry: Struct
    Footer: Struct


def _file_header() -> Struct:
    """File header, 32 bytes, then ``meta_len`` bytes of UTF-8 JSON padded to 8."""
    from construct import Const, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(FILE_MAGIC, Int64ul),
        "format_version" / Int16ul,
        "header_size" / Int16ul,
        "meta_len" / Int32ul,
        "meta_crc" / Int32ul,
        "flags" / Int32ul,
        "reserved" / Int64ul,
    )


def _index_header() -> Struct:
    """Index header, 16 bytes, followed by ``count`` IndexEntry."""
    from construct import Const, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(INDEX_MAGIC, Int32ul),
        "entry_size" / Int32ul,
        "count" / Int64ul,
    )


def _index_entry() -> Struct:
    """One chunk in the index, 48 bytes."""
    from construct import Int32ul, Int64ul, Struct
    return Struct(
        "offset" / Int64ul,
        "first_seq" / Int64ul,
        "last_seq" / Int64ul,
        "t_min" / Int64ul,
        "t_max" / Int64ul,
        "count" / Int32ul,
        "comp_len" / Int32ul,
    )


def _footer() -> Struct:
    """Footer, the last 32 bytes of a finished trace; footer_crc covers its first 28 bytes."""
    from construct import Const, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(FOOTER_MAGIC, Int32ul),
        "version" / Int32ul,
        "index_offset" / Int64ul,
        "record_count" / Int64ul,
        "index_crc" / Int32ul,
        "footer_crc" / Int32ul,
    )


FILE_HEADER = FlatStruct.lazy(_file_header, "FileHeader")
INDEX_HEADER = FlatStruct.lazy(_index_header, "IndexHeader")
INDEX_ENTRY = FlatStruct.lazy(_index_entry, "IndexEntry")
FOOTER = FlatStruct.lazy(_footer, "Footer")
_MIRRORS = {"FileHeader": FILE_HEADER, "IndexHeader": INDEX_HEADER, "IndexEntry": INDEX_ENTRY, "Footer": FOOTER}
"""The construct mirrors, made on first use: writing a trace (``rmtrace record``) needs only the FlatStructs."""
_mirror = lazy_mirrors(__name__, _MIRRORS)


_FROM_RECOVERY = frozenset({"ChunkFinder", "Found", "Held", "IndexRow", "Recovery"})
"""rmtrace.recovery's names, as this module has always offered them: the reader's alone, imported on
first use, since its import (three dataclasses) is a few ms of every ``rmtrace record``'s start."""


def __getattr__(name: str) -> Any:
    """The construct mirrors, and rmtrace.recovery's names (_FROM_RECOVERY)."""
    if name in _FROM_RECOVERY:
        import rmtrace.recovery as recovery
        return getattr(recovery, name)
    return _mirror(name)


_FOOTER_CRC_AT = FOOTER.offset("footer_crc")  # footer_crc covers the bytes before it
_ENTRY_COUNT = INDEX_ENTRY.index.count
_entry = INDEX_ENTRY.getter("offset", "first_seq", "last_seq", "t_min", "t_max", "count", "comp_len")
"""An index entry's tuple in the order rmtrace.recovery.IndexRow names its fields."""
MAX_META = 16 << 20

DEFAULT_CHUNK_BYTES = 512 << 10


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def encode_file_header(meta: dict[str, Any]) -> bytes:
    blob = json.dumps(meta, sort_keys=True, default=str).encode()
    head = FILE_HEADER.pack(format_version=FORMAT_VERSION, header_size=FILE_HEADER.size, meta_len=len(blob),
                            meta_crc=zlib.crc32(blob), flags=0)
    return head + blob + b"\0" * (_pad8(len(blob)) - len(blob))


# --------------------------------------------------------------------------- writing


class TraceWriter:
    """Streams records into a trace file with bounded memory.

    ``write`` assigns sequence numbers 0, 1, 2, ... in call order: a record's
    sequence number is its position in the file.  Records should arrive in
    time order (the recorder merges by time); the index keeps each chunk's
    time range either way.
    """

    def __init__(self, path: str | os.PathLike, meta: dict[str, Any] | None = None, *,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, level: int = 3, threaded: bool = True,
                 durable: bool = False) -> None:
        """``durable``: each chunk is on the disk (fdatasync) once written, so a machine that
        is reset, not only a writer that is killed, keeps every chunk finished before it."""
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pos = 0
        self._durable = durable
        self._append(encode_file_header(dict(meta or {})))
        self._chunk_bytes = chunk_bytes
        self._encoder = ChunkEncoder(level)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_since = 0.0
        self._first_seq = 0
        self._t_min = self._t_max = 0
        self.next_seq = 0
        self._index: list[bytes] = []
        """IndexEntry bytes, one per chunk written."""
        self._error: BaseException | None = None
        self._closed = False
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=8)  # bounded: a slow disk holds the caller back, not memory
            self._worker = threading.Thread(target=self._drain, name="rmtrace-compress", daemon=True)
            self._worker.start()

    # -- public

    def write(self, record: Record) -> int:
        """Append a record; returns the sequence number it was given."""
        return self.write_encoded(encode_record(record))

    def write_encoded(self, data: bytes) -> int:
        """Append a record already in the record format (its seq is restamped)."""
        seq = self.next_seq
        self.next_seq += 1
        data = restamp(data, seq)
        t = TIME.get(data)
        if not self._pending:
            self._first_seq = seq
            self._t_min = self._t_max = t
            self._pending_since = time.monotonic()
        elif t < self._t_min:
            self._t_min = t
        elif t > self._t_max:
            self._t_max = t
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= self._chunk_bytes:
            self.flush()
        return seq

    def flush(self) -> None:
        """Finish the current chunk now (a recorder calls this so a live reader sees it)."""
        self._raise_worker_error()
        if not self._pending:
            return
        job = (self._pending, self._first_seq, self.next_seq - 1, self._t_min, self._t_max)
        self._pending, self._pending_bytes = [], 0
        if self._queue is None:
            self._write_chunk(*job)
        else:
            self._queue.put(job)

    def pending_age(self) -> float:
        """Seconds since the oldest record not yet in a finished chunk was written (0 when none is)."""
        return time.monotonic() - self._pending_since if self._pending else 0.0

    def sync(self) -> None:
        """Wait until every finished chunk is in the file (for live readers)."""
        self.flush()
        if self._queue is not None:
            self._queue.join()
        self._raise_worker_error()

    def close(self) -> None:
        """Write the last chunk, the index and the footer."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
            self._stop_worker()
            self._raise_worker_error()
            self._write_index()
            if self._durable:
                os.fsync(self._fd)
        finally:
            os.close(self._fd)

    def abandon(self) -> None:
        """Stop without index or footer (what a crash leaves; used by tests)."""
        self._closed = True
        self._stop_worker()
        os.close(self._fd)

    def _stop_worker(self) -> None:
        if self._queue is not None and self._worker is not None:
            self._queue.put(None)
            self._worker.join()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals

    def _append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self._pos += len(data)

    def _write_chunk(self, records: list[bytes], first: int, last: int, t_min: int, t_max: int) -> None:
        header, payload = self._encoder.encode(records, first, last, t_min, t_max)
        self._index.append(INDEX_ENTRY.pack(offset=self._pos, first_seq=first, last_seq=last, t_min=t_min, t_max=t_max,
                                            count=len(records), comp_len=len(payload)))
        self._append(header + payload)
        if self._durable:
            os.fdatasync(self._fd)

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                if self._error is None:
                    self._write_chunk(*job)
            except BaseException as exc:  # surfaced to the caller by _raise_worker_error
                self._error = exc
            finally:
                self._queue.task_done()

    def _raise_worker_error(self) -> None:
        if self._error is not None:
            raise TraceError(f"writing {self.path} failed: {self._error}") from self._error

    def _write_index(self) -> None:
        index_offset = self._pos
        body = INDEX_HEADER.pack(entry_size=INDEX_ENTRY.size, count=len(self._index)) + b"".join(self._index)
        footer = FOOTER.pack(version=FORMAT_VERSION, index_offset=index_offset, record_count=self.next_seq,
                             index_crc=zlib.crc32(body), footer_crc=0)
        footer = FOOTER["footer_crc"].replaced(footer, zlib.crc32(footer[:_FOOTER_CRC_AT]))
        self._append(body + footer)


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RecordFilter:
    """Which records an iteration yields; None means any."""

    source: frozenset[int] | None = None
    phase: frozenset[int] | None = None
    pid: frozenset[int] | None = None
    op: frozenset[int] | None = None
    t0: int | None = None
    t1: int | None = None
    predicate: Callable[[Record], bool] | None = field(default=None, compare=False)

    def header_matches(self, h: tuple) -> bool:
        """Whether a raw header tuple (``rmtrace.record.HEADER``, indexed by ``H``) passes."""
        return ((self.source is None or h[_SOURCE] in self.source)
                and (self.phase is None or h[_PHASE] in self.phase)
                and (self.pid is None or h[_PID] in self.pid)
                and (self.op is None or h[_OP] in self.op)
                and (self.t0 is None or h[_TIME] >= self.t0)
                and (self.t1 is None or h[_TIME] <= self.t1))


_SOURCE, _PHASE, _PID, _OP, _TIME = H.source, H.phase, H.pid, H.op, H.time_ns


def _as_set(value: Any) -> frozenset[int] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return frozenset((int(value),))
    return frozenset(int(v) for v in value)


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """Where one chunk of a batch lies in the buffer ``TraceReader.read_chunks`` filled: its records
    are bytes [start, end), at ``offsets`` from ``start``."""

    index: int
    offsets: array
    start: int
    end: int


class TraceReader:
    """Reads a trace: metadata, chunk index, records by iteration, sequence or time.

    Opening checks every chunk (rmtrace.recovery): a damaged one is skipped and
    reported in ``recovery``, with or without a valid footer, and every intact
    record is read.
    """

    def __init__(self, path: str | os.PathLike, *, cache_chunks: int = 8) -> None:
        self.path = os.fspath(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise TraceError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise TraceError(f"{self.path}: is a directory, not a trace") from None
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot open: {exc.strerror}") from None
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            self.close()
            raise TraceError(f"{self.path}: is not a regular file (a directory?), not a trace")
        try:
            self._decoder = ChunkDecoder()
            self._cache: OrderedDict[int, tuple] = OrderedDict()
            self._cache_size = cache_chunks
            self._size = os.fstat(self._fd).st_size
            self.meta, self.data_offset, notes = self._read_header()
            self._found = self._find(notes)
            self._index_chunks()
        except BaseException:
            self.close()
            raise

    # -- opening

    def _pread(self, n: int, offset: int) -> bytes:
        return os.pread(self._fd, n, offset)

    def _read_header(self) -> tuple[dict[str, Any], int, list[str]]:
        """(metadata, where the chunks start, notes on damage that cost nothing).

        The file header has no checksum of its own, so a field that is wrong is told
        from a foreign or newer file by the other checks agreeing: a header size of
        32, metadata whose CRC holds, a version-1 chunk where the chunks start."""
        head = self._pread(FILE_HEADER.size, 0)
        if not head:
            raise NotATraceError(f"{self.path}: an empty file")
        if len(head) < FILE_HEADER.size:
            if head[:8] != FILE_MAGIC.to_bytes(8, "little")[:len(head)]:
                raise NotATraceError(f"{self.path}: not an rmtrace trace (no RMTRACE magic)")
            raise TraceError(f"{self.path}: truncated inside the file header ({len(head)} bytes)")
        fh = FILE_HEADER.unpack(head)
        notes = []
        if fh.magic != FILE_MAGIC and (fh.format_version, fh.header_size) != (FORMAT_VERSION, FILE_HEADER.size):
            raise NotATraceError(f"{self.path}: not an rmtrace trace (no RMTRACE magic)")
        meta, data_offset, meta_note = self._read_metadata(fh)
        if meta_note:
            notes.append(meta_note)
        looks_whole = fh.header_size == FILE_HEADER.size and meta_note is None
        first_chunk = self._chunk_at(data_offset) is not None or data_offset >= self._size
        if fh.magic != FILE_MAGIC:
            if not (looks_whole and fh.format_version == FORMAT_VERSION and first_chunk):
                raise NotATraceError(f"{self.path}: not an rmtrace trace (no RMTRACE magic)")
            notes.append(f"the file's magic is damaged ({fh.magic.to_bytes(8, 'little')!r}); the rest is a trace")
        if fh.format_version != FORMAT_VERSION:
            # a newer format changes the header size (docs/trace-format.md, Evolution): this is damage
            if not (fh.header_size == FILE_HEADER.size and first_chunk and self._size > data_offset):
                raise TraceVersionError(f"{self.path}: trace format version {fh.format_version}; "
                                        f"this rmtrace reads version {FORMAT_VERSION}")
            notes.append(f"the format version field reads {fh.format_version}: damaged (header size and chunks are "
                         f"version {FORMAT_VERSION}'s)")
        if fh.header_size != FILE_HEADER.size:
            notes.append(f"the header size field reads {fh.header_size}: damaged (version {FORMAT_VERSION} has "
                         f"{FILE_HEADER.size})")
        return meta, data_offset, notes

    def _chunk_at(self, offset: int) -> ChunkInfo | None:
        try:
            return decode_chunk_header(self._pread(CHUNK_HEADER_SIZE, offset), offset)
        except CorruptTraceError:
            return None

    def _read_metadata(self, fh: Any) -> tuple[dict[str, Any], int, str | None]:
        """(metadata, data offset, what is wrong with them or None)."""
        start = FILE_HEADER.size
        meta_len = fh.meta_len
        end = start + _pad8(meta_len)
        if meta_len > MAX_META or start + meta_len > self._size or (end < self._size and self._chunk_at(end) is None):
            # the length is damaged, or the first chunk is, or the file is cut: the chunks start at
            # the first chunk header whose checksum holds, if there is one
            from rmtrace.recovery import ChunkFinder  # the reader's alone: _FROM_RECOVERY

            found = ChunkFinder(self._pread, self._size, start, self._decoder, INDEX_MAGIC).find_chunk(start)
            if found is not None and found - start <= MAX_META + 7:
                end = found
                meta_len = len(self._pread(found - start, start).rstrip(b"\0"))
            elif meta_len > MAX_META:
                raise CorruptTraceError(f"{self.path}: file header is damaged (metadata of {meta_len} bytes)")
            elif start + meta_len > self._size:
                raise TraceError(f"{self.path}: truncated inside the metadata "
                                 f"({max(self._size - start, 0)} of {meta_len} bytes)")
        blob = self._pread(meta_len, start)
        whole = zlib.crc32(blob) == fh.meta_crc
        try:
            meta = json.loads(blob)
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            return {}, end, "the metadata is damaged and unreadable (no host, driver or command known)"
        if not whole:
            return meta, end, "the metadata (or its checksum) is damaged: it is shown as read"
        if meta_len != fh.meta_len:
            return meta, end, f"the metadata length field is damaged (reads {fh.meta_len}, the metadata is {meta_len})"
        return meta, end, None

    def _read_index(self) -> tuple[list[IndexRow] | None, str]:
        """The index's entries when footer and index check out, else (None, why not)."""
        size = self._size
        if size < self.data_offset + FOOTER.size:
            return None, "no footer"
        raw = self._pread(FOOTER.size, size - FOOTER.size)
        footer = FOOTER.unpack(raw)
        index_offset, record_count = footer.index_offset, footer.record_count
        if footer.magic != FOOTER_MAGIC or zlib.crc32(raw[:_FOOTER_CRC_AT]) != footer.footer_crc:
            return None, "no valid footer"
        if not self.data_offset <= index_offset <= size - FOOTER.size - INDEX_HEADER.size:
            return None, "the footer points outside the file"
        body = self._pread(size - FOOTER.size - index_offset, index_offset)
        if zlib.crc32(body) != footer.index_crc:
            return None, "the index fails its checksum"
        ih = INDEX_HEADER.unpack(body)
        if ih.magic != INDEX_MAGIC or ih.entry_size != INDEX_ENTRY.size \
                or len(body) != INDEX_HEADER.size + ih.count * ih.entry_size:
            return None, "the index is malformed"
        entries = [INDEX_ENTRY.codec.unpack_from(body, INDEX_HEADER.size + i * ih.entry_size)
                   for i in range(ih.count)]
        if sum(e[_ENTRY_COUNT] for e in entries) != record_count:
            return None, "the index's counts do not add up to the footer's"
        return [_entry(e) for e in entries], ""

    def _find(self, notes: list[str]) -> Found:
        from rmtrace.recovery import ChunkFinder

        finder = ChunkFinder(self._pread, self._size, self.data_offset, self._decoder, INDEX_MAGIC)
        entries, _why_not = self._read_index()
        found = finder.from_index(entries) if entries is not None else None
        if entries is not None and found is None:
            notes.append("the index does not match the chunks (moved or swapped): the file was scanned")
        if found is None:
            found = finder.scan()
        found.notes[:0] = notes
        self.chunks: list[ChunkInfo] = found.chunks
        self._held: Held = found.held
        self.recovery = found.recovery(index_valid=entries is not None)
        return found

    # -- chunks

    def _chunk(self, index: int) -> tuple:
        """(offsets, records view) of chunk ``index``, through a small LRU cache."""
        entry = self.chunks[index]
        held = self._held.get(entry.offset)
        if held is not None:
            return held
        hit = self._cache.get(index)
        if hit is not None:
            self._cache.move_to_end(index)
            return hit
        info, payload = self._payload(entry)
        try:
            decoded = self._decoder.decode(info, payload)
        except CorruptTraceError as exc:
            raise CorruptTraceError(f"{self.path}: {exc}") from None
        self._cache[index] = decoded
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return decoded

    def _payload(self, entry: ChunkInfo) -> tuple[ChunkInfo, memoryview]:
        """A chunk's header, checked against what opening found, and its payload (not yet checked)."""
        blob = memoryview(self._pread(CHUNK_HEADER_SIZE + entry.comp_len, entry.offset))
        try:
            info = decode_chunk_header(bytes(blob[:CHUNK_HEADER_SIZE]), entry.offset)
            if (info.first_seq, info.count, info.comp_len) != (entry.first_seq, entry.count, entry.comp_len):
                raise CorruptTraceError(f"chunk at byte {entry.offset} changed since the file was opened")
        except CorruptTraceError as exc:
            raise CorruptTraceError(f"{self.path}: {exc}") from None
        return info, blob[CHUNK_HEADER_SIZE:]

    def _raw_len(self, entry: ChunkInfo) -> int:
        """The bytes chunk ``entry`` decompresses to (a salvaged one: what was kept of it)."""
        held = self._held.get(entry.offset)
        return entry.raw_len if held is None else 4 * len(held[0]) + len(held[1])

    def read_chunks(self, indices: Sequence[int], room: bytearray | None = None) -> tuple[bytearray, list[ChunkSpan]]:
        """Chunks ``indices``, checked and decompressed back to back into one buffer, for column readers
        that take numpy views of a batch of chunks at once: ``room`` when it is large enough (a caller
        reading batch after batch hands the last one back, so its pages stay mapped and the batch's
        memory is one buffer), else a new one.  Each chunk's records start at a multiple of ``ALIGN``.  The chunk
        cache is left alone: these chunks are read once."""
        need = sum(self._raw_len(self.chunks[i]) + ALIGN for i in indices)
        buffer = room if room is not None and len(room) >= need else bytearray(need)
        out = memoryview(buffer)
        spans = []
        end = 0
        for i in indices:
            entry = self.chunks[i]
            held = self._held.get(entry.offset)
            table = 4 * (entry.count if held is None else len(held[0]))
            at = end + (-(end + table)) % ALIGN  # the offsets, then the records 8-aligned
            if held is not None:  # salvaged when the file was opened: already in memory
                offsets, view = held
                start, end = at + table, at + table + len(view)
                out[start:end] = view
            else:
                info, payload = self._payload(entry)
                try:
                    offsets = self._decoder.decode_into(info, payload, out[at:at + entry.raw_len])
                except CorruptTraceError as exc:
                    raise CorruptTraceError(f"{self.path}: {exc}") from None
                start, end = at + table, at + entry.raw_len
            spans.append(ChunkSpan(i, offsets, start, end))
        return buffer, spans

    def refresh(self) -> int:
        """Pick up what was appended since opening (a trace still being recorded): the chunks that
        are new or grew (a chunk cut short at the last look may be whole now); 0 when nothing is."""
        if self.recovery.complete:
            return 0
        size = os.fstat(self._fd).st_size
        if size == self._size:
            return 0
        self._size = size
        from rmtrace.recovery import ChunkFinder, Found

        old = self._found
        new = ChunkFinder(self._pread, size, self.data_offset, self._decoder, INDEX_MAGIC).scan(old.resume)
        kept = [c for c in old.chunks if c.offset < old.resume]
        changed = len(new.chunks)
        for c in old.chunks:
            if c.offset >= old.resume:
                self._held.pop(c.offset, None)
        self._cache.clear()
        self._held.update(new.held)
        merged = Found(kept + new.chunks, self._held, [x for x in old.losses if x.offset < old.resume] + new.losses,
                       old.notes + [n for n in new.notes if n not in old.notes], old.salvaged + new.salvaged,
                       new.resume, old.from_index, new.reason or "still being written")
        self._found = merged
        self.chunks = merged.chunks
        self.recovery = merged.recovery(index_valid=False)
        self._index_chunks()
        return changed

    # -- queries

    @property
    def record_count(self) -> int:
        return sum(c.count for c in self.chunks)

    @property
    def time_span(self) -> tuple[int, int] | None:
        if not self.chunks:
            return None
        return min(c.t_min for c in self.chunks), max(c.t_max for c in self.chunks)

    def fileno(self) -> int:
        """The open file's descriptor (to ask what file this reader reads, as fstat says)."""
        return self._fd

    def chunk_records(self, index: int) -> tuple[array, memoryview]:
        """Chunk ``index``, checked and decompressed: its record offsets and its record bytes (for column readers)."""
        return self._chunk(index)

    def raw_records(self, start_chunk: int = 0, start_index: int = 0) -> Iterator[memoryview]:
        """Record bytes in file order, without decoding."""
        for ci in range(start_chunk, len(self.chunks)):
            offsets, view = self._chunk(ci)
            n = len(offsets)
            for k in range(start_index if ci == start_chunk else 0, n):
                start = offsets[k]
                end = offsets[k + 1] if k + 1 < n else len(view)
                yield view[start:end]

    def records(self, *, source: Any = None, phase: Any = None, pid: Any = None, op: Any = None,
                t0: int | None = None, t1: int | None = None, start_seq: int | None = None,
                predicate: Callable[[Record], bool] | None = None) -> Iterator[Record]:
        """Records in file order, filtered on header fields first (cheap), then ``predicate``."""
        flt = RecordFilter(_as_set(source), _as_set(phase), _as_set(pid), _as_set(op), t0, t1, predicate)
        return self.iter_filtered(flt, start_seq)

    def iter_filtered(self, flt: RecordFilter, start_seq: int | None = None) -> Iterator[Record]:
        ci, k = (0, 0) if start_seq is None else self._locate_seq(start_seq)
        if flt.t0 is not None and start_seq is None:
            ci, k = self._locate_time(flt.t0)
        unpack = HEADER.unpack_from
        stop_after = flt.t1 if flt.t1 is not None and self._time_ordered else None
        for raw in self.raw_records(ci, k):
            h = unpack(raw)
            if stop_after is not None and h[_TIME] > stop_after:
                return
            if not flt.header_matches(h):
                continue
            rec = decode_record(raw)
            if flt.predicate is None or flt.predicate(rec):
                yield rec

    def __iter__(self) -> Iterator[Record]:
        for raw in self.raw_records():
            yield decode_record(raw)

    def __len__(self) -> int:
        return self.record_count

    def _index_chunks(self) -> None:
        """What seeks bisect on, computed once per change of the chunk list (not per lookup)."""
        self._first_seqs = [c.first_seq for c in self.chunks]
        self._t_maxes = [c.t_max for c in self.chunks]
        self._time_ordered = all(a.t_max <= b.t_min for a, b in zip(self.chunks, self.chunks[1:]))

    def _locate_seq(self, seq: int) -> tuple[int, int]:
        ci = bisect.bisect_right(self._first_seqs, seq) - 1
        if ci < 0 or seq > self.chunks[ci].last_seq:
            raise IndexError(f"sequence {seq} is not in this trace (0..{self.record_count - 1})")
        return ci, seq - self.chunks[ci].first_seq

    def _locate_time(self, t: int) -> tuple[int, int]:
        """First record with time >= t (the end when none)."""
        ci = bisect.bisect_left(self._t_maxes, t) if self._time_ordered else next(
            (i for i, c in enumerate(self.chunks) if c.t_max >= t), len(self.chunks))
        if ci >= len(self.chunks):
            return len(self.chunks), 0
        offsets, view = self._chunk(ci)
        for k, off in enumerate(offsets):
            if TIME.get(view, off) >= t:
                return ci, k
        return ci + 1, 0

    def record_at(self, seq: int) -> Record:
        """The record with sequence number ``seq`` (its position in the file)."""
        ci, k = self._locate_seq(seq)
        offsets, view = self._chunk(ci)
        return decode_record(view, offsets[k])

    def seek_seq(self, seq: int) -> Cursor:
        return Cursor(self, *self._locate_seq(seq))

    def seek_time(self, t_ns: int) -> Cursor:
        return Cursor(self, *self._locate_time(t_ns))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Cursor:
    """A position in a trace with its own state; many cursors share one reader (rr style)."""

    def __init__(self, reader: TraceReader, chunk: int, index: int) -> None:
        self._reader = reader
        self._chunk = chunk
        self._index = index

    @property
    def seq(self) -> int | None:
        """Sequence number of the record under the cursor, None at the end."""
        if self._chunk >= len(self._reader.chunks):
            return None
        return self._reader.chunks[self._chunk].first_seq + self._index

    def peek(self) -> Record | None:
        """The record under the cursor without moving."""
        if self.seq is None:
            return None
        offsets, view = self._reader._chunk(self._chunk)
        return decode_record(view, offsets[self._index])

    def next(self) -> Record | None:
        """The record under the cursor, then move on."""
        rec = self.peek()
        if rec is not None:
            self._index += 1
            if self._index >= self._reader.chunks[self._chunk].count:
                self._chunk, self._index = self._chunk + 1, 0
        return rec

    def __iter__(self) -> Iterator[Record]:
        while (rec := self.next()) is not None:
            yield rec


def is_finished(path: str | os.PathLike) -> bool:
    """Whether the file ends in a footer that checks out: a writer closed it (cheap: its last 32 bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < FOOTER.size:
                return False
            f.seek(-FOOTER.size, os.SEEK_END)
            raw = f.read(FOOTER.size)
    except OSError:
        return False
    return FOOTER.unpack(raw)[0] == FOOTER_MAGIC and zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little")


def open_trace(path: str | os.PathLike) -> TraceReader:
    """Open a trace for reading (``rmtrace.open``)."""
    return TraceReader(path)



__all__ = [
    "TraceWriter", "TraceReader", "Cursor", "Recovery", "RecordFilter", "open_trace",
    "FileHeader", "IndexHeader", "IndexEntry", "Footer", "FORMAT_VERSION", "RmtraceError",
]
