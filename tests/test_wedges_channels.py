"""``rmtrace wedges`` folds only what its analysis reads, and says what the whole fold would.

Its findings come from the model's channels, ranks, host state, GSP exchanges, processes and clients and
from the call table (``rmtrace.analysis.wedges``), so with the cache cold it folds only the calls that
make those (``rmtrace.session.model.load_channels``: ``fold_table``'s ``CHANNELS_ONLY``).  On every
committed capture and replay trace and on constructed boots (GSP, sema, a wedge, a drain hold), its
wedges and cut calls, the channels and ranks it keeps, and ``wedges --json`` as the command prints it,
are what the whole model (``load_session``) gives.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmtrace import captures, jsonschema
from rmtrace.analysis.wedges import cut_by_end, find_wedges
from rmtrace.cli.main import main
from rmtrace.session import load_session
from rmtrace.session.entities import Channel, LaneState
from rmtrace.session.model import load_channels
from tests.golden_outputs import COMMITTED_TRACES

HOST_SIDE = (LaneState.FREED, LaneState.STALE, LaneState.WAITING, LaneState.COMPLETED, LaneState.PUBLISHED)
"""The states of a channel's lane ``CHANNELS_ONLY`` keeps as the whole fold does."""



def same_wedges(path: Path) -> None:
    whole = load_session(path, cache=False)
    part = load_channels(path, cache=False)
    assert len(part.object_list) <= len(whole.object_list)  # the cache is off: the channels' fold
    assert [w.to_dict() for w in find_wedges(part, slow_ns=1)] == [w.to_dict() for w in find_wedges(whole, slow_ns=1)]
    assert [c.to_dict() for c in cut_by_end(part)] == [c.to_dict() for c in cut_by_end(whole)]
    assert [_kept(c) for c in part.channels.values()] == [_kept(c) for c in whole.channels.values()]
    assert list(part.ranks.values()) == list(whole.ranks.values())
    assert part.gsp == whole.gsp and part.processes == whole.processes
    for chan in whole.channels.values():
        assert _host_side(part, chan.entity) == _host_side(whole, chan.entity)
    assert part.history("host") == whole.history("host")


def _kept(chan: Channel) -> tuple:
    """What the channels' fold keeps of a channel as the whole fold does (``CHANNELS_ONLY``)."""
    return (chan.id, chan.client_id, chan.handle, chan.h_client, chan.engine, chan.engine_type, chan.rank, chan.tsg,
            chan.ring_va)


def _host_side(model, entity: str) -> list[tuple]:
    """When a channel's lane came to a host-side state (or freed), and every detail it was given."""
    return [(t.t_ns, t.seq, t.attr, t.value) for t in model.history(entity)
            if t.attr == "detail" or (t.attr == "state" and t.value in HOST_SIDE)]


@pytest.mark.parametrize("path", COMMITTED_TRACES, ids=lambda p: Path(p).name)
def test_wedges_from_the_channels_fold_are_the_whole_folds(path):
    same_wedges(path)


def test_wedges_of_constructed_boots(sequential_boots):
    for path in sequential_boots:
        same_wedges(path)


def test_the_channels_fold_keeps_fewer_objects():
    path = captures.path("cuda-streams-3x-sequential")
    assert len(load_channels(path, cache=False).object_list) < len(load_session(path, cache=False).object_list)


def test_the_command_prints_the_whole_models_wedges(capsys, monkeypatch, sequential_boots):
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    for path in [sequential_boots[0], captures.path("cuda-streams-3x-sequential")]:
        main(["wedges", "--json", str(path)])
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        whole = load_session(path, cache=False)
        assert printed == json.loads(json.dumps([jsonschema.wedge(w, whole.start_ns) for w in find_wedges(whole)]))


def test_with_the_cache_cold_then_warm(tmp_path, monkeypatch, sequential_boots):
    """Cold, the table goes to the cache and only the channels are folded (no model is stored, so a later
    ``load_session`` folds the whole); warm, the stored model is the one read.  The wedges are the same."""
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    path = sequential_boots[0]
    whole = [w.to_dict() for w in find_wedges(load_session(path, cache=False))]
    cold = load_channels(path)
    assert not list((tmp_path / "cache").glob("*/model"))  # the channels' fold is not the model
    assert [w.to_dict() for w in find_wedges(cold)] == whole
    stored = load_session(path)  # folds the whole and stores it
    warm = load_channels(path)
    assert len(warm.object_list) == len(stored.object_list) > len(cold.object_list)
    assert [w.to_dict() for w in find_wedges(warm)] == whole


@pytest.mark.parametrize("first", ["objects", "channels"])
def test_a_second_wedges_loads_the_channels_fold_the_first_stored(tmp_path, monkeypatch, capsys, sequential_boots,
                                                                   first):
    """Whichever command made the entry (stats' objects-only fold, or wedges itself), the first channels'
    fold is stored beside the table (``entry/channels``, not as the whole model) and the next wedges loads
    it, folding nothing: the same wedges, channels, ranks and timeline, and ``wedges --json`` as printed."""
    import rmtrace.columns.fold as fold_module
    from rmtrace.session.model import load_objects
    cache = tmp_path / "cache"
    monkeypatch.setenv("RMTRACE_CACHE", str(cache))
    for path in [*sequential_boots, captures.path("cuda-streams-3x-sequential")]:
        (load_objects if first == "objects" else load_channels)(path)
        folded = load_channels(path)
        assert list(cache.glob("*/channels")) and not list(cache.glob("*/model"))
        main(["wedges", "--json", str(path)])
        with monkeypatch.context() as m:
            m.setattr(fold_module, "fold_table", _no_fold)
            main(["wedges", "--json", str(path)])
            printed = capsys.readouterr().out.splitlines()
            loaded = load_channels(path)
        assert printed[:len(printed) // 2] == printed[len(printed) // 2:]
        assert [w.to_dict() for w in find_wedges(loaded, slow_ns=1)] == \
            [w.to_dict() for w in find_wedges(folded, slow_ns=1)]
        assert list(loaded.channels.values()) == list(folded.channels.values())
        assert list(loaded.ranks.values()) == list(folded.ranks.values())
        assert list(loaded.transitions) == list(folded.transitions) and loaded.gsp == folded.gsp
        shutil.rmtree(cache)


def _no_fold(*args: object, **kwargs: object) -> None:
    raise AssertionError("folded: the entry held the channels' model")


def test_the_end_state_wedges_reads_is_state_at_the_end(sequential_boots):
    """``final_state`` (one pass, no snapshot) is ``state_at(end_ns)``, and at any time ``state_once`` is
    ``state_at``, with snapshots every few transitions on the way."""
    for path in [*sequential_boots, captures.path("cuda-streams-3x-sequential")]:
        model = load_session(path, cache=False, snapshot_every=7)
        assert model.final_state() == load_session(path, cache=False).state_at(model.end_ns)
        times = [t.t_ns for t in model.transitions]
        for t in [model.start_ns - 1, *times[:: max(1, len(times) // 9)], model.end_ns + 1]:
            assert model.timeline.state_once(t) == model.state_at(t)
