"""Which calls the fold over the call table runs Python for, against interpreting every call.

``rmtrace.columns.fold.needs`` sorts the table's rows: ``NONE`` (skipped),
``ROW`` (its meaning read from the row and the params it names) and
``RECORDS`` (decoded and interpreted as ever).  Every call of every test trace
is interpreted here from its records, the slow way (``Interpreter.interpret``):
a skipped call must have no effect the fold applies, and a call read from its
row must mean what its records mean, event for event.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rmtrace.decoders import decoders_for

from rmtrace.columns.argspec import Plan
from rmtrace.columns.fold import Need, _blocks, needs
from rmtrace.columns.stash import Rereader
from rmtrace.semantics import CallMeaning, Interpreter
from rmtrace.semantics import events as ev
from rmtrace.session.fold import EFFECTS, Folder
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader
from tests.scenarios import sequential
from tests.test_columns import CAPTURES, table_of

CASES = [p.name for p in CAPTURES] + ["wedged.trace"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, Path]:
    found = {p.name: p for p in CAPTURES}
    found["wedged.trace"] = sequential(tmp_path_factory.mktemp("fold") / "wedged.trace", wedge=True)
    return found


def has_effect(meaning: CallMeaning) -> bool:
    """Whether folding ``meaning`` can change the model (``TableFold._apply``: a GSP session, an effect)."""
    return meaning.first(ev.GspSessionStarted) is not None or any(type(e) in EFFECTS for e in meaning.effective())


@pytest.mark.parametrize("name", CASES)
def test_rows_the_fold_skips_or_reads_from_the_row(paths, name):
    path = paths[name]
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    slow = [Interpreter(decoders).interpret(call) for call in decoders.calls(reader.records(), window=1 << 62)]
    table = table_of(path)
    assert len(table) == len(slow)  # row i is the i-th call pair_calls yields
    folder = Folder(decoders, Timeline(), client_ids(reader.meta))
    need = needs(table, Plan(decoders), folder.interpreter.roles)
    skipped = np.flatnonzero(need == Need.NONE).tolist()
    assert skipped and all(not has_effect(slow[row]) for row in skipped), \
        [slow[row].decoded.name for row in skipped if has_effect(slow[row])][:5]
    by_row = np.flatnonzero(need == Need.ROW)
    assert by_row.size
    for row, _, meaning in _blocks(table, by_row, need[by_row], folder, Plan(decoders), Rereader(reader, None)):
        assert meaning.events == slow[row].events, (row, meaning.decoded.name)


@pytest.mark.parametrize("name", CASES)
def test_the_stash_holds_the_records_the_fold_reads_again(paths, name):
    """A table built for a fold keeps every record of the calls the fold decodes, byte for byte as the
    trace holds them, and the fold over it makes the model the fold reading the trace again makes."""
    from rmtrace import jsonschema
    from rmtrace.analysis.wedges import find_wedges
    from rmtrace.columns.table import CallTableBuilder
    from rmtrace.session.model import fold_channels, fold_objects

    reader = TraceReader(paths[name])
    decoders = decoders_for(reader)

    def built(stash: bool):
        builder = CallTableBuilder(reader, decoders, client_ids=client_ids(reader.meta), stash=stash)
        builder.update()
        return builder.table()
    table = built(True)
    assert table.stash is not None
    need = needs(table, Plan(decoders), Folder(decoders, Timeline()).interpreter.roles)
    wanted = {seq for row in np.flatnonzero(need == Need.RECORDS).tolist() for seq, _ in table.records_of(row)}
    kept = [seq for seq in sorted(wanted) if table.stash.find(seq) is not None]
    assert kept, "the fold decodes some calls of every test trace"
    assert len(kept) >= 0.9 * len(wanted)  # the rest: lone records of row operations, read from the trace
    for seq in kept:
        assert Rereader(reader, table.stash).record_at(seq) == reader.record_at(seq)
    stashed, plain = fold_channels(reader, decoders, table), fold_channels(reader, decoders, built(False))
    assert table.stash is None  # let go once folded
    assert ([jsonschema.wedge(w, stashed.start_ns) for w in find_wedges(stashed)]
            == [jsonschema.wedge(w, plain.start_ns) for w in find_wedges(plain)])
    assert fold_objects(reader, decoders, built(True)).object_counts() == \
        fold_objects(reader, decoders, built(False)).object_counts()


@pytest.mark.parametrize("name", CASES)
def test_a_stash_for_params_holds_every_exit_the_fold_reads_params_from(paths, name):
    """A table built for a fold that reads params keeps the last record of every call whose params say more
    than its row (``Effects.params``), byte for byte, and the model folded over it is the one folded reading
    the trace again."""
    from rmtrace import jsonschema
    from rmtrace.analysis.wedges import find_wedges
    from rmtrace.columns.fold import _by_effects, _last_records
    from rmtrace.columns.table import CallTableBuilder
    from rmtrace.session.model import SNAPSHOT_EVERY, fold_channels, fold_session

    reader = TraceReader(paths[name])
    decoders = decoders_for(reader)

    def built(params: bool):
        builder = CallTableBuilder(reader, decoders, client_ids=client_ids(reader.meta), stash=True, params=params)
        builder.update()
        return builder.table()
    table = built(True)
    roles = Folder(decoders, Timeline()).interpreter.roles
    need = needs(table, Plan(decoders), roles)
    found = _by_effects(table, np.flatnonzero(need == Need.ROW), Plan(decoders), roles)
    rows = found.rows[found.effects.at[found.effects.params]]
    wanted = _last_records(table, rows, table.gather(rows, ("exit_seq", "enter_seq"))).tolist()
    if name != "nvidia-smi-q.trace":  # nvidia-smi makes no channel
        assert wanted, "a CUDA trace allocates channels"
    assert table.stash is not None
    for seq in wanted:
        kept = table.stash.find(seq)
        assert kept is not None, f"record {seq} was not kept"
        assert Rereader(reader, table.stash).record_at(seq) == reader.record_at(seq)
    plain = built(False)
    assert not wanted or any(plain.stash.find(seq) is None for seq in wanted)  # the rule is what kept them
    for fold in (fold_channels, lambda r, d, t: fold_session(r, d, t, SNAPSHOT_EVERY)):
        stashed, again = fold(reader, decoders, built(True)), fold(reader, decoders, built(False))
        assert ([jsonschema.wedge(w, stashed.start_ns) for w in find_wedges(stashed)]
                == [jsonschema.wedge(w, again.start_ns) for w in find_wedges(again)])
        assert stashed.channels == again.channels and stashed.ranks == again.ranks


def _model_of(path: Path, channels_only: bool, cache: Path, monkeypatch) -> tuple[list[tuple], list[tuple]]:
    """The model folded with the cache cold (the fold that keeps a stash: a cache entry's build)."""
    from rmtrace.session.model import load_channels, load_session
    monkeypatch.setenv("RMTRACE_CACHE", str(cache))
    model = (load_channels if channels_only else load_session)(path)
    transitions = [(t.t_ns, t.seq, t.entity, t.attr, repr(t.value)) for t in model.transitions]
    objects = [] if channels_only else sorted(repr(o) for o in model.objects.values())
    return transitions, objects


@pytest.mark.parametrize("channels_only", [False, True], ids=["model", "channels"])
@pytest.mark.parametrize("name", CASES)
def test_a_stash_let_go_of_a_segment_at_a_time_folds_the_same(paths, name, channels_only, monkeypatch, tmp_path):
    """The stash in segments of one record each and the fold's blocks of 4 rows, so its segments are let go of as the
    fold moves on (``forget_before``) and a record asked for again comes from the trace: the same model as the
    fold with one segment for the whole trace (every shipped capture fits in one of ~1 MB)."""
    import rmtrace.columns.fold as fold
    import rmtrace.columns.stash as stash

    whole = _model_of(paths[name], channels_only, tmp_path / "one", monkeypatch)
    let_go: list[int] = []
    forget_before = stash.RecordStash.forget_before

    def counted(self: stash.RecordStash, seq: int) -> None:
        forget_before(self, seq)
        let_go.append(sum(segment is None for segment in self._segments))

    monkeypatch.setattr(stash, "SEGMENT", 1)  # each record a segment of its own
    monkeypatch.setattr(fold, "DECODE_BLOCK", 4)
    monkeypatch.setattr(stash.RecordStash, "forget_before", counted)
    assert _model_of(paths[name], channels_only, tmp_path / "segments", monkeypatch) == whole
    assert let_go  # the fold moved on (once, for a trace whose calls fit one block: nothing behind it yet)
    assert len(let_go) == 1 or max(let_go) > 0  # segments were let go of, and the fold read on without them
