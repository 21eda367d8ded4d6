"""The call table of a trace, kept in the user's cache directory: reopening a trace is a load, not a fold.

An entry is a directory of ``.npy`` columns (memory-mapped when loaded): the
rows', the clients' and the processes' (``ClientColumns``, ``ProcessColumns``:
a client or process is made when read, so a loaded table does not hold one
object each); and a ``manifest.json`` with the string tables and the clients' ids.  It is keyed by the
trace file's identity (real path, size, modification time, inode and device),
rmtrace's version and files, the cache layout's version, the driver profile
and the user's decoders, so any of them changing makes a new entry.  Only
finished traces (footer and index intact) are kept.  Entries are
written to a temporary directory and renamed into place, so a reader never
sees half an entry; the least recently used ones go when the cache grows past
``RMTRACE_CACHE_MAX`` bytes (default 8 GiB).

``RMTRACE_CACHE`` moves the cache (a directory) or turns it off (``off``);
without it the cache is ``platformdirs.user_cache_dir("rmtrace")/traces``.
An entry also keeps the model folded from the table (``rmtrace.columns.modelcache``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rmtrace.decoders import DecoderSet

import rmtrace
from rmtrace.columns.store import FileColumns, open_columns
from rmtrace.columns.strings import Strings
from rmtrace.columns.table import CALL_DTYPES, CLIENT_COLUMNS, PROCESS_COLUMNS, CallTable, CallTableBuilder, ClientColumns, ProcessColumns
from rmtrace.semantics.locks import LockKind
from rmtrace.session.planned import client_ids
from rmtrace.trace import TraceReader

CACHE_VERSION = 4
"""Bumped whenever what an entry holds changes meaning."""
DEFAULT_MAX_BYTES = 8 << 30
MANIFEST = "manifest.json"
CLIENTS, PROCESSES = "clients", "processes"
"""Prefixes of the entry's files of the clients' and processes' columns (``CLIENTS.pid.npy``, ...)."""


def cache_root() -> Path | None:
    """Where entries live, or None when the cache is off."""
    value = os.environ.get("RMTRACE_CACHE", "")
    if value.lower() in ("off", "0", "no", "none"):
        return None
    if value:
        return Path(value)
    import platformdirs
    return Path(platformdirs.user_cache_dir("rmtrace")) / "traces"


def cacheable(reader: TraceReader) -> bool:
    """Only a finished trace is kept: one still being written (or cut off) changes, or may, and each
    of its versions would be an entry of its own."""
    return reader.recovery.complete


def entry_key(reader: TraceReader, decoders: DecoderSet) -> str:
    st = os.fstat(reader.fileno())
    identity = {
        "path": os.path.realpath(reader.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino,
        "device": st.st_dev, "rmtrace": rmtrace.__version__, "cache": CACHE_VERSION, "code": code_identity(),
        "profile": decoders.profile.version, "user_decoders": list(decoders.user_sources),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:40]


@functools.cache
def code_identity() -> str:
    """What the installed rmtrace and its decoders are, file by file (size and modification time): a
    tree being worked on changes its tables without a new version number."""
    import rmtrace.decoders
    files = []
    for package in (rmtrace, rmtrace.decoders):
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                files.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns))
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()


def call_table(reader: TraceReader, decoders: DecoderSet, *, cache: bool = True) -> CallTable:
    """The trace's call table: from the cache when an entry is there, else built (and stored)."""
    root = cache_root() if cache and cacheable(reader) else None
    if root is None:
        return built_table(reader, decoders)
    key = entry_key(reader, decoders)
    found = load(root / key)
    if found is not None:
        return found
    return build_into(root, key, reader, decoders, stash=False)  # no fold follows


def built_table(reader: TraceReader, decoders: DecoderSet, stash: bool = False, params: bool = False) -> CallTable:
    """The trace's call table built in memory, outside any cache; ``stash`` and ``params`` as ``build_into``'s."""
    builder = CallTableBuilder(reader, decoders, client_ids=client_ids(reader.meta), stash=stash, params=params)
    builder.update()
    return builder.table()


