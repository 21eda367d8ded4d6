"""Where a command's trace comes from: a path, a shipped capture's name (diff too), '-' for stdin, or, with no
FILE, the shipped default, which a terminal is told about on the first line."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from rmtrace import captures
from rmtrace.cli.main import main
from rmtrace.exitcodes import ExitCode

RMTRACE = [sys.executable, "-m", "rmtrace.cli.main"]


def test_diff_takes_shipped_capture_names(capsys):
    assert main(["diff", "cuda-streams", "cuda-streams"]) == ExitCode.OK
    assert "no divergence" in capsys.readouterr().out
    assert main(["diff", "cuda-streams", "nvidia-smi-q", "--json"]) == ExitCode.FOUND
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["type"] == "divergence"


def test_a_dash_reads_the_trace_from_stdin(tmp_path):
    path = captures.path("nvidia-smi-q")
    expected = subprocess.run([*RMTRACE, "info", "--json", path], capture_output=True, text=True, check=True)
    want = json.loads(expected.stdout)
    with open(path, "rb") as redirected:  # `rmtrace info - < FILE`: stdin is the file itself
        got = subprocess.run([*RMTRACE, "info", "--json", "-"], stdin=redirected, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert {k: v for k, v in json.loads(got.stdout).items() if k != "file"} == \
        {k: v for k, v in want.items() if k != "file"}
    piped = subprocess.run(f"cat {path} | {sys.executable} -m rmtrace.cli.main diff - nvidia-smi-q",
                           shell=True, capture_output=True, text=True)
    assert piped.returncode == ExitCode.OK and "no divergence" in piped.stdout, piped.stderr
    spooled = subprocess.run(f"cat {path} | {sys.executable} -m rmtrace.cli.main show - --limit 1",
                             shell=True, capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert spooled.returncode == 0 and spooled.stdout.startswith("[471/471] +0.000ms · SYS_EXEC(")
    assert list(tmp_path.iterdir()) == []  # the pipe's copy is gone when rmtrace exits
    twice = subprocess.run([*RMTRACE, "diff", "-", "-"], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert twice.returncode == ExitCode.ERROR and "give - for A or for B, not both" in twice.stderr


def run_in_terminal(*argv: str) -> str:
    """What a command prints when its stdout and stderr are a terminal (a pty)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*RMTRACE, *argv], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("argv", [
    ["info"], ["show", "--limit", "3"], ["stats"], ["wedges"], ["diff", "nvidia-smi-q"], ["replay", "-o", "{tmp}/r.trace"],
    ["export", "-f", "jsonl", "-o", "-"], ["export", "-f", "parquet", "-o", "{tmp}/dataset"],
], ids=lambda argv: " ".join(argv[:3]))
def test_every_command_that_takes_a_trace_reads_it_from_a_pipe(tmp_path, argv):
    """'-' as FILE, from a pipe (spooled: the readers seek); reduce reads its trace as replay does."""
    args = " ".join([argv[0], "-", *argv[1:]]).format(tmp=tmp_path)
    proc = subprocess.run(f"cat {captures.path('nvidia-smi-q')} | {sys.executable} -m rmtrace.cli.main {args}",
                          shell=True, capture_output=True, text=True, timeout=300)
    assert proc.returncode == ExitCode.OK and "error" not in proc.stderr, (args, proc.stderr)
    if argv[-1] == "{tmp}/dataset":
        assert list((tmp_path / "dataset").glob("host=*/day=*/*.parquet"))
    else:
        assert proc.stdout.strip(), args


def test_without_file_a_terminal_is_told_on_the_first_line():
    out = run_in_terminal("info")
    assert out.splitlines()[0] == ("# no FILE given: this is the shipped capture cuda-streams-3x-sequential.trace "
                                   "(list them with 'rmtrace info --shipped')")
    assert out.count("no FILE given") == 1
    piped = subprocess.run([*RMTRACE, "info"], capture_output=True, text=True)
    assert "no FILE given" not in piped.stdout and "no FILE given" in piped.stderr
    assert piped.stdout.splitlines()[0].startswith("file ")


def test_stdin_is_one_trace(capsys):
    assert main(["tui", "-", "-"]) == ExitCode.ERROR  # the TUI reads its keys from the terminal, a trace from -
    assert "stdin holds one trace: give - once" in capsys.readouterr().err
