"""jsonl: the objects `rmtrace show --json` prints, line for line; progress shows on a terminal only."""

from __future__ import annotations

import io

from rmtrace.cli.main import main
from rmtrace.export.progress import Progress
from tests.export_support import legacy_replay, shipped  # noqa: F401 -- legacy_replay is a fixture


def test_jsonl_is_show_json(tmp_path, capsys, legacy_replay):  # noqa: F811
    for path in (str(shipped("cuda-streams")), legacy_replay):
        out = tmp_path / "out.jsonl"
        assert main(["export", path, "--format", "jsonl", "-o", str(out), "--force"]) == 0
        capsys.readouterr()
        assert main(["show", path, "--json"]) == 0
        shown = capsys.readouterr().out
        assert out.read_text() == shown and shown.count("\n") > 100


def test_progress_draws_on_a_terminal_and_stays_quiet_elsewhere():
    tty = io.StringIO()
    progress = Progress("rmtrace export", 5000, stream=tty, enabled=True, interval_s=0)
    assert sum(1 for _ in progress.count(range(5000))) == 5000
    progress.finish()
    lines = tty.getvalue().split("\r")
    assert lines[-1] == "rmtrace export: 5,000 of 5,000 records (100%), " + lines[-1].split(", ", 1)[1]
    assert "records/s" in lines[-1] and tty.getvalue().endswith("\n") and len(lines) > 2
    pipe = io.StringIO()  # not a terminal: nothing
    quiet = Progress("rmtrace export", 5000, stream=pipe)
    assert sum(1 for _ in quiet.count(range(5000))) == 5000
    quiet.finish()
    assert pipe.getvalue() == ""
