"""-o never writes over an input, an existing output needs --force, and an unnamed output never lands in the
working directory (rmtrace.cli.common.output_path, used by record, replay, reduce and profiles build)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmtrace import captures
from rmtrace.cli.main import main
from rmtrace.exitcodes import ExitCode
from rmtrace.trace import TraceReader


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A working directory and a data directory of the test's own."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("RMTRACE_DATA_DIR", str(tmp_path / "data"))
    return work


@pytest.fixture
def copy(here) -> Path:
    path = here / "copy.trace"
    shutil.copyfile(captures.path("nvidia-smi-q"), path)
    return path


def rmtrace(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("command", [["replay"], ["reduce", "--against", "model:legacy"]])
def test_never_over_an_input_by_any_name_even_with_force(capsys, copy, here, command):
    before = copy.read_bytes()
    os.link(copy, here / "hard.trace")
    os.symlink(copy, here / "soft.trace")
    for name in ("copy.trace", "hard.trace", "soft.trace", "./copy.trace", str(copy)):
        for force in ((), ("--force",)):
            status, _out, err = rmtrace(capsys, *command, copy, "-o", name, *force)
            assert status == ExitCode.ERROR and f"{name} is the input {copy}: refusing to write over it" in err
    assert copy.read_bytes() == before


def test_an_existing_output_needs_force(capsys, copy, here):
    old = here / "old.trace"
    old.write_bytes(b"keep me")
    for argv in (["replay", copy, "-o", old], ["reduce", copy, "--against", "model:legacy", "-o", old],
                 ["record", "-o", old, "--", "true"], ["replay", copy, "-o", here / "new.trace", "--junit", old],
                 ["profiles", "build", "--from", here / "no-such-tree", "--out", old]):
        status, _out, err = rmtrace(capsys, *argv)
        assert status == ExitCode.ERROR and f"{old} exists: give --force to overwrite it" in err, argv
    assert old.read_bytes() == b"keep me"
    status, out, _ = rmtrace(capsys, "replay", copy, "-o", old, "--force")
    assert status == ExitCode.OK and f"replay trace: {old}" in out
    assert TraceReader(str(old)).meta["replay"]["source"] == str(copy)


def test_an_unnamed_replay_goes_to_the_data_directory_numbered(capsys, copy, here):
    replays = here.parent / "data" / "replays"
    for n in range(2):
        status, out, _ = rmtrace(capsys, "replay", copy)
        assert status == ExitCode.OK and f"replay trace: {replays}/copy-{n}.replay.trace" in out
    assert list(here.iterdir()) == [copy]
    assert sorted(p.name for p in replays.iterdir()) == ["copy-0.replay.trace", "copy-1.replay.trace",
                                                         "latest.replay.trace"]
    assert os.readlink(replays / "latest.replay.trace") == "copy-1.replay.trace"
    status, _out, _ = rmtrace(capsys, "wedges", replays / "latest.replay.trace")
    assert status == ExitCode.OK


def test_a_failed_command_leaves_no_empty_output(copy, here):
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "replay", copy, "--against",
                           "unix:/nonexistent.sock"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == ExitCode.ERROR and "Traceback" not in proc.stderr, proc.stderr
    assert not list((here.parent / "data" / "replays").glob("copy-*.replay.trace"))
