"""The call table's cache: a second open loads what the first built, and nothing stale is ever loaded."""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path

import numpy as np
import pytest
from rmtrace.decoders import decoders_for

from rmtrace.analysis.stats import session_stats
from rmtrace.analysis.wedges import find_wedges
from rmtrace.columns import cache, modelcache
from rmtrace.columns.table import ClientColumns, ClientRow, ProcessColumns, ProcessTouch
from rmtrace.session import load_session
from rmtrace.trace import TraceReader
from tests.golden_outputs import session_digest

SHIPPED = Path(__file__).resolve().parent.parent / "captures" / "cuda-streams-3x-sequential.trace"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "run.trace"
    path.write_bytes(SHIPPED.read_bytes())
    return path


def table(path: Path):
    reader = TraceReader(path)
    return cache.call_table(reader, decoders_for(reader))


def entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.iterdir() if (p / cache.MANIFEST).exists())


def test_second_open_loads_the_stored_table(cache_dir, trace):
    built = table(trace)
    assert len(entries(cache_dir)) == 1
    loaded = table(trace)
    assert isinstance(loaded.columns["enter_seq"], np.memmap)
    assert list(loaded.infos()) == list(built.infos()) == list(load_session(trace).calls)
    assert [c.id for c in loaded.clients] == [c.id for c in built.clients]


@pytest.mark.parametrize("shipped", ["cuda-streams-3x-sequential", "cuda-streams-2-together", "nvidia-smi-q"])
def test_stored_clients_and_processes_are_the_builds(cache_dir, tmp_path, shipped):
    """A loaded table's clients and processes are columns, each made when read as the build made it."""
    path = tmp_path / f"{shipped}.trace"
    path.write_bytes((SHIPPED.parent / f"{shipped}.trace").read_bytes())
    reader = TraceReader(path)
    built = cache.built_table(reader, decoders_for(reader))  # in memory: a list and a dict
    assert isinstance(built.clients, list) and isinstance(built.processes, dict)
    for stored in (table(path), table(path)):  # built into the entry, then loaded from it
        assert isinstance(stored.clients, ClientColumns) and isinstance(stored.processes, ProcessColumns)
        assert list(stored.clients) == built.clients and len(stored.clients) == len(built.clients)
        assert [stored.clients[i] for i in range(-len(built.clients), len(built.clients))] == built.clients * 2
        assert stored.clients[1::2] == built.clients[1::2]
        assert stored.client_ids() == [c.id for c in built.clients]
        assert list(stored.processes.items()) == list(built.processes.items())
        assert all(stored.processes[pid] == touch for pid, touch in built.processes.items())
        assert 0 not in stored.processes and stored.processes.get(1 << 31) is None
    with pytest.raises(IndexError):
        stored.clients[len(built.clients)]


def test_client_and_process_columns_keep_every_field():
    """What the captures do not have: a GSP session's client (keyed by its session, no pid), threads, no process."""
    clients = [ClientRow(0, "c1", 517, 517, 3, 4, 100, None), ClientRow(1, "gsp0", ("gsp", 2), 0, 9, 20, 300, 2)]
    stored = ClientColumns([c.id for c in clients], ClientColumns.columns_of(clients))
    assert list(stored) == clients and stored[-1] == clients[1] and stored[:1] == clients[:1]
    processes = {7: ProcessTouch((5, 1, 50), 90, {7, 9, 8}), 3: ProcessTouch((0, 0, 10), 10, {3}),
                 4: ProcessTouch((6, 0, 60), 60, set())}
    columns, tids = ProcessColumns.columns_of(processes)
    kept = ProcessColumns(columns, tids)
    assert list(kept.items()) == list(processes.items()) and list(kept) == [7, 3, 4]
    assert kept[7].threads == {7, 8, 9} and kept[4].threads == set() and 5 not in kept
    empty = ProcessColumns(*ProcessColumns.columns_of({}))
    assert list(empty.items()) == [] and len(empty) == 0 and empty.get(1) is None


def test_a_changed_file_is_a_new_entry(cache_dir, trace):
    table(trace)
    os.utime(trace, ns=(1, 1))  # same bytes, another modification time: not the file the entry was made of
    table(trace)
    assert len(entries(cache_dir)) == 2


def test_a_damaged_entry_is_rebuilt(cache_dir, trace):
    table(trace)
    (entry,) = entries(cache_dir)
    (entry / cache.MANIFEST).write_text("{not json")
    assert list(table(trace).infos()) == list(load_session(trace).calls)
    (entry / cache.MANIFEST).write_text(json.dumps({"cache": -1}))
    assert cache.load(entry) is None


