"""Chunk codec: independent zstd frames of records, each behind a small header.

A chunk is ``ChunkHeader`` (64 bytes) followed by ``comp_len`` bytes of one
zstd frame.  Decompressed, the frame is ``count`` little-endian u32 record
offsets (relative to the first record) followed by the records themselves, so
any record of a chunk is reachable without walking its predecessors.

The header carries the CRC-32 of the compressed payload and a CRC-32 of its own
first 60 bytes: a reader can skip a chunk by its header alone and checks the
payload before decompressing it (compiled construct parses only checked bytes).

Two choices make damage cost little (docs/trace-format.md, *Recovery*):

* The frame carries zstd's content checksum, so a chunk whose header was hit
  can still be proven intact by its payload alone (``decode_frame``).
* The encoder ends a zstd block every ``BLOCK_BYTES`` of input.  A frame cut
  short (a torn tail) still decompresses up to its last whole block, and the
  records in those bytes are exactly the ones written (``salvage``): a cut
  loses what follows it, not its whole chunk.
"""

from __future__ import annotations

import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zstandard

from rmtrace.errors import CorruptTraceError, RecordError
from rmtrace.flat import FlatStruct, lazy_mirrors
from rmtrace.record import RECORD_MAGIC, SEQ, TIME, record_length

if TYPE_CHECKING:
    from construct import Struct

CHUNK_MAGIC = 0x434D5452  # "RTMC"


def _chunk_header() -> Struct:
    """Chunk header, 64 bytes; header_crc covers the 60 bytes before it."""
    from construct import Const, Int16ul, Int32ul, Int64ul, Struct
    return Struct(
        "magic" / Const(CHUNK_MAGIC, Int32ul),
        "header_size" / Int16ul,
        "flags" / Int16ul,
        "comp_len" / Int32ul,
        "raw_len" / Int32ul,
        "count" / Int32ul,
        "reserved" / Int32ul,
        "first_seq" / Int64ul,
        "last_seq" / Int64ul,
        "t_min" / Int64ul,
        "t_max" / Int64ul,
        "payload_crc" / Int32ul,
        "header_crc" / Int32ul,
    )


CHUNK_HEADER = FlatStruct.lazy(_chunk_header, "ChunkHeader")


__getattr__ = lazy_mirrors(__name__, {"ChunkHeader": CHUNK_HEADER})

CHUNK_HEADER_SIZE = CHUNK_HEADER.size
_CRC_AT = CHUNK_HEADER.offset("header_crc")  # header_crc covers the bytes before it
MAX_CHUNK_RAW = 1 << 30
"""A sanity bound for damaged headers, far above any chunk a writer makes."""
BLOCK_BYTES = 16 << 10
"""Input bytes per zstd block: the most a cut through a chunk loses beyond the cut (about 7 % in size)."""
_RECORD_START = RECORD_MAGIC.to_bytes(4, "little")
assert array("I").itemsize == 4


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """What a chunk header says, plus where the chunk lies in its file."""

    offset: int
    comp_len: int
    raw_len: int
    count: int
    first_seq: int
    last_seq: int
    t_min: int
    t_max: int
    payload_crc: int

    @property
    def end(self) -> int:
        return self.offset + CHUNK_HEADER_SIZE + self.comp_len


_pack_header = CHUNK_HEADER.packer("header_size", "flags", "header_crc",
                                   attrs=("comp_len", "raw_len", "count", "first_seq", "last_seq", "t_min", "t_max",
                                          "payload_crc"))


def encode_chunk_header(info: ChunkInfo) -> bytes:
    body = _pack_header(info, CHUNK_HEADER_SIZE, 0, 0)
    return CHUNK_HEADER["header_crc"].replaced(body, zlib.crc32(body[:_CRC_AT]))


