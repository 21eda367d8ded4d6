"""The effects the semantic layer reads from the call table's columns, against interpreting each call.

``rmtrace.semantics.effects.row_effects`` says, for many calls at once, what the readers of
``rmtrace.semantics.interpret`` say one call at a time: which object a call allocated, freed or
duplicated, which channel UVM registered.  Every call of every test trace is interpreted here from
its records (``Interpreter.interpret``, the slow way); each call the fold reads as columns
(``rmtrace.columns.fold._by_effects``) must hold, of the events the fold applies, exactly the one
its effect row stands for (none when it failed), followed by what its params say where they say more
(a channel's or TSG's allocation, a control the model reads: ``_EffectRows.params_event``, from the
params buffers read where they lie).
"""

from __future__ import annotations

import numpy as np
import pytest
from rmtrace.decoders import decoders_for

from rmtrace.columns.argspec import Plan
from rmtrace.columns.fold import Need, _by_effects, _EffectRows, needs
from rmtrace.columns.params import ParamsReader
from rmtrace.semantics import Interpreter
from rmtrace.semantics import events as ev
from rmtrace.semantics.effects import CATEGORIES, NO_CLASS, EffectKind, Effects
from rmtrace.session.fold import EFFECTS, Folder
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader
from tests.test_columns import table_of
from tests.test_columns_fold import CASES, paths  # noqa: F401  (the traces fixture)


def events_of(e: Effects, i: int, rows: _EffectRows) -> list[ev.Event]:
    """Effect row ``i`` as the events it stands for: its own (none for a control), then its params'."""
    own = [] if e.kind[i] == EffectKind.CONTROL else [event_of(e, i)]
    more = rows.params_event(i)
    return own + ([more] if more is not None else [])


def event_of(e: Effects, i: int) -> ev.Event:
    """Effect row ``i`` as the event it stands for."""
    kind, h_client, handle, parent = (int(a[i]) for a in (e.kind, e.h_client, e.handle, e.parent))
    if kind in (EffectKind.ALLOCATED, EffectKind.ALLOCATED_MEMORY):
        cls = int(e.class_id[i])
        return ev.ObjectAllocated(CATEGORIES[int(e.category[i])], h_client, handle, parent or None,
                                  None if cls == NO_CLASS else cls)
    if kind == EffectKind.FREED:
        return ev.ObjectFreed(h_client, handle)
    if kind == EffectKind.DUPLICATED:
        return ev.ObjectDuplicated(h_client, handle, parent or None, int(e.src_client[i]), int(e.src_handle[i]))
    if kind == EffectKind.UVM_CHANNEL_REGISTERED:
        return ev.UvmChannelRegistered(h_client, handle)
    assert kind == EffectKind.UVM_CHANNEL_UNREGISTERED
    return ev.UvmChannelUnregistered(h_client, handle)


@pytest.mark.parametrize("name", CASES)
def test_effects_read_from_columns_are_the_calls_events(paths, name):  # noqa: F811
    path = paths[name]
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    interpreter = Interpreter(decoders)
    slow = [interpreter.interpret(call) for call in decoders.calls(reader.records(), window=1 << 62)]
    table = table_of(path)
    need = needs(table, Plan(decoders), interpreter.roles)
    found = _by_effects(table, np.flatnonzero(need == Need.ROW), Plan(decoders), interpreter.roles)
    e = found.effects
    assert len(e), "no call read as columns"
    rows = _EffectRows(Folder(decoders, Timeline()), table, found, ParamsReader(reader))
    effect_of = dict(zip(found.rows[e.at].tolist(), range(len(e))))
    kinds = set()
    for row in found.rows.tolist():
        held = [x for x in slow[row].effective() if type(x) in EFFECTS]
        expected = events_of(e, effect_of[row], rows) if row in effect_of else []
        assert held == expected, (row, slow[row].decoded.name)
        kinds |= {type(x) for x in held}
    if name == "cuda-streams.trace":  # every kind the fold reads so, channels and their controls too
        assert {ev.ObjectAllocated, ev.ObjectFreed, ev.ChannelAllocated, ev.ChannelGroupAllocated,
                ev.WorkTokenIssued} <= kinds, kinds


@pytest.mark.parametrize("name", CASES)
def test_effects_worked_out_in_blocks_are_those_of_one_block(paths, name, monkeypatch):  # noqa: F811
    """``_by_effects`` works a block of rows at a time; blocks of a few rows give the rows and effects
    one block of them all gives (the shipped traces are smaller than a real block)."""
    import rmtrace.columns.fold as fold
    reader = TraceReader(paths[name])
    decoders = decoders_for(reader)
    table = table_of(paths[name])
    roles = Folder(decoders, Timeline()).interpreter.roles
    plan = Plan(decoders)
    rows = np.flatnonzero(needs(table, plan, roles) == Need.ROW)
    whole = _by_effects(table, rows, plan, roles)
    monkeypatch.setattr(fold, "EFFECTS_BLOCK", 7)
    blocks = _by_effects(table, rows, plan, roles)
    assert len(whole.effects) and len(rows) > 7
    assert blocks.rows.tolist() == whole.rows.tolist()
    for field in Effects.__dataclass_fields__:
        got, want = getattr(blocks.effects, field), getattr(whole.effects, field)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), field
