"""Commands import only what they use (issue 14: every command took 1.2-1.7 s to start).

What each command line loads is checked here, in a fresh interpreter each; how long the starts take is
measured by bench/cli_startup.py, beside `python -c pass`, never in a timed test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import contextlib, io, json, sys
from rmtrace.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""

HEAVY = ("construct", "zstandard", "elftools", "textual", "numpy", "pyarrow", "duckdb", "perfetto", "scapy",
         "rmtrace.trace", "rmtrace.record", "rmtrace.decoders", "rmtrace.session", "rmtrace.analysis",
         "rmtrace.replayer", "rmtrace.capture.recorder", "rmtrace.tui", "rmtrace.export", "rmtrace.columns")
"""What a command that does not need it must not load.  (rmtrace.capture.kmod's tables are read by the
decoders, rmtrace.decoders.kcall; the recorder behind the package is not.)"""


def loaded(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}


@pytest.mark.parametrize("argv", [["--help"], ["info", "--help"], ["show", "--help"], ["wedges", "--help"]])
def test_help_loads_no_library(argv):
    assert heavy(loaded(*argv)) == set()


def test_show_loads_the_reader_and_decoders_only():
    modules = loaded("show", "nvidia-smi-q")
    assert {m for m in modules if m.startswith("rmtrace.cli")} == {"rmtrace.cli", "rmtrace.cli.main",
                                                                     "rmtrace.cli.common", "rmtrace.cli.show"}
    assert {"rmtrace.trace", "rmtrace.decoders", "construct"} <= modules
    assert {m.split(".")[0] if not m.startswith("rmtrace.") else ".".join(m.split(".")[:2])
            for m in heavy(modules)} == {"construct", "zstandard", "rmtrace.trace", "rmtrace.record",
                                          "rmtrace.decoders"}