def decode_chunk_header(data: bytes, offset: int) -> ChunkInfo:
    """Parse and check a chunk header read from file ``offset``; CorruptTraceError if it fails."""
    if len(data) < CHUNK_HEADER_SIZE:
        raise CorruptTraceError(f"chunk header at byte {offset} is cut short ({len(data)} of {CHUNK_HEADER_SIZE} bytes)")
    h = CHUNK_HEADER.unpack(data)
    if h.magic != CHUNK_MAGIC:
        raise CorruptTraceError(f"no chunk at byte {offset} (magic {h.magic:#010x})")
    if zlib.crc32(data[:_CRC_AT]) != h.header_crc:
        raise CorruptTraceError(f"chunk header at byte {offset} fails its checksum")
    if h.header_size != CHUNK_HEADER_SIZE or h.raw_len > MAX_CHUNK_RAW or h.count * 4 > h.raw_len \
            or h.last_seq < h.first_seq:
        raise CorruptTraceError(f"chunk header at byte {offset} has impossible sizes")
    return ChunkInfo(offset, h.comp_len, h.raw_len, h.count, h.first_seq, h.last_seq, h.t_min, h.t_max, h.payload_crc)


def _check_payload(info: ChunkInfo, payload: bytes | memoryview) -> None:
    if len(payload) != info.comp_len:
        raise CorruptTraceError(f"chunk at byte {info.offset} is cut short ({len(payload)} of {info.comp_len} bytes)")
    if zlib.crc32(payload) != info.payload_crc:
        raise CorruptTraceError(f"chunk at byte {info.offset} fails its payload checksum")


def _offset_table(raw: bytes | memoryview, count: int) -> array:
    offsets = array("I")
    offsets.frombytes(raw[:4 * count])
    if sys.byteorder == "big":
        offsets.byteswap()
    return offsets


