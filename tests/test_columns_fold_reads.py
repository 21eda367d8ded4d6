"""A cold fold decompresses each chunk of its trace once: the call table's build reads every chunk, and the
records the fold reads again (``rmtrace.columns.stash``) come from the stash the build kept, never from the
trace a second time, even with the stash let go of behind the fold a record at a time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rmtrace.session.model import load_channels, load_objects, load_session
from rmtrace.trace import TraceReader

RECORDS = 12_000
"""Records of the replicated trace: a few dozen chunks, more than the reader's chunk cache holds."""
LOADS = {"model": load_session, "channels": load_channels, "objects": load_objects}


@pytest.fixture(scope="module")
def replicated_trace(replicated) -> Path:
    return replicated(RECORDS)


def _decodes(path: Path, load, cache: Path | str, monkeypatch) -> tuple[Counter, int]:
    """How often each chunk (by offset) was decompressed by a cold ``load`` of ``path`` with ``RMTRACE_CACHE``
    set to ``cache``, and the chunks."""
    decoded: Counter = Counter()
    payload = TraceReader._payload

    def counted(self: TraceReader, entry):  # every decompression reads the chunk's payload first
        decoded[entry.offset] += 1
        return payload(self, entry)
    monkeypatch.setattr(TraceReader, "_payload", counted)
    monkeypatch.setenv("RMTRACE_CACHE", str(cache))
    reader = TraceReader(path)
    load(reader)
    monkeypatch.setattr(TraceReader, "_payload", payload)
    return decoded, len(reader.chunks)


@pytest.mark.parametrize("cache", ["empty", "off"])
@pytest.mark.parametrize("fold", list(LOADS))
def test_a_cold_fold_of_a_replicated_trace_reads_no_chunk_twice(replicated_trace, fold, cache, monkeypatch, tmp_path):
    """Stash segments of one record and fold blocks of 4 rows, so that the stash is let go of behind the fold
    as it moves on (``forget_before``, from the rows' and the effects' blocks both): every chunk is still
    decompressed once, by the build, and none again by the fold; with an empty cache, and with the cache off
    (a table built in memory keeps its stash all the same)."""
    import rmtrace.columns.fold as fold_module
    import rmtrace.columns.stash as stash

    monkeypatch.setattr(stash, "SEGMENT", 1)
    monkeypatch.setattr(fold_module, "DECODE_BLOCK", 4)
    decoded, chunks = _decodes(replicated_trace, LOADS[fold], tmp_path / "cache" if cache == "empty" else "off",
                               monkeypatch)
    assert chunks > 8  # more than TraceReader's chunk cache: a second read would decompress again
    assert len(decoded) == chunks
    assert [offset for offset, n in decoded.items() if n > 1] == []


@pytest.mark.parametrize("fold", ["model", "objects"])
def test_a_fold_without_its_stash_reads_chunks_again(replicated_trace, fold, monkeypatch, tmp_path):
    """What the count above would see were the stash to miss the records the fold reads again (each found
    nowhere): the fold decompresses chunks a second time."""
    import rmtrace.columns.stash as stash

    monkeypatch.setattr(stash.RecordStash, "find", lambda self, seq: None)
    decoded, chunks = _decodes(replicated_trace, LOADS[fold], tmp_path / "cache", monkeypatch)
    assert len(decoded) == chunks
    assert sum(n > 1 for n in decoded.values()) > chunks // 4