def test_off_stores_nothing(tmp_path, monkeypatch, trace):
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    assert cache.cache_root() is None
    assert len(table(trace)) == len(load_session(trace).calls)


def test_least_recently_used_entries_go_past_the_limit(cache_dir, trace, tmp_path, monkeypatch):
    other = tmp_path / "other.trace"
    other.write_bytes(trace.read_bytes())
    table(trace)
    (first,) = entries(cache_dir)
    monkeypatch.setenv("RMTRACE_CACHE_MAX", "1")
    table(other)
    assert [p.name for p in entries(cache_dir)] != [first.name] and len(entries(cache_dir)) == 1


def test_an_unwritable_cache_builds_in_memory(tmp_path, monkeypatch, trace):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RMTRACE_CACHE", str(blocker / "cache"))  # under a file: cannot be made
    assert len(table(trace)) == len(load_session(trace).calls)


@pytest.mark.parametrize("name", ["cuda-streams-3x-sequential", "cuda-streams-2-together"])
def test_a_stored_model_is_the_folded_one(cache_dir, tmp_path, name):
    """Reopening a trace loads its model: the same processes, clients, objects, channels, ranks, GSP
    exchanges and transitions as folding it, so wedges and stats say the same."""
    path = tmp_path / f"{name}.trace"
    path.write_bytes((SHIPPED.parent / f"{name}.trace").read_bytes())
    folded = load_session(path)
    (entry,) = entries(cache_dir)
    assert (entry / modelcache.MODEL / "manifest.json").exists()
    loaded = load_session(path)
    assert session_digest(loaded) == session_digest(folded) == session_digest(load_session(path, cache=False))
    for name in ("object_list", "gsp", "stray_frees", "stop_reason", "lost"):
        assert getattr(loaded, name) == getattr(folded, name), name
    assert list(loaded.processes.items()) == list(folded.processes.items())
    assert (loaded.channels, loaded.ranks, loaded.clients) == (folded.channels, folded.ranks, folded.clients)
    assert [(t, type(t.value)) for t in loaded.transitions] == [(t, type(t.value)) for t in folded.transitions]
    assert [w.to_dict() for w in find_wedges(loaded)] == [w.to_dict() for w in find_wedges(folded)]
    assert session_stats(loaded) == session_stats(folded)


def test_a_damaged_model_is_folded_again(cache_dir, trace):
    folded = load_session(trace)
    (entry,) = entries(cache_dir)
    (entry / modelcache.MODEL / "manifest.json").write_text("[")
    assert session_digest(load_session(trace)) == session_digest(folded)


def test_an_unfinished_trace_is_not_kept(cache_dir, tmp_path):
    """A trace without its index (still being written, or cut off) is read every time, never stored."""
    path = tmp_path / "cut.trace"
    with TraceReader(SHIPPED) as reader, open(path, "wb") as f:
        f.write(SHIPPED.read_bytes()[:reader.chunks[-1].end])  # every chunk, no index or footer
    assert len(load_session(path).calls) == len(load_session(path).calls) == len(load_session(SHIPPED).calls)
    assert len(entries(cache_dir)) == 1  # the finished one's


def _resident_pages(directory: Path) -> dict[str, int]:
    """Pages of each file of ``directory`` mapped into this process and resident (/proc/self/smaps)."""
    pages: dict[str, int] = {}
    name = None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not line.startswith(("Rss", "Size")):  # a mapping's first line
                name = Path(fields[-1]).name if len(fields) > 5 and str(directory) in fields[-1] else None
            elif name and line.startswith("Rss:"):
                pages[name] = pages.get(name, 0) + int(fields[1]) // (os.sysconf("SC_PAGE_SIZE") // 1024)
    return pages


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps") and not os.environ.get("CI"),
                    reason="needs Linux's /proc/self/smaps")
def test_calls_read_from_a_mapped_table_let_its_pages_go(cache_dir, trace):
    """A mapped table's rows made into CallInfo (every row, or sparse rows: what a fold or a client's
    calls read), and the in-flight and record-client passes, leave none of its pages resident but the
    partial page where each pass's rows end (its columns span 5 pages and more)."""
    table(trace)
    loaded = table(trace)
    [entry] = [d for d in cache_dir.iterdir() if d.is_dir()]
    for rows in (np.arange(len(loaded)), np.arange(0, len(loaded), 97)):
        loaded.infos_at(rows)
        loaded.open_rows()
        loaded.record_clients()
        pages = _resident_pages(entry)
        wide = [f"{name}.npy" for name, column in loaded.columns.items() if column.nbytes > 4 * mmap.PAGESIZE]
        assert wide and all(pages.get(name, 0) <= 2 for name in wide), pages
