"""The RM objects as columns (``rmtrace.session.objects``) are the fold's objects, field for field.

``load_objects`` (what ``rmtrace stats`` folds) logs the objects' operations and applies them over ints
(``ObjectsFold.resolve``); the whole fold makes an ``RmObject`` per object (``Folder.add_object``,
``free_object``, ``rmtrace.session.fold.free``, ``duplicate``, a process's exit).  On every committed
capture and replay trace and the constructed boots (GSP, sema, a wedge) the two give the same objects
and the same root handles per client; on random sequences of operations (handles reused, parents freed
with their children, copies of copies, frees of what was never allocated, exits) too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmtrace.decoders import decoders_for

from rmtrace import captures
from rmtrace.columns.cache import call_table
from rmtrace.semantics import Category
from rmtrace.session import load_session
from rmtrace.session.entities import Client, FreedBy
from rmtrace.session.fold import Folder, duplicate, free
from rmtrace.session.model import ObjectsModel, fold_objects, load_objects
from rmtrace.session.objects import ARRAYS, CATEGORIES, ObjectColumns, ObjectsFold, Op, _Column, _Objects, _Siblings
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader
from tests.golden_outputs import COMMITTED_TRACES


def same_objects(path: Path) -> None:
    whole = load_session(path, cache=False)
    part = load_objects(path, cache=False)
    assert isinstance(part, ObjectsModel)
    assert list(part.object_list) == list(whole.object_list)
    assert [(c.id, c.h_client, c.rm_clients) for c in part.clients] == \
        [(c.id, c.h_client, c.rm_clients) for c in whole.clients]
    assert part.object_counts() == {k: dict(v) for k, v in whole.object_counts().items()}


@pytest.mark.parametrize("path", COMMITTED_TRACES, ids=lambda p: Path(p).name)
def test_the_columns_are_the_folds_objects(path):
    same_objects(path)


def test_the_objects_one_by_one_are_the_folds_too(monkeypatch):
    """A capture's blocks are applied at once (``_Objects._at_once``: its objects keep to a tree), and one by
    one they give the same objects."""
    path = captures.path("cuda-streams-3x-sequential")
    at_once = []
    tried = _Objects._at_once
    monkeypatch.setattr(_Objects, "_at_once", lambda *args: at_once.append(tried(*args)) or at_once[-1])
    monkeypatch.setattr("rmtrace.columns.fold.OBJECTS_BLOCK", 64)
    same_objects(path)
    assert at_once and all(bases is not None for bases in at_once)
    monkeypatch.setattr(_Objects, "_at_once", lambda *args: None)
    same_objects(path)


def blocks_are_one_fold(path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectsModel:
    whole = load_session(path, cache=False)
    at_once = load_objects(path, cache=False)
    with monkeypatch.context() as m:
        m.setattr("rmtrace.columns.fold.OBJECTS_BLOCK", 5)
        part = load_objects(path, cache=False)
    assert isinstance(part, ObjectsModel) and isinstance(at_once, ObjectsModel) and len(part.table) > 5 * 5
    assert list(part.object_list) == list(at_once.object_list) == list(whole.object_list)
    assert part.clients == at_once.clients and dict(part.processes) == dict(at_once.processes)
    return part


@pytest.mark.parametrize("path", COMMITTED_TRACES[:5] + [p for p in COMMITTED_TRACES if "sequential-3.model" in p.name],
                         ids=lambda p: Path(p).name)
def test_a_fold_a_few_rows_at_a_time_is_the_whole_fold(path, monkeypatch):
    """``fold_table_objects`` goes ``OBJECTS_BLOCK`` rows at a time (each client's last record too): with
    blocks of a few rows (processes and clients made between blocks), the same objects, root handles,
    clients and processes as the fold of every row at once, and the whole fold's objects."""
    blocks_are_one_fold(path, monkeypatch)


def test_a_fold_a_few_rows_at_a_time_of_constructed_boots(sequential_boots, monkeypatch):
    """The same on boots with GSP messages and sema (their records read again, a block at a time)."""
    for path in sequential_boots:
        blocks_are_one_fold(path, monkeypatch)


def test_a_call_in_parts_ends_a_client_by_its_last_part_in_any_block(monkeypatch):
    """A call whose records the table keeps as members (a GSP exchange in parts) ends its client at its
    last part: the same when the clients' ends are read a few rows at a time."""
    reader = TraceReader(captures.path("cuda-streams-3x-sequential"))
    decoders = decoders_for(reader)

    def clients(block: int) -> list[Client]:
        table = call_table(reader, decoders, cache=False)
        last = {c.index: int(np.flatnonzero(table.columns["client"] == c.index)[-1]) for c in table.clients}
        for row in last.values():  # each client's last call: a last part later than any record of the trace
            table.members[row] = ((int(table.columns["enter_seq"][row]), 0), (reader.record_count - 1, 10**18 + row))
        table.members[int(table.columns["client"].argmax())] = ((0, 0), (1, 1))  # and one earlier than its exit
        with monkeypatch.context() as m:
            m.setattr("rmtrace.columns.fold.OBJECTS_BLOCK", block)
            return list(fold_objects(reader, decoders, table).clients)

    at_once = clients(1 << 20)
    assert all(c.last_seq == reader.record_count - 1 for c in at_once)
    assert all(c.last_ns > 10**18 for c in at_once)
    assert clients(7) == at_once


def test_the_columns_of_constructed_boots(sequential_boots):
    for path in sequential_boots:
        same_objects(path)


def test_the_columns_round_trip_through_files(tmp_path):
    columns = load_objects(captures.path("cuda-streams-3x-sequential"), cache=False)
    assert isinstance(columns, ObjectsModel)
    saved = columns.columns.save(tmp_path, "objects")
    back = ObjectColumns.load(saved, tmp_path, "objects")
    assert isinstance(back.handle, np.memmap)  # mapped, not read
    assert back.objects() == list(columns.object_list)
    (tmp_path / "objects.handle.npy").unlink()
    np.save(tmp_path / "objects.handle.npy", np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError):
        ObjectColumns.load(saved, tmp_path, "objects")


def test_the_columns_are_saved_as_np_save_writes_them(tmp_path, monkeypatch):
    """The fold's columns are mapped from its files, and ``save`` writes them a part at a time (parts of a
    few items here) to the bytes ``np.save`` writes of each."""
    columns = load_objects(captures.path("cuda-streams-3x-sequential"), cache=False)
    assert isinstance(columns, ObjectsModel) and len(columns.columns) > 3 * 7
    assert isinstance(columns.columns.handle, np.memmap)
    monkeypatch.setattr("rmtrace.session.objects.SAVE_ROWS", 7)
    columns.columns.save(tmp_path, "objects")
    for name in ARRAYS:
        np.save(tmp_path / "expected.npy", np.asarray(getattr(columns.columns, name)))
        assert (tmp_path / f"objects.{name}.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes(), name


@pytest.mark.parametrize("dtype", [np.int8, np.bool_, np.int32, np.int64])
def test_a_column_in_a_file_keeps_what_was_put_in_as_it_grows(dtype, monkeypatch):
    """``_Column``: added to past its file's first size (a few items here) and let go of between, it reads
    back what was put in, item by item and as an array, and an item set stays set."""
    monkeypatch.setattr("rmtrace.session.objects.COLUMN_ITEMS", 4)
    column = _Column(dtype)
    assert len(column) == 0 and len(column.view()) == 0 and len(column.array()) == 0
    values = (np.arange(23) % 2 if dtype is np.bool_ else np.arange(23) - 11).astype(dtype)
    for start, stop in ((0, 3), (3, 4), (4, 13), (13, 23)):
        column.extend(values[start:stop])
        column.release()
    values[5] = 1
    column[5] = values[5].item()
    column.release()
    assert len(column) == 23 and [column[i] for i in range(23)] == values.tolist()
    assert column.view().tolist() == values.tolist()
    assert isinstance(column.array(), np.memmap) and column.array().tolist() == values.tolist()


@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 3), st.integers(0, 3), st.integers(0, 9)),
                         max_size=8), max_size=8))
