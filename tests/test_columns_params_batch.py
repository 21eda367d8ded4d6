"""Params buffers found and read for many records at once mean what one buffer's view means.

The fold reads the params of a block of effects at once (``ParamsReader.after_buffers`` walks the
records' buffer headers with numpy, ``params_values`` reads members a column at a time).  For the
exit and enter of every RM allocation and control of every capture, read from the stash and from
the trace's chunks: the buffer found is the one ``ParamsReader.buffer`` finds, and every member of its layout
(and whether it is there) is what ``params_view`` of that buffer gives.
"""

from __future__ import annotations

import numpy as np
import pytest
from rmtrace.decoders import decoders_for
from rmtrace.decoders.context import context
from rmtrace.decoders.roles import EscapeRole, roles

from rmtrace.columns.cache import built_table
from rmtrace.columns.params import ParamsReader, params_values
from rmtrace.columns.view import layout_members, params_view
from rmtrace.record import Role, Source, When
from rmtrace.trace import TraceReader
from tests.test_columns import CAPTURES


@pytest.mark.parametrize("stashed", [True, False], ids=["stash", "chunks"])
@pytest.mark.parametrize("name", [p.name for p in CAPTURES])
def test_params_of_many_records_are_each_records_params(name, stashed):
    path = next(p for p in CAPTURES if p.name == name)
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    table = built_table(reader, decoders, stash=stashed, params=stashed)
    escapes = roles(decoders.profile).escapes
    c = table.columns
    allocs = [op for op, role in escapes.items() if role is EscapeRole.ALLOC]
    controls = [op for op, role in escapes.items() if role is EscapeRole.CONTROL]
    rows = np.flatnonzero((c["source"] == Source.RM) & np.isin(c["op"], allocs + controls) & (c["exit_seq"] >= 0))
    # their enters too: a BEFORE copy is no AFTER one (what the stash lacks is read from the chunks)
    seqs = np.concatenate([c["exit_seq"][rows], c["enter_seq"][rows]]).astype(np.int64)
    keys = np.tile(c["key"][rows].astype(np.int64) & 0xFFFFFFFF, 2)
    params_roles = np.tile(np.where(np.isin(c["op"][rows], controls), int(Role.PARAMS), int(Role.ALLOC_PARAMS)), 2)
    defs, profile = context(decoders.profile).defs, decoders.profile
    params = ParamsReader(reader, table.stash)
    found = params.after_buffers(seqs, params_roles)
    values = params_values(defs, profile, found, params_roles, keys)
    read = 0
    for i, (seq, role, key) in enumerate(zip(seqs.tolist(), params_roles.tolist(), keys.tolist())):
        one = params.buffer(seq, role, When.AFTER)
        assert (found.source[i] >= 0) == (one is not None)
        if one is None:
            continue
        assert found.data(i) == one.data and found.flags[i] == one.flags
        view = params_view(defs, profile, one, key)
        assert (values[i] is None) == (view is None)
        if view is None:
            continue
        read += 1
        names = [*layout_members(view._layout), *view, "noSuchMember"]
        assert [name in values[i] for name in names] == [name in view for name in names]
        assert {name: values[i][name] for name in names if name in view} == {name: view[name] for name in names
                                                                             if name in view}
    assert read or name == "nvidia-smi-q.trace"  # every CUDA capture allocates channels
