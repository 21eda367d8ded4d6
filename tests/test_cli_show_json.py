"""``rmtrace show --json`` writes its call lines as bytes, ``jsonschema.LINES_AT_ONCE`` at a time
(``write_lines``): the same lines in batches of any size (the last, partial one included), --limit cutting
them at the same call."""

from __future__ import annotations

import json

import pytest

from rmtrace import captures, jsonschema
from rmtrace.cli.main import main


@pytest.mark.parametrize("name", ["nvidia-smi-q", "cuda-streams"])
def test_show_json_lines_in_batches_of_any_size(name, capsys, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    path = str(captures.path(name))
    assert main(["show", "--json", path]) == 0
    whole = capsys.readouterr().out
    lines = whole.splitlines()
    assert len(lines) > 7 and all(json.loads(line)["type"] == "call" for line in lines)
    size = len(lines)
    for at_once in (1, 2, 3, size - 1, size, size + 1):
        monkeypatch.setattr(jsonschema, "LINES_AT_ONCE", at_once)
        assert main(["show", "--json", path]) == 0
        assert capsys.readouterr().out == whole
        assert main(["show", "--json", "--limit", "5", path]) == 0
        assert capsys.readouterr().out.splitlines() == lines[:5]