def test_the_siblings_count_as_a_dict_does(batches):
    """``_Siblings``: counts put batch after batch (a key once a batch) read back as a dict of the triples
    keeps them, keys new and old."""
    siblings, expected = _Siblings(), {}
    for batch in batches:
        batch = list({(c, b, n): k for c, b, n, k in batch}.items())
        if not batch:
            continue
        client, base, name = (np.array(v, dtype=np.int64) for v in zip(*(t for t, _ in batch)))
        keys = siblings.keys(client, base, name)
        assert siblings.get(keys).tolist() == [expected.get(t, 0) for t, _ in batch]
        siblings.put(keys, np.array([k for _, k in batch], dtype=np.int64))
        expected.update(batch)
    if expected:
        client, base, name = (np.array(v, dtype=np.int64) for v in zip(*expected))
        assert siblings.get(siblings.keys(client, base, name)).tolist() == list(expected.values())


def test_the_names_of_some_objects_are_those_of_all():
    """``stable_names(wanted)`` (parquet names a block's objects at a time) makes each name as the whole
    list does: bases named on the way, in any order, an object asked for twice."""
    columns = load_objects(captures.path("cuda-streams-3x-sequential"), cache=False)
    assert isinstance(columns, ObjectsModel)
    every = columns.columns.stable_names()
    assert any("/" in name for name in every)  # names of bases' names
    wanted = [*range(len(every) - 1, -1, -3), 0, 0]
    assert columns.columns.stable_names(wanted) == [every[i] for i in wanted]
    assert columns.columns.stable_names([]) == []


