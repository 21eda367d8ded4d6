"""``rmtrace stats`` folds only what its table needs, and says what the whole fold would.

Its numbers are the call table's and the processes', clients' and RM objects' (``session_stats``), so
with the cache cold it folds only the calls that make those (``rmtrace.session.model.load_objects``:
``fold_table``'s ``OBJECTS_ONLY``).  On every committed capture and replay trace and on constructed
boots (GSP, sema, a wedge), its result, and ``stats --json`` as the command prints it, are what the
whole model (``load_session``) gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmtrace import captures, jsonschema
from rmtrace.analysis.stats import session_stats
from rmtrace.cli.main import main
from rmtrace.session import load_session
from rmtrace.session.model import ObjectsModel, load_objects
from tests.golden_outputs import COMMITTED_TRACES


def same_stats(path: Path) -> None:
    whole = session_stats(load_session(path, cache=False))
    part = load_objects(path, cache=False)
    assert isinstance(part, ObjectsModel)  # the cache is off: the objects' fold, not the whole model
    assert session_stats(part) == whole


@pytest.mark.parametrize("path", COMMITTED_TRACES, ids=lambda p: Path(p).name)
def test_stats_from_the_objects_fold_are_the_whole_folds(path):
    same_stats(path)


def test_stats_of_constructed_boots(sequential_boots):
    for path in sequential_boots:
        same_stats(path)


def test_the_command_prints_the_whole_models_stats(capsys, monkeypatch, sequential_boots):
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    for path in [sequential_boots[0], captures.path("cuda-streams-3x-sequential")]:
        assert main(["stats", "--json", str(path)]) == 0
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert printed == json.loads(json.dumps(list(jsonschema.stats(session_stats(load_session(path, cache=False))))))
