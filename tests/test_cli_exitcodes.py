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
from rmtrace.record import SysOp

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


def per_command_cells() -> list[tuple[str, int]]:
    """(command, status) for every filled cell of the document's per-command table."""
    section = DOC.read_text().split("## Per command", 1)[1]
    head, _rule, *rows = [line for line in section.splitlines() if line.startswith("|")]
    statuses = [int(cell) for cell in head.strip("|").split("|")[1:]]
    cells = []
    for row in rows:
        commands, *meanings = (cell.strip() for cell in row.strip("|").split("|"))
        for command in re.findall(r"`([a-z]+(?: serve)?)", commands):
            cells += [(command, status) for status, meaning in zip(statuses, meanings) if meaning]
    return cells


def diverging_trace(path: Path) -> str:
    """A client whose control names a subdevice it never allocated: the model answers NV_ERR_OBJECT_NOT_FOUND
    where the recording said NV_OK."""
    from tests.cuda_traffic import Process, write_trace
    proc = Process(1447, 1_000_000_000)
    proc.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl", ret=3)
    proc.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", assigned=0xC1D00001)
    proc.control(3, 0xC1D00001, 0x5C0000EE, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", gpuInfoListSize=1)
    return write_trace(str(path), [proc])


LEGACY = ("cuda-streams-3x-sequential", "--schedule", "sequential", "--against", "model:legacy")
PER_COMMAND = {
    ("info", 0): ["info", "nvidia-smi-q"],
    ("show", 0): ["show", "nvidia-smi-q"],
    ("stats", 0): ["stats", "nvidia-smi-q"],
    ("profiles", 0): ["profiles", "list"],
    ("decoders", 0): ["decoders", "list"],
    ("export", 0): ["export", "nvidia-smi-q", "-f", "jsonl", "-o", "{tmp}/x.jsonl"],
    ("query", 0): ["query", "SELECT count(*) FROM calls", "{dataset}"],
    ("diff", 0): ["diff", "nvidia-smi-q", "nvidia-smi-q"],
    ("diff", 1): ["diff", "cuda-streams", "nvidia-smi-q"],
    ("wedges", 0): ["wedges", "nvidia-smi-q"],
    ("wedges", 1): ["wedges", "nvidia-smi-q", "--slow", "1ms"],
    ("wedges", 3): ["wedges", "{legacy}"],
    ("replay", 0): ["replay", "nvidia-smi-q", "-o", "{tmp}/r.trace"],
    ("replay", 1): ["replay", "{diverging}", "-o", "{tmp}/r.trace"],
    ("replay", 3): ["replay", *LEGACY, "-o", "{tmp}/r.trace"],
    ("reduce", 0): ["reduce", "{legacy}", "--schedule", "sequential", "--against", "model:legacy", "-o", "{tmp}/s.trace"],
    ("record", 0): ["record", "-o", "{tmp}/s.trace", "--", "true"],
    ("record", 1): ["record", "-o", "{tmp}/s.trace", "--", "sh", "-c", "exit 1"],
    ("record", 3): ["record", "-o", "{tmp}/s.trace", "--", "sh", "-c", "exit 3"],
}
"""A command line for each cell of the per-command table, run in process (record runs its own children)."""

ELSEWHERE = {
    ("tui", 0): "tests/test_tui_terminal.py: 'rmtrace tui; echo exited $?' in tmux prints 'exited 0' after q",
    ("model serve", 0): "test_model_serve_stops_with_0 below: a server's stop is Ctrl-C or SIGTERM",
    ("reduce", 1): "test_reduce_says_1_when_the_reduction_does_not_replay_the_same below",
}


def test_every_cell_of_the_per_command_table_has_a_command():
    assert sorted(per_command_cells()) == sorted([*PER_COMMAND, *ELSEWHERE])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("exitcodes")
    legacy = folder / "legacy.trace"
    assert main(["replay", *LEGACY, "-o", str(legacy)]) == ExitCode.WEDGED
    assert main(["export", "nvidia-smi-q", "-f", "parquet", "-o", str(folder / "dataset")]) == ExitCode.OK
    return {"legacy": str(legacy), "dataset": str(folder / "dataset"),
            "diverging": diverging_trace(folder / "diverging.trace")}


@pytest.mark.parametrize("cell", PER_COMMAND, ids=[f"{c}-{s}" for c, s in PER_COMMAND])
def test_each_command_gives_its_statuses(capsys, tmp_path, monkeypatch, inputs, cell):
    monkeypatch.setenv("RMTRACE_DECODER_DIR", str(tmp_path / "decoders"))  # decoders list: no user's own
    argv = [a.format(tmp=tmp_path, **inputs) for a in PER_COMMAND[cell]]
    assert rmtrace(capsys, *argv) == cell[1], argv


def test_model_serve_stops_with_0(tmp_path):
    for sig in (signal.SIGINT, signal.SIGTERM):
        server = spawn("model", "serve", "--socket", tmp_path / "model.sock")
        assert server.stdout is not None and server.stdout.readline().startswith("serving model:fixed on ")
        server.send_signal(sig)
        _out, err = server.communicate(timeout=30)
        assert server.returncode == ExitCode.OK, err


def test_reduce_says_1_when_the_reduction_does_not_replay_the_same(capsys, tmp_path, monkeypatch, inputs):
    """A target that answers the reduced trace otherwise when it is replayed alone (a service with state across
    connections): the real check's verdict, turned over, stands for it."""
    from rmtrace.replayer import reduce
    real = reduce.check
    monkeypatch.setattr(reduce, "check", lambda *args: not real(*args))
    status = main(["reduce", inputs["legacy"], "--schedule", "sequential", "--against", "model:legacy",
                   "-o", str(tmp_path / "s.trace")])
    out = capsys.readouterr().out
    assert status == ExitCode.FOUND and "does NOT wedge the same way" in out and (tmp_path / "s.trace").is_file()
