"""The fold over a table loaded from the cache (its clients and processes mapped columns,
``rmtrace.columns.table.ClientColumns`` and ``ProcessColumns``) makes each client and process from
their columns a part at a time, as it reaches them, not once per look at one (a loaded table's
``clients[i]`` and ``processes[pid]`` read every column of them for each index); the model is the
one folded over the table built in memory."""

from __future__ import annotations

from collections import Counter

import pytest
from rmtrace.decoders import decoders_for

import rmtrace.columns.fold as fold_module
from rmtrace.columns.cache import build_into, built_table, entry_key
from rmtrace.columns.table import ClientColumns, ProcessColumns
from rmtrace.session.model import fold_channels, fold_objects, fold_session
from rmtrace.trace import TraceReader

RECORDS = 20_000
"""Records of the replicated trace: a dozen clients, more processes."""
FOLDS = {"channels": fold_channels, "objects": fold_objects,
         "model": lambda reader, decoders, table: fold_session(reader, decoders, table, 20_000)}


@pytest.mark.parametrize("fold", list(FOLDS))
def test_a_loaded_tables_clients_and_processes_are_made_a_part_at_a_time(replicated, fold, monkeypatch, tmp_path):
    monkeypatch.setattr(fold_module, "CLIENTS_MADE", 4)
    path = replicated(RECORDS)
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    whole = FOLDS[fold](reader, decoders, built_table(reader, decoders, stash=True, params=fold != "objects"))
    table = build_into(tmp_path, entry_key(reader, decoders), reader, decoders, params=fold != "objects")
    assert isinstance(table.clients, ClientColumns) and isinstance(table.processes, ProcessColumns)
    made: Counter = Counter()
    for cls in (ClientColumns, ProcessColumns):
        monkeypatch.setattr(cls, "_made", _counted(cls._made, cls.__name__, made))
    loaded = FOLDS[fold](reader, decoders, table)
    clients, processes = len(table.clients), len(table.processes)
    assert clients > 10 and processes > 10
    # a part of 4 clients at a time (one more where a part ends mid-way), and a pass over them all for the
    # effects' client ids and one for the clients' ends; the processes' few passes of a part each
    assert made["ClientColumns"] <= clients // 4 + 4 and made["ProcessColumns"] <= 4
    assert loaded.clients == whole.clients
    assert list(loaded.processes.items()) == list(whole.processes.items())


def _counted(made, name: str, counts: Counter):
    def counted(self, *args):
        counts[name] += 1
        return made(self, *args)
    return counted
