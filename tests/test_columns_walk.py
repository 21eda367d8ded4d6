"""The C buffer walk, header and member reads (kmod_shim/scan_walk.c) against the construct mirror's decode.

For every record of every committed capture and replay, its header as read
in C (``rmt_scan_rows``) must be the one ``rmtrace.record.decode_record``
decodes, the bytes of its buffers and where its first ARG buffer before the
call, after it, and its first PATH buffer lie what that decode finds, and the
argument members read in C (``rmt_scan_members``) what the decode's argument
bytes hold at the plan's offsets; a damaged record must stop the call
table with the RecordError text the column reader has always given (the
record's byte and chunk, and what is wrong).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import rmtrace.kmod_shim
from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.kmod_shim.shim_build import SCAN_LIBRARY, SCAN_SOURCES, build

from rmtrace.columns.argspec import MAX_HANDLES, Plan, Scalar
from rmtrace.columns.batch import BATCH_RECORDS, batches, read_headers
from rmtrace.columns.dtypes import HEADER_DTYPE
from rmtrace.columns.native import load
from rmtrace.columns.scan import ABSENT, SIDES, ArgRegistry, Records, scan_chunks, walk_buffers
from rmtrace.columns.table import CallTableBuilder
from rmtrace.errors import RecordError, RmtraceError
from rmtrace.record import (
    BUFFER_HEADER_SIZE,
    BUFFER_LEN,
    RECORD,
    Buffer,
    Phase,
    Record,
    Role,
    Source,
    When,
    _pad,
    decode_record,
)
from rmtrace.session.planned import client_ids
from rmtrace.trace import TraceReader, TraceWriter
from tests.test_columns import _calls

REPO = Path(__file__).resolve().parent.parent
TRACES = sorted((REPO / "captures").glob("*.trace")) + sorted((REPO / "captures" / "replays").glob("*.trace"))
KINDS = {"b": (Role.ARG, When.BEFORE), "a": (Role.ARG, When.AFTER), "path": (Role.PATH, None)}


def expected(data: memoryview, off: int) -> tuple[int, dict[str, tuple[int, int, int]]]:
    """What the construct mirror's decode says of the record at ``off``: its buffers' bytes, and per kind
    its first buffer's data start in ``data`` (-1: none), length and flags."""
    rec = decode_record(data, off)
    pos = off + RECORD["header_size"].get(data, off)
    found: dict[str, tuple[int, int, int]] = {}
    for buf in rec.buffers:
        start = pos + BUFFER_HEADER_SIZE
        for kind, (role, when) in KINDS.items():
            if kind not in found and buf.role == role and (when is None or buf.when == when):
                found[kind] = (start, len(buf.data), buf.flags)
        pos = start + _pad(len(buf.data))
    return sum(len(b.data) for b in rec.buffers), {kind: found.get(kind, (-1, 0, 0)) for kind in KINDS}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_walk_is_the_mirror_decode(path: Path) -> None:
    with TraceReader(path) as reader:
        room = None
        records = 0
        for indices in batches(reader.chunks, 0, BATCH_RECORDS):
            room, spans = reader.read_chunks(indices, room)
            headers = read_headers(room, spans)
            out: dict[str, np.ndarray] = {}
            found = walk_buffers(headers.data, headers.where, headers.off + headers.header_size,
                                 headers.off + headers.total, headers.head["nbufs"].astype(np.int64), out)
            data = memoryview(room)
            for k, off in enumerate(headers.off.tolist()):
                rec = decode_record(data[:headers.end[k]], off)
                head = headers.head[k]
                assert {name: int(head[name]) for name in HEADER_DTYPE.names} == RECORD.unpack(data, off)._asdict(), k
                assert (int(head["seq"]), int(head["time_ns"]), int(head["op"])) == (rec.seq, rec.time_ns, rec.op)
                total, first = expected(data[:headers.end[k]], off)
                assert int(out["bytes"][k]) == total
                for kind, want in first.items():
                    start, length, flags = found[kind]
                    assert (int(start[k]), int(length[k]), int(flags[k])) == want, (k, kind)
            records += len(headers.off)
        assert records == sum(chunk.count for chunk in reader.chunks) > 0


