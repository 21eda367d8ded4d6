"""docs/exit-codes.md is rmtrace.exitcodes.ExitCode, and a real command gives every row of it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmtrace import captures
from rmtrace.cli.main import main
from rmtrace.exitcodes import ExitCode

DOC = Path(__file__).resolve().parent.parent / "docs" / "exit-codes.md"


def rmtrace(capsys, *argv) -> int:
    status = main([str(a) for a in argv])
    capsys.readouterr()
    return status


def spawn(*argv, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rmtrace.cli.main", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def finished(*argv, timeout: float = 60, **kwargs) -> tuple[int, str]:
    proc = spawn(*argv, **kwargs)
    _out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def test_the_document_is_the_table_in_code():
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", DOC.read_text(), re.M)
    assert [(int(n), name) for n, name in rows] == [(int(c), c.name) for c in ExitCode]


def test_0_ok(capsys):
    assert rmtrace(capsys, "info", "nvidia-smi-q") == ExitCode.OK
    assert rmtrace(capsys, "wedges", "nvidia-smi-q") == ExitCode.OK


def test_1_found_slow_calls_are_no_wedge(capsys):
    assert rmtrace(capsys, "wedges", "nvidia-smi-q", "--slow", "1ms") == ExitCode.FOUND


def test_1_found_runs_diverge(capsys):
    assert rmtrace(capsys, "diff", captures.path("cuda-streams"), captures.path("nvidia-smi-q")) == ExitCode.FOUND


def test_2_error(capsys, tmp_path):
    assert rmtrace(capsys, "info", tmp_path / "missing.trace") == ExitCode.ERROR
    with pytest.raises(SystemExit) as usage:  # argparse's own usage errors
        main(["show", "--no-such-option"])
    assert usage.value.code == ExitCode.ERROR


def test_3_wedged(capsys, tmp_path):
    replayed = tmp_path / "legacy.trace"
    assert rmtrace(capsys, "replay", "cuda-streams-3x-sequential", "--schedule", "sequential",
                   "--against", "model:legacy", "-o", replayed) == ExitCode.WEDGED
    assert rmtrace(capsys, "wedges", replayed) == ExitCode.WEDGED


def test_124_a_planned_duration_stop(tmp_path):
    status, err = finished("record", "-o", tmp_path / "d.trace", "--duration", "0.3s", "--", "sleep", "30")
    assert status == ExitCode.TIMEOUT, err
    assert (tmp_path / "d.trace").is_file()


def test_126_a_program_that_cannot_run(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    status, err = finished("record", "-o", tmp_path / "x.trace", "--", script)
    assert status == ExitCode.CANNOT_RUN and "permission denied" in err and "Traceback" not in err


def test_127_no_such_program(tmp_path):
    status, err = finished("record", "-o", tmp_path / "x.trace", "--", tmp_path / "nonexistent-program")
    assert status == ExitCode.NOT_FOUND and "no such program" in err and "Traceback" not in err
    assert not (tmp_path / "x.trace").exists()


def test_130_interrupted(tmp_path):
    # A command reading its trace from a pipe that stays open; Ctrl-C while it waits for more.
    read, write = os.pipe()
    proc = spawn("show", "-", stdin=read)
    os.close(read)
    os.write(write, bytes(1 << 17))  # more than a pipe holds: returns once rmtrace is reading
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    os.close(write)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    trace = tmp_path / "i.trace"
    recorder = spawn("record", "-o", trace, "--", "sleep", "30")
    deadline = time.monotonic() + 30
    while not trace.exists() and time.monotonic() < deadline:  # the recorder catches SIGINT once it writes
        time.sleep(0.05)
    time.sleep(0.2)
    recorder.send_signal(signal.SIGINT)
    _out, err = recorder.communicate(timeout=30)
    assert recorder.returncode == ExitCode.INTERRUPTED, err


@pytest.mark.parametrize("script, status", [("exit 5", 5), ("kill -9 $$", 128 + signal.SIGKILL)])
def test_record_passes_the_commands_status_through(tmp_path, script, status):
    assert finished("record", "-o", tmp_path / "s.trace", "--", "sh", "-c", script)[0] == status