@pytest.fixture(scope="module")
def decoders():
    return decoders_for(TraceReader(captures.path("cuda-streams-3x-sequential")))


HANDLES = st.sampled_from([1, 2, 3, 4, 5])
CLASSES = st.sampled_from([None, 0x0080, 0x2080, 0xA06F])
OPS = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.sampled_from([0, 1, -1]), HANDLES, HANDLES, st.one_of(st.none(), HANDLES),
              CLASSES, st.sampled_from([Category.OTHER, Category.DEVICE, Category.CHANNEL])),
    st.tuples(st.just("root"), st.sampled_from([0, 1]), HANDLES),
    st.tuples(st.just("dup"), st.sampled_from([0, 1]), HANDLES, HANDLES, st.one_of(st.none(), HANDLES), HANDLES,
              HANDLES),
    st.tuples(st.just("free"), st.sampled_from([0, 1, 2, 3, 4, 5]), HANDLES),
    st.tuples(st.just("exit"), st.sampled_from([0, 1]))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_random_operations_leave_what_the_fold_leaves(decoders, ops):
    replayed(decoders, ops, ())


@settings(max_examples=300, deadline=None)
@given(ops=OPS, cuts=st.lists(st.integers(0, 40), max_size=6), tree=st.booleans())
def test_random_operations_a_block_at_a_time_leave_what_the_fold_leaves(decoders, ops, cuts, tree):
    """Applied a block at a time, at once where the objects keep to a tree (``_Objects._at_once``) and
    one by one where they do not, or (``tree`` False) always one by one."""
    with pytest.MonkeyPatch.context() as m:
        if not tree:
            m.setattr(_Objects, "_at_once", lambda *args: None)
        replayed(decoders, ops, cuts)