def _member_mismatches(path: Path, shift: int = 0) -> tuple[int, int]:
    """(members read, members that differ from the mirror's decode) over every record of ``path``: per
    side, the first such ARG buffer of ``decode_record``'s record, each member slot of the layout the
    scan gave it read at the plan's offset.  ``shift``: move every offset the C is given that far (a
    wrong offset, which must show)."""
    read = wrong = 0
    with TraceReader(path) as reader:
        decoders = decoders_for(reader)
        args = ArgRegistry(Plan(decoders))
        room = None
        for indices in batches(reader.chunks, 0, BATCH_RECORDS):
            room, spans = reader.read_chunks(indices, room)
            if shift:
                scan_chunks(room, spans, args, 0)  # registers the layouts, so their offsets can be moved
                args.offsets += shift
            recs: Records = scan_chunks(room, spans, args, 0)
            if shift:
                args.offsets -= shift
            views = {span.index: memoryview(room)[span.start:span.end] for span in spans}
            for i in range(len(recs["pos"])):
                rec = decode_record(views[int(recs["chunk"][i])], int(recs["offset"][i]))
                for side, when in zip(SIDES, (When.BEFORE, When.AFTER)):
                    data = next((b.data for b in rec.buffers if b.role == Role.ARG and b.when == when), None)
                    layout = int(recs[f"{side}_arg"][i])
                    assert (layout == ABSENT) == (data is None), (i, side)
                    slots: list[Scalar | None] = [None] * (2 + MAX_HANDLES)
                    if layout >= 0:
                        found = args.layouts[layout]
                        slots[:2 + len(found.handles)] = [found.key, found.status, *(h for _, h in found.handles)]
                    got = [int(recs[f"{side}_key"][i]), int(recs[f"{side}_status"][i]),
                           *map(int, recs[f"{side}_h"][i])]
                    for k, slot in enumerate(slots):
                        want = 0 if slot is None or data is None else int.from_bytes(
                            data[slot.offset:slot.offset + slot.size], "little", signed=slot.signed)
                        if k >= 2:
                            want &= 0xFFFFFFFF  # the handle columns are 32-bit
                        read += slot is not None
                        wrong += got[k] != want
    return read, wrong


def _layouts_trace(tmp_path: Path, version: str) -> Path:
    """Calls of every ioctl argument layout of profile ``version`` (tests/test_columns.py's ``_calls``:
    random members, short and unreadable arguments, exits only)."""
    decoders = DecoderSet(load_profile(version), user=False)
    path = tmp_path / f"layouts-{version}.trace"
    with TraceWriter(path, {"driver_version": version}) as writer:
        for t, rec in enumerate(rec for records in _calls(decoders, random.Random(version)) for rec in records):
            writer.write(replace(rec, time_ns=1000 * t))
    return path


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_members_are_the_mirror_decode(path: Path) -> None:
    read, wrong = _member_mismatches(path)
    assert wrong == 0
    assert read > 0 or path.name.startswith("nvidia-smi")


@pytest.mark.parametrize("version", available_profiles())
def test_members_of_every_layout(tmp_path: Path, version: str) -> None:
    read, wrong = _member_mismatches(_layouts_trace(tmp_path, version))
    assert (read > 0, wrong) == (True, 0)


def test_members_at_a_wrong_offset_differ(tmp_path: Path) -> None:
    """The comparison sees an offset one byte off (so the tests above would catch the C reading elsewhere)."""
    read, wrong = _member_mismatches(_layouts_trace(tmp_path, available_profiles()[0]), shift=1)
    assert read > 0 and wrong > read // 2


def _record(seq: int, buffers: int) -> bytes:
    arg = (Buffer(Role.ARG, When.BEFORE, bytes(range(20))), Buffer(Role.ARG, When.AFTER, bytes(20)))
    return Record(Source.SYS, Phase.EVENT, op=1, seq=seq, time_ns=seq, buffers=arg[:buffers]).encode()


def _more_buffers(encoded: bytes) -> bytes:
    """One more buffer than the record holds: the walk reads a buffer header past its end."""
    return RECORD["nbufs"].replaced(encoded, RECORD["nbufs"].get(encoded) + 1)


