"""``ObjectNames`` asked block after block: the newest object of (client, handle) at or before each call, as a
search over every object finds it, while it keeps only the objects of clients still to make a call."""

from __future__ import annotations

import numpy as np
import pytest

from rmtrace import captures
from rmtrace.export.call_rows import ObjectNames
from rmtrace.session.model import ObjectsModel, load_objects
from rmtrace.session.objects import ObjectColumns


def newest(objects: ObjectColumns, client: int, handle: int, seq: int) -> int | None:
    """The last object (in allocation order) of ``client`` and ``handle`` allocated at or before ``seq``."""
    hit = np.flatnonzero((objects.client == client) & (objects.handle == handle) & (objects.alloc_seq <= seq))
    return int(hit[-1]) if len(hit) else None


@pytest.mark.parametrize("trace", ["cuda-streams-3x-sequential", "cuda-streams-2-together"])
@pytest.mark.parametrize("block", [7, 500])
def test_names_by_blocks_are_the_whole_search(trace, block, tmp_path, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path))
    model = load_objects(str(captures.path(trace)))
    assert isinstance(model, ObjectsModel)
    table, objects = model.table, model.columns
    names = ObjectNames(table, objects)
    every = objects.stable_names()
    c = table.columns
    asked = found = 0
    kept = []
    for start in range(0, len(table), block):
        rows = np.arange(start, min(start + block, len(table)))
        clients = np.repeat(c["client"][rows].astype(np.int64), 2)
        handles = np.stack([c["h0"][rows], c["h1"][rows]], axis=1).ravel().astype(np.int64)
        seqs = np.repeat(c["enter_seq"][rows].astype(np.int64), 2)
        mine = clients >= 0
        got = names.find(clients[mine], handles[mine], seqs[mine]).tolist()
        for client, handle, seq, name in zip(clients[mine].tolist(), handles[mine].tolist(), seqs[mine].tolist(), got):
            want = newest(objects, int(names.client_map[client]), handle, seq)
            assert name == (None if want is None else every[want])
            found += want is not None
        asked += len(got)
        names.past(int(rows[-1]) + 1)
        kept.append(len(names._keys))
    assert found > asked // 4  # the handles named objects, most of them
    assert kept[-1] == 0  # every client's last call is past: nothing kept
    if trace == "cuda-streams-3x-sequential":  # one client after another: at most one client's objects at a time
        assert max(kept) < len(np.unique(np.asarray(objects.client) << 32 | np.asarray(objects.handle)))


def test_objects_out_of_allocation_order_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path))
    model = load_objects(str(captures.path("cuda-streams")))
    assert isinstance(model, ObjectsModel)
    columns = model.columns
    seqs = np.array(columns.alloc_seq)[::-1].copy()
    shuffled = ObjectColumns(**{**{name: getattr(columns, name) for name in columns.__dataclass_fields__},
                                "alloc_seq": seqs})
    with pytest.raises(ValueError, match="allocation order"):
        ObjectNames(model.table, shuffled)