def replayed(decoders, ops, cuts) -> None:
    """Apply ``ops`` as the fold and as ``ObjectsFold`` would (its blocks applied before the rows in
    ``cuts``), and check they leave the same objects and root handles."""
    folder = Folder(decoders, Timeline())
    theirs = [Client(f"c{i}", 100 + i) for i in range(2)]
    ours = [Client(f"c{i}", 100 + i) for i in range(2)]
    folder.clients = {c.id: c for c in theirs}
    objects = ObjectsFold()
    name = folder.interpreter.class_name
    for row, op in enumerate(ops):
        seq, ns = 10 * row, 1000 + row
        kind, rest = op[0], op[1:]
        if kind in ("alloc", "root"):
            if kind == "root":
                client, handle = rest
                h_client, parent, cls, category = handle, None, 0x0041, Category.ROOT
            else:
                client, h_client, handle, parent, cls, category = rest
            cid = f"c{client}" if client >= 0 else None
            folder.add_object(cid, h_client, handle, parent, cls, category, name(cls), seq, ns, "NV_OK")
            logged = (Op.ALLOC, cid, h_client, handle, parent or 0, parent is not None, -1 if cls is None else cls,
                      CATEGORIES.index(category), name(cls), seq, ns, "NV_OK", 0, 0)
        elif kind == "dup":
            client, h_client, handle, parent, src_client, src_handle = rest
            duplicate(folder, f"c{client}", h_client, handle, parent, src_client, src_handle, seq, ns, "NV_ERR")
            logged = (Op.DUP, f"c{client}", h_client, handle, parent or 0, parent is not None, -1, 0, "DUP", seq, ns,
                      "NV_ERR", src_client, src_handle)
        elif kind == "free":
            h_client, handle = rest
            free(folder, h_client, handle, ns, seq)
            logged = (Op.FREE, None, h_client, handle, 0, False, -1, 0, "", seq, ns, "", 0, 0)
        else:
            client = theirs[rest[0]]
            for h in client.rm_clients:  # rmtrace.session.fold._exited
                folder.free_object(h, h, seq, ns, by=FreedBy.EXIT)
            logged = (Op.EXIT, client.id, 0, 0, 0, False, -1, 0, "", seq, ns, "", 0, 0)
        objects.log.append((row, logged))
        if row + 1 in cuts:
            objects.apply(ours)
    columns = objects.resolve(ours)
    assert columns.objects() == folder.object_list
    assert [(c.h_client, c.rm_clients) for c in ours] == [(c.h_client, c.rm_clients) for c in theirs]


def test_a_warm_cache_maps_the_objects(tmp_path, monkeypatch):
    """Stats' fold keeps its objects in the entry, and a stored model keeps them as the same columns: a
    second ``load_objects`` maps them (no fold), and gives the same objects either way."""
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "t.trace"
    path.write_bytes(captures.path("cuda-streams-3x-sequential").read_bytes())
    whole = load_session(path, cache=False)
    cold = load_objects(path)
    assert list((tmp_path / "cache").glob("*/objects/manifest.json"))
    monkeypatch.setattr("rmtrace.session.model.fold_objects", None)  # a fold now would fail
    for warm in (load_objects(path), (load_session(path), load_objects(path))[1]):
        assert isinstance(warm, ObjectsModel) and isinstance(warm.columns.handle, np.memmap)
        assert list(warm.object_list) == list(cold.object_list) == list(whole.object_list)
        assert [(c.id, c.label, c.rm_clients) for c in warm.clients] == [(c.id, c.label, c.rm_clients)
                                                                          for c in whole.clients]
    assert list((tmp_path / "cache").glob("*/model/objects.handle.npy"))
    stored = load_session(path)
    assert stored.object_list == whole.object_list and dict(stored.objects) == dict(whole.objects)


def test_what_the_keys_cannot_hold_is_folded_the_slow_way(monkeypatch):
    path = captures.path("cuda-streams-3x-sequential")
    whole = load_session(path, cache=False)
    monkeypatch.setattr("rmtrace.session.objects.HANDLE_MAX", 1)  # every handle is "too wide" now
    part = load_objects(path, cache=False)
    assert isinstance(part, ObjectsModel) and list(part.object_list) == list(whole.object_list)
