"""A fold over the call table a block of rows at a time makes what one fold makes.

``TableFold.advance(table, until=stop)`` folds the rows before ``stop`` only, as the streaming
exports fold (``rmtrace.export.fold.TableStream``); it makes the processes and clients the table
saw before ``stop`` from cursors over ``table.processes`` (sorted once by first row) and
``table.clients`` (in row order).  Blocks of a few rows put a block's end between every process's
and client's first rows: each must still be made once, in order, where the one fold makes it.
"""

from __future__ import annotations

import pytest
from rmtrace.decoders import decoders_for

from rmtrace.columns.fold import TableFold
from rmtrace.columns.live import TransitionLog
from rmtrace.session.fold import Folder
from rmtrace.session.planned import client_ids
from rmtrace.trace import TraceReader
from tests.golden_outputs import plain
from tests.test_columns import CAPTURES, table_of


def _folded(name: str, block: int | None) -> dict:
    path = next(p for p in CAPTURES if p.name == name)
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    table = table_of(path)
    log = TransitionLog()
    folder = Folder(decoders, log, client_ids(reader.meta))
    fold = TableFold(folder, reader)
    if block is not None:
        for stop in range(block, len(table), block):
            fold.advance(table, final=True, until=stop)
    fold.advance(table, final=True)
    return {"processes": [plain(p) for p in folder.processes.values()],
            "clients": [plain(c) for c in folder.clients.values()],
            "objects": [plain(o) for o in folder.object_list],
            "transitions": [plain(t) for t in log.log]}


@pytest.mark.parametrize("name", [p.name for p in CAPTURES])
def test_blocks_of_rows_fold_as_one(name):
    whole = _folded(name, None)
    assert whole["processes"] and whole["clients"]
    assert _folded(name, 3) == whole
