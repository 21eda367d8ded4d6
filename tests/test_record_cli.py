"""`rmtrace record` as a user meets it: arguments, errors, and one recording through the real profiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmtrace.cli.record import parse_size
from rmtrace.errors import RmtraceError
from rmtrace.trace import TraceReader
from tests.capture_support import build_programs, fakedrv_environment, make_device_dir
from tests.toolchain import needs_gcc


def rmtrace(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("text, size", [("4096", 4096), ("64k", 64 << 10), ("4M", 4 << 20), ("1g", 1 << 30),
                                        ("2MiB", 2 << 20)])
def test_sizes(text, size):
    assert parse_size(text) == size


def test_bad_size():
    with pytest.raises(RmtraceError, match="not a size"):
        parse_size("lots")


@pytest.mark.parametrize("args, message", [
    (["-o", "x.trace"], "no command to record"),
    (["-o", "x.trace", "--"], "no command to record"),
    (["-o", "x.trace", "--ring-size", "5000", "--", "true"], "power of two"),
    (["-o", "x.trace", "--duration", "soon", "--", "true"], "not a duration"),
    (["-o", "/nonexistent-dir/x.trace", "--", "true"], "cannot write /nonexistent-dir/x.trace"),
])
def test_user_errors_exit_2_with_a_message(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "record", *args], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.trace").exists()


def test_progress_line_only_when_asked():
    import io

    from rmtrace.capture.progress import Progress
    shown, quiet = io.StringIO(), io.StringIO()
    Progress(shown, enabled=True).update(1234, 2_500_000, 3, 1.5)
    Progress(quiet).update(1234, 2_500_000, 3, 1.5)  # a StringIO is no terminal
    assert "1,234 records, 2.5 MB, 3 processes" in shown.getvalue() and quiet.getvalue() == ""


def test_help_explains():
    proc = rmtrace("record", "--help")
    assert proc.returncode == 0 and "before the call" in proc.stdout and "--lossy" in proc.stdout


@needs_gcc
def test_record_through_the_cli(tmp_path):
    progs = build_programs(tmp_path / "bin")
    env = fakedrv_environment(progs, make_device_dir(tmp_path / "dev"))
    out = tmp_path / "cli.trace"
    proc = rmtrace("record", "-o", out, "--", progs["rmprog"], "basic", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "basic ok" in proc.stdout
    with TraceReader(out) as reader:
        meta, records = reader.meta, list(reader)
    assert meta["profile"] and meta["backend"] == "preload"
    if not Path("/proc/driver/nvidia/version").exists():
        assert "no NVIDIA driver loaded" in proc.stderr and "no NVIDIA driver loaded" in meta["profile_warning"]
    classlist = [r for r in records if r.source == 1 and r.op == 0x2A and r.buffer(4) is not None]
    assert len(classlist) == 2  # GET_CLASSLIST's classList, before and after, from the real profile's pointer table
    info = rmtrace("info", out)
    assert info.returncode == 0 and "RM       18 (enter 9, exit 9)" in info.stdout
