"""``rmtrace`` as the program (``main()`` reading ``sys.argv``) freezes what it made before the interpreter's exit,
whose last collection would walk it all (``rmtrace.cli.main.main``), whether the command succeeds or fails; a
caller that goes on (``main([...])``) has nothing frozen behind its back."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from rmtrace import captures
from rmtrace.cli.main import main

SCRIPT = """\
import contextlib, gc, io, sys
from rmtrace.cli.main import main
sys.argv = ["rmtrace", *sys.argv[1:]]
before = gc.get_freeze_count()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    status = main()
print(before, gc.get_freeze_count(), status)
"""


@pytest.mark.parametrize("args, status", [(["stats", "--json"], 0), (["wedges"], 0),
                                          (["stats", "--json", "/nonexistent.trace"], 2)])
def test_the_program_freezes_before_it_exits(args, status, tmp_path):
    command = args if args[-1].endswith(".trace") else [*args, str(captures.path("cuda-streams-3x-sequential"))]
    done = subprocess.run([sys.executable, "-c", SCRIPT, *command], capture_output=True, text=True, check=True,
                          env={**os.environ, "RMTRACE_CACHE": str(tmp_path / "cache")})
    before, after, got = done.stdout.split()
    assert int(before) == 0 and int(after) > 10_000  # the imports' and the command's objects, all frozen
    assert int(got) == status


def test_a_caller_that_goes_on_has_nothing_frozen(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    before = gc.get_freeze_count()
    assert main(["stats", "--json", str(captures.path("cuda-streams-3x-sequential"))]) == 0
    assert gc.get_freeze_count() == before
    assert capsys.readouterr().out