def load(entry: Path) -> CallTable | None:
    """The table an entry holds; None when there is no such entry or it cannot be read."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        if manifest.get("cache") != CACHE_VERSION:
            return None
        columns = open_columns(entry, list(CALL_DTYPES))
        table = _table(columns, manifest, entry)
        os.utime(entry / MANIFEST)  # recently used
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return table


def build_into(root: Path, key: str, reader: TraceReader, decoders: DecoderSet, stash: bool = True,
               params: bool = False) -> CallTable:
    """Build the trace's call table into the entry ``root/key`` (in memory when the cache cannot be written);
    with ``stash``, for a fold to read next: the table keeps the records it will read again (``CallTable.stash``;
    ``params``: a fold that reads params, ``rmtrace.columns.stash.params_exits``)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".tmp", dir=root))
    except OSError:  # a cache we cannot write is no cache
        return built_table(reader, decoders, stash, params)
    rows = FileColumns(work, CALL_DTYPES)
    try:
        builder = CallTableBuilder(reader, decoders, rows=rows, client_ids=client_ids(reader.meta), stash=stash,
                                   params=params)
        builder.update()
        table = builder.table()
        table.columns = rows.finish()
        (work / MANIFEST).write_text(json.dumps(_manifest(table, work)))
        try:
            os.rename(work, root / key)
        except OSError:  # another process stored the same entry first: use ours, drop it later
            return table
        table.columns = open_columns(root / key, list(CALL_DTYPES))
        table.clients, table.processes = _people(root / key, [c.id for c in table.clients])  # mapped, as loaded
        _evict(root, keep=key)
        return table
    except BaseException:
        rows.abandon()
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        if work.exists() and (root / key).exists():
            shutil.rmtree(work, ignore_errors=True)


def _manifest(table: CallTable, work: Path) -> dict[str, Any]:
    """The entry's manifest; the clients' and processes' columns are written to ``work`` beside the rows'."""
    for name, values in ClientColumns.columns_of(table.clients).items():
        np.save(work / f"{CLIENTS}.{name}.npy", values)
    processes, tids = ProcessColumns.columns_of(table.processes)
    for name, values in processes.items():
        np.save(work / f"{PROCESSES}.{name}.npy", values)
    np.save(work / f"{PROCESSES}.tids.npy", tids)
    return {
        "cache": CACHE_VERSION, "rows": len(table), "names": table.names.values, "details": table.details.values,
        "status_names": table.status_names.values, "handle_sets": [list(s) for s in table.handle_sets.values],
        "lock_sets": [[lock.value for lock in s] for s in table.lock_sets.values],
        "clients": table.client_ids(),
        "extra_handles": {str(row): handles for row, handles in table.extra_handles.items()},
        "members": {str(row): [list(m) for m in members] for row, members in table.members.items()},
    }


def _people(entry: Path, client_ids: list[str]) -> tuple[ClientColumns, ProcessColumns]:
    """The entry's clients and processes, their columns mapped."""
    clients = open_columns(entry, [f"{CLIENTS}.{name}" for name in CLIENT_COLUMNS])
    processes = open_columns(entry, [f"{PROCESSES}.{name}" for name in (*PROCESS_COLUMNS, "tids")])
    if any(len(c) != len(client_ids) for c in clients.values()):
        raise ValueError("a client column of the wrong length")
    tids = processes.pop(f"{PROCESSES}.tids")
    return (ClientColumns(client_ids, {name.partition(".")[2]: c for name, c in clients.items()}),
            ProcessColumns({name.partition(".")[2]: c for name, c in processes.items()}, tids))


def _table(columns: dict[str, Any], manifest: dict[str, Any], entry: Path) -> CallTable:
    clients, processes = _people(entry, manifest["clients"])
    return CallTable(columns, Strings(manifest["names"]), Strings(manifest["details"]),
                     Strings(manifest["status_names"]), Strings(tuple(s) for s in manifest["handle_sets"]),
                     Strings(tuple(LockKind(v) for v in s) for s in manifest["lock_sets"]), clients, processes,
                     {int(row): handles for row, handles in manifest["extra_handles"].items()},
                     {int(row): tuple((m[0], m[1]) for m in members) for row, members in manifest["members"].items()})


def _evict(root: Path, keep: str) -> None:
    """Drop the least recently used entries while the cache holds more than its limit."""
    limit = int(os.environ.get("RMTRACE_CACHE_MAX", DEFAULT_MAX_BYTES))
    entries = []
    for entry in root.iterdir():
        manifest = entry / MANIFEST
        if entry.is_dir() and manifest.exists():
            size = sum(f.stat().st_size for f in entry.iterdir())
            entries.append((manifest.stat().st_mtime, size, entry))
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries):
        if total <= limit:
            break
        if entry.name != keep:
            shutil.rmtree(entry, ignore_errors=True)
            total -= size