class ChunkEncoder:
    """Compresses one chunk's records into header + payload bytes."""

    def __init__(self, level: int = 3, block_bytes: int = BLOCK_BYTES) -> None:
        self._zstd = zstandard.ZstdCompressor(level=level, write_checksum=True)
        self._block = block_bytes

    def encode(self, records: list[bytes], first_seq: int, last_seq: int, t_min: int, t_max: int) -> tuple[bytes, bytes]:
        offsets = array("I")
        pos = 0
        for rec in records:
            offsets.append(pos)
            pos += len(rec)
        if sys.byteorder == "big":
            offsets.byteswap()
        raw = offsets.tobytes() + b"".join(records)
        stream = self._zstd.compressobj(size=len(raw))
        parts = []
        for start in range(0, len(raw), self._block):
            parts.append(stream.compress(raw[start:start + self._block]))
            parts.append(stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
        parts.append(stream.flush())
        payload = b"".join(parts)
        info = ChunkInfo(0, len(payload), len(raw), len(records), first_seq, last_seq, t_min, t_max, zlib.crc32(payload))
        return encode_chunk_header(info), payload


class ChunkDecoder:
    """Checks and decompresses one chunk's payload into (offsets, record bytes)."""

    def __init__(self) -> None:
        self._zstd = zstandard.ZstdDecompressor()
        self._probe = bytearray(1)

    def decode(self, info: ChunkInfo, payload: bytes | memoryview) -> tuple[array, memoryview]:
        _check_payload(info, payload)
        try:
            raw = self._zstd.decompress(payload, max_output_size=info.raw_len)
        except zstandard.ZstdError as exc:
            raise CorruptTraceError(f"chunk at byte {info.offset} does not decompress: {exc}") from None
        if len(raw) != info.raw_len:
            raise CorruptTraceError(f"chunk at byte {info.offset} decompresses to {len(raw)} bytes, not {info.raw_len}")
        return _offset_table(raw, info.count), memoryview(raw)[4 * info.count:]

    def decode_into(self, info: ChunkInfo, payload: bytes | memoryview, out: memoryview) -> array:
        """``decode`` into ``out`` (``info.raw_len`` bytes of a batch's buffer, ``TraceReader.read_chunks``):
        no bytes object per chunk and no copy of it to join a batch (zstd's streaming decoder still copies
        each block out of its window: python-zstandard has no one-shot decompress into a caller's
        buffer); returns the chunk's offsets (its records follow them)."""
        _check_payload(info, payload)
        try:
            stream = self._zstd.stream_reader(payload)
            got = 0
            while got < info.raw_len:
                n = stream.readinto(out[got:info.raw_len])
                if not n:
                    break
                got += n
            more = stream.readinto(self._probe)  # 0 at the frame's end, whose checksum it has checked then
        except zstandard.ZstdError as exc:
            raise CorruptTraceError(f"chunk at byte {info.offset} does not decompress: {exc}") from None
        if got != info.raw_len or more:
            size = f"{got}" if got < info.raw_len else f"more than {got}"
            raise CorruptTraceError(f"chunk at byte {info.offset} decompresses to {size} bytes, not {info.raw_len}")
        return _offset_table(out, info.count)

    def salvage(self, info: ChunkInfo, prefix: bytes) -> tuple[array, memoryview]:
        """The whole records in the first bytes of a chunk's payload that was cut short.

        What a cut frame decompresses to is exactly the start of what was written
        (zstd emits a block only once all of it is there), so every record that
        lies wholly inside it is the one written; each is still checked for its
        framing (magic, length) and its sequence number.
        """
        try:
            raw = self._zstd.decompressobj().decompress(prefix)
        except zstandard.ZstdError:
            raw = b""
        table = 4 * info.count
        if len(raw) < table:
            return array("I"), memoryview(b"")
        offsets = _offset_table(raw, info.count)
        records = memoryview(raw)[table:]
        kept = pos = 0
        for k, off in enumerate(offsets):
            try:
                total = record_length(records, pos)
            except RecordError:  # the cut runs through it
                break
            if off != pos or SEQ.get(records, pos) != info.first_seq + k:
                break
            pos += total
            kept = k + 1
        return offsets[:kept], records[:pos]

    def decode_frame(self, data: bytes | memoryview) -> tuple[ChunkInfo, array, memoryview, int] | None:
        """A chunk payload proven intact without its header: a whole zstd frame whose content
        checksum holds, holding an offset table and the records it indexes.  Returns the chunk
        as a header would have described it (offset 0, payload_crc of the frame), its offsets,
        its records and the frame's length; None when the bytes are not such a frame."""
        try:
            if not zstandard.get_frame_parameters(data).has_checksum:
                return None  # nothing would prove the bytes are the ones written
            stream = self._zstd.decompressobj()
            raw = stream.decompress(data)
        except zstandard.ZstdError:
            return None
        if not stream.eof:
            return None
        frame_len = len(data) - len(stream.unused_data)
        found = _split(raw)
        if found is None:
            return None
        offsets, records = found
        times = [TIME.get(records, off) for off in offsets]
        first = SEQ.get(records, offsets[0])
        if any(SEQ.get(records, off) != first + k for k, off in enumerate(offsets)):
            return None
        info = ChunkInfo(0, frame_len, len(raw), len(offsets), first, first + len(offsets) - 1, min(times), max(times),
                         zlib.crc32(data[:frame_len]))
        return info, offsets, records, frame_len


def _split(raw: bytes) -> tuple[array, memoryview] | None:
    """A decompressed payload's offset table and records, its count found from the bytes alone:
    the one count k for which the table's k offsets are exactly where walking the records finds them."""
    for count in range(1, len(raw) // 4):
        start = 4 * count
        if raw[start:start + 4] != _RECORD_START:
            continue
        offsets = _offset_table(raw, count)
        records = memoryview(raw)[start:]
        pos = 0
        try:
            for off in offsets:
                if off != pos:
                    break
                pos += record_length(records, pos)
            else:
                if pos == len(records):
                    return offsets, records
        except RecordError:
            continue
    return None
