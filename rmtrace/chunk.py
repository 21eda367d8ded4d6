"""Chunk codec: independent zstd frames of records, each behind a small header.

A chunk is ``ChunkHeader`` (64 bytes) followed by ``comp_len`` bytes of one
zstd frame.  Decompressed, the frame is ``count`` little-endian u32 record
offsets (relative to the first record) followed by the records themselves, so
any record of a chunk is reachable without walking its predecessors.

The header carries the CRC-32 of the compressed payload and a CRC-32 of its own
first 60 bytes: a reader can skip a chunk by its header alone and checks the
payload before decompressing it (compiled construct parses only checked bytes).
"""

from __future__ import annotations

import sys
import zlib
from array import array
from dataclasses import dataclass

import zstandard
from construct import Const, Int16ul, Int32ul, Int64ul, Struct

from rmtrace.errors import CorruptTraceError
from rmtrace.flat import FlatStruct

CHUNK_MAGIC = 0x434D5452  # "RTMC"

ChunkHeader = Struct(
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
"""Chunk header, 64 bytes; header_crc covers the 60 bytes before it."""

CHUNK_HEADER = FlatStruct(ChunkHeader, "ChunkHeader")
CHUNK_HEADER_SIZE = CHUNK_HEADER.size
_CRC_AT = CHUNK_HEADER.offset("header_crc")  # header_crc covers the bytes before it
MAX_CHUNK_RAW = 1 << 30
assert array("I").itemsize == 4  # a sanity bound for corrupt headers, far above the writer's chunks


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


class ChunkEncoder:
    """Compresses one chunk's records into header + payload bytes."""

    def __init__(self, level: int = 3) -> None:
        self._zstd = zstandard.ZstdCompressor(level=level)

    def encode(self, records: list[bytes], first_seq: int, last_seq: int, t_min: int, t_max: int) -> tuple[bytes, bytes]:
        offsets = array("I")
        pos = 0
        for rec in records:
            offsets.append(pos)
            pos += len(rec)
        if sys.byteorder == "big":
            offsets.byteswap()
        raw = offsets.tobytes() + b"".join(records)
        payload = self._zstd.compress(raw)
        info = ChunkInfo(0, len(payload), len(raw), len(records), first_seq, last_seq, t_min, t_max, zlib.crc32(payload))
        return encode_chunk_header(info), payload


class ChunkDecoder:
    """Checks and decompresses one chunk's payload into (offsets, record bytes)."""

    def __init__(self) -> None:
        self._zstd = zstandard.ZstdDecompressor()

    def decode(self, info: ChunkInfo, payload: bytes) -> tuple[array, memoryview]:
        if len(payload) != info.comp_len:
            raise CorruptTraceError(f"chunk at byte {info.offset} is cut short ({len(payload)} of {info.comp_len} bytes)")
        if zlib.crc32(payload) != info.payload_crc:
            raise CorruptTraceError(f"chunk at byte {info.offset} fails its payload checksum")
        try:
            raw = self._zstd.decompress(payload, max_output_size=info.raw_len)
        except zstandard.ZstdError as exc:
            raise CorruptTraceError(f"chunk at byte {info.offset} does not decompress: {exc}") from None
        if len(raw) != info.raw_len:
            raise CorruptTraceError(f"chunk at byte {info.offset} decompresses to {len(raw)} bytes, not {info.raw_len}")
        table = 4 * info.count
        offsets = array("I")
        offsets.frombytes(raw[:table])
        if sys.byteorder == "big":
            offsets.byteswap()
        return offsets, memoryview(raw)[table:]
