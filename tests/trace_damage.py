"""Damage done to real traces, and how many records each kind must leave readable.

Shared by the fuzz tests (tests/test_trace_fuzz.py: a bounded, seeded sample in CI) and
the bench (bench/trace_fuzz.py: every bit and every cut of a capture).  The traces are the shipped H200
captures, rewritten by today's writer (the chunks a recorder now makes: zstd checksums,
16 KiB blocks, 64 KiB chunks), so the damage lands where it would in a new recording.

Each ``Case`` knows the least its damage may leave: a flipped bit costs at most the
records of the chunk it hits; a cut, at most the records from the chunk it cuts on; junk
appended and chunks swapped, nothing.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import rmtrace
from rmtrace.chunk import ChunkInfo
from rmtrace.errors import RmtraceError
from rmtrace.record import SEQ
from rmtrace.trace import TraceWriter

FUZZ_CHUNK_BYTES = 64 << 10


@dataclass(frozen=True)
class Original:
    """A trace as written: its bytes, each record's bytes by sequence number, its chunks."""

    data: bytes
    records: list[bytes]
    chunks: list[ChunkInfo]

    @property
    def total(self) -> int:
        return len(self.records)


@dataclass(frozen=True)
class Case:
    kind: str
    """flip, cut, junk or swap"""
    where: int
    data: bytes
    at_least: int
    """Records that must come back: all but those of the chunk the damage lands in."""


def rewrite(src: str | os.PathLike, dst: Path, chunk_bytes: int = FUZZ_CHUNK_BYTES) -> Original:
    """``src``'s metadata and records, written again by today's writer into ``dst``."""
    with rmtrace.open(src) as reader:
        meta, raws = reader.meta, [bytes(r) for r in reader.raw_records()]
    with TraceWriter(dst, meta, chunk_bytes=chunk_bytes) as writer:
        for raw in raws:
            writer.write_encoded(raw)
    with rmtrace.open(dst) as reader:
        assert reader.recovery.complete
        return Original(dst.read_bytes(), [bytes(r) for r in reader.raw_records()], list(reader.chunks))


def _chunk_at(original: Original, pos: int) -> ChunkInfo | None:
    return next((c for c in original.chunks if c.offset <= pos < c.end), None)


def flip(original: Original, bit: int) -> Case:
    data = bytearray(original.data)
    data[bit // 8] ^= 1 << (bit % 8)
    hit = _chunk_at(original, bit // 8)
    return Case("flip", bit, bytes(data), original.total - (hit.count if hit else 0))


def cut(original: Original, size: int) -> Case:
    whole = sum(c.count for c in original.chunks if c.end <= size)
    return Case("cut", size, original.data[:size], whole)


def junk(original: Original, blob: bytes) -> Case:
    return Case("junk", len(blob), original.data + blob, original.total)


def swap(original: Original, i: int, j: int) -> Case:
    a, b = sorted((original.chunks[i], original.chunks[j]), key=lambda c: c.offset)
    d = original.data
    return Case("swap", a.offset, d[:a.offset] + d[b.offset:b.end] + d[a.end:b.offset] + d[a.offset:a.end] + d[b.end:],
                original.total)


def sample(original: Original, flips: int, cuts: int, seed: int = 14) -> Iterator[Case]:
    """A seeded sample of every kind: random bits and cuts, some junk, every adjacent swap."""
    rng = random.Random(seed)
    bits = len(original.data) * 8
    for _ in range(flips):
        yield flip(original, rng.randrange(bits))
    for _ in range(cuts):
        yield cut(original, rng.randrange(len(original.data)))
    for blob in (b"\0" * 64, bytes(rng.randrange(256) for _ in range(3000)), original.data[-200:]):
        yield junk(original, blob)
    for i in range(len(original.chunks) - 1):
        yield swap(original, i, i + 1)


@dataclass(frozen=True)
class Outcome:
    recovered: int
    error: str | None
    wrong: int
    """Records read that differ from the ones written at their sequence number (must be 0)."""


def read_back(original: Original, path: Path) -> Outcome:
    """Open the damaged file as every command does and count what comes back, checking each record."""
    got = wrong = 0
    try:
        with rmtrace.open(path) as reader:
            for raw in reader.raw_records():
                seq = SEQ.get(raw)
                wrong += seq >= len(original.records) or bytes(raw) != original.records[seq]
                got += 1
    except RmtraceError as exc:
        return Outcome(got, str(exc), wrong)
    return Outcome(got, None, wrong)