def _overlong(index: int) -> Callable[[bytes], bytes]:
    """Buffer ``index`` says it holds more bytes than the record has."""
    def damage(encoded: bytes) -> bytes:
        at = RECORD.size
        for _ in range(index):
            at += BUFFER_HEADER_SIZE + _pad(BUFFER_LEN.get(encoded, at))
        return encoded[:at] + BUFFER_LEN.replaced(encoded[at:], len(encoded))
    return damage


def _cut(encoded: bytes) -> bytes:
    """The record's first bytes only, its header still saying its whole length."""
    return encoded[:RECORD.size + BUFFER_HEADER_SIZE]


def _bad_magic(encoded: bytes) -> bytes:
    return RECORD["magic"].replaced(encoded, 0)


def _trace(tmp_path: Path, damage: dict[int, Callable[[bytes], bytes]]) -> Path:
    """A trace of 40 two-buffer records, 10 a chunk, with records ``damage`` names changed by its function."""
    path = tmp_path / "damaged.trace"
    with TraceWriter(path, {}, chunk_bytes=10 * len(_record(0, 2))) as writer:
        for i in range(40):
            encoded = _record(i, 2)
            writer.write_encoded(damage[i](encoded) if i in damage else encoded)
    return path


def _build(path: Path) -> None:
    with TraceReader(path) as reader:
        CallTableBuilder(reader, decoders_for(reader), client_ids=client_ids(reader.meta)).update()


SIZE = len(_record(0, 2))
HEADER_PAST = "a buffer header runs past the record's end"
DATA_PAST = "a buffer runs past the record's end"


@pytest.mark.parametrize(("damage", "record", "what"), [
    ({12: _more_buffers}, 12, HEADER_PAST),
    ({12: _overlong(0)}, 12, DATA_PAST),
    ({12: _overlong(1)}, 12, DATA_PAST),
    ({12: _bad_magic}, 12, "bad magic"),
    ({12: _cut}, 12, "bad sizes"),
    ({19: _cut}, 19, "bad sizes"),  # a chunk's last record: its room is the chunk's end
    # several in one batch: the first check to fail (lowest buffer index, header before data), then the first record
    ({3: _more_buffers, 5: _overlong(0)}, 5, DATA_PAST),
    ({3: _overlong(1), 5: _more_buffers}, 3, DATA_PAST),
    ({3: _overlong(1), 5: _overlong(0)}, 5, DATA_PAST),
    ({7: _overlong(0), 25: _overlong(0)}, 7, DATA_PAST),
], ids=["more-buffers", "overlong-0", "overlong-1", "bad-magic", "cut", "cut-last", "header-then-data",
        "data-then-header", "later-buffer", "first-record"])
def test_damaged_record_errors(tmp_path: Path, damage: dict[int, Callable[[bytes], bytes]], record: int, what: str) -> None:
    path = _trace(tmp_path, damage)
    with pytest.raises(RecordError) as caught:
        _build(path)
    assert str(caught.value) == f"record at byte {record % 10 * SIZE} of chunk {record // 10}: {what}"


def test_walk_library_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rmtrace.kmod_shim, "HERE", tmp_path, raising=False)
    with pytest.raises(RmtraceError, match="the record walk is not built .*pip install -e . builds kmod_shim/librmtrace_scan.so"):
        load()


def test_walk_library_of_another_record_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library built from a record header that moved a field is refused at import, before any walk."""
    source = REPO / "kmod_shim"
    for name in SCAN_SOURCES:
        shutil.copy(source / name, tmp_path / name)
    header = (source / "rmtrace_record.h").read_text()
    moved = header.replace("\tuint8_t  when;", "\tuint8_t  spare;\n\tuint8_t  when;")  # a field moved: role, spare, when
    assert moved != header
    (tmp_path / "rmtrace_record.h").write_text(moved)
    build(tmp_path / SCAN_LIBRARY, source_dir=tmp_path, sources=SCAN_SOURCES)
    monkeypatch.setattr(rmtrace.kmod_shim, "HERE", tmp_path, raising=False)
    with pytest.raises(RmtraceError, match="built from another record format than rmtrace.record's"):
        load()
