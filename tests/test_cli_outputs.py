"""-o never writes over an input, an existing output needs --force, and an unnamed output never lands in the
working directory (rmtrace.cli.common.output_path, used by every command that writes: record, replay, reduce,
export and profiles build)."""

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


WRITERS = {
    "replay": ["replay", "{input}", "-o", "{out}"],
    "replay --junit": ["replay", "{input}", "-o", "new.trace", "--junit", "{out}"],
    "reduce": ["reduce", "{input}", "--against", "model:legacy", "-o", "{out}"],
    "export pcapng": ["export", "{input}", "-f", "pcapng", "-o", "{out}"],
    "export perfetto": ["export", "{input}", "-f", "perfetto", "-o", "{out}"],
    "export jsonl": ["export", "{input}", "-f", "jsonl", "-o", "{out}"],
    "record": ["record", "-o", "{out}", "--", "{input}"],  # the input is the program it runs
    "record --backend kmod": ["record", "--backend", "kmod:{input}", "-o", "{out}", "--duration", "1s"],
}
"""Every command that writes a file, with the input that file must never be (a trace, or record's program and
kernel port)."""


@pytest.mark.parametrize("writer", WRITERS)
def test_never_over_an_input_by_any_name_even_with_force(capsys, copy, here, writer):
    if writer == "record":
        os.chmod(copy, 0o755)  # a program to run; the refusal comes before it would run
    before = copy.read_bytes()
    os.link(copy, here / "hard.trace")
    os.symlink(copy, here / "soft.trace")
    for name, force in [("copy.trace", ())] + [(n, ("--force",)) for n in
                                                ("copy.trace", "hard.trace", "soft.trace", "./copy.trace", str(copy))]:
        argv = [a.format(input=copy, out=name) for a in WRITERS[writer]]
        status, _out, err = rmtrace(capsys, *argv, *force)
        assert status == ExitCode.ERROR and f"{name} is the input {copy}: refusing to write over it" in err, argv
    assert copy.read_bytes() == before
    assert sorted(p.name for p in here.iterdir()) == ["copy.trace", "hard.trace", "soft.trace"]


def test_a_folder_of_outputs_never_holds_an_input(capsys, copy, here):
    """The outputs that are folders: a Parquet dataset, a dissector's folder, a profile built into its tree."""
    status, _out, err = rmtrace(capsys, "export", copy, "-f", "parquet", "-o", here, "--force")
    assert status == ExitCode.ERROR and f"{here} holds an input trace" in err
    lua = here / "lua"
    lua.mkdir()
    os.link(copy, lua / "rmtrace.lua")
    status, _out, err = rmtrace(capsys, "export", lua / "rmtrace.lua", "--dissector", lua, "--force")
    assert status == ExitCode.ERROR and "refusing to write over it" in err
    tree = here / "ogkm"
    tree.mkdir()
    (tree / "version.mk").write_text("NVIDIA_VERSION = 580.142\n")
    status, _out, err = rmtrace(capsys, "profiles", "build", "--from", tree, "--out", tree / "version.mk", "--force")
    assert status == ExitCode.ERROR and "refusing to write over it" in err
    assert (tree / "version.mk").read_text() == "NVIDIA_VERSION = 580.142\n" and copy.read_bytes() == (lua / "rmtrace.lua").read_bytes()


def test_an_existing_output_needs_force(capsys, copy, here):
    old = here / "old.trace"
    old.write_bytes(b"keep me")
    for argv in (["replay", copy, "-o", old], ["reduce", copy, "--against", "model:legacy", "-o", old],
                 ["record", "-o", old, "--", "true"], ["replay", copy, "-o", here / "new.trace", "--junit", old],
                 ["profiles", "build", "--from", here / "no-such-tree", "--out", old],
                 *(["export", copy, "-f", fmt, "-o", old] for fmt in ("pcapng", "perfetto", "jsonl"))):
        status, _out, err = rmtrace(capsys, *argv)
        assert status == ExitCode.ERROR and f"{old} exists: give --force to overwrite it" in err, argv
    assert old.read_bytes() == b"keep me"
    status, out, _ = rmtrace(capsys, "replay", copy, "-o", old, "--force")
    assert status == ExitCode.OK and f"replay trace: {old}" in out
    assert TraceReader(str(old)).meta["replay"]["source"] == str(copy)


def test_a_saved_decoder_is_replaced_only_with_force(capsys, here, monkeypatch):
    src = here / "mine.c"
    src.write_text("struct mine { int a, b; } mine;\n")
    subprocess.run(["gcc", "-g", "-c", "-o", here / "mine.o", src], check=True)
    monkeypatch.setenv("RMTRACE_DECODER_DIR", str(here / "decoders"))
    argv = ["decoders", "from-dwarf", here / "mine.o", "--struct", "mine", "--source", "sema", "--op", "0x40"]
    assert rmtrace(capsys, *argv, "--name", "FIRST")[0] == ExitCode.OK
    status, _out, err = rmtrace(capsys, *argv, "--name", "SECOND")
    assert status == ExitCode.ERROR and f"{here}/decoders/sema-0x40.json exists: give --force to overwrite it" in err
    assert '"FIRST"' in (here / "decoders" / "sema-0x40.json").read_text()
    assert rmtrace(capsys, *argv, "--name", "SECOND", "--force")[0] == ExitCode.OK
    assert '"SECOND"' in (here / "decoders" / "sema-0x40.json").read_text()


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


def test_junit_and_the_trace_are_never_one_file(capsys, copy, here):
    (here / "report.xml").write_text("<old/>")
    os.link(here / "report.xml", here / "linked.trace")
    status, _out, err = rmtrace(capsys, "replay", copy, "-o", "linked.trace", "--junit", "report.xml", "--force")
    assert status == ExitCode.ERROR and "--junit and -o name the same file" in err
    assert (here / "report.xml").read_text() == "<old/>"


def test_model_serve_never_replaces_a_file_with_its_socket(capsys, copy):
    before = copy.read_bytes()
    status, _out, err = rmtrace(capsys, "model", "serve", "--socket", copy)
    assert status == ExitCode.ERROR and f"{copy} exists and is not a socket; not replacing it" in err
    assert copy.read_bytes() == before


def test_an_unnamed_reduction_goes_to_the_data_directory(capsys, here):
    from tests.cuda_traffic import cuda_client, write_trace
    run1 = write_trace(str(here.parent / "run1.trace"), [cuda_client(1447)])
    status, out, _ = rmtrace(capsys, "reduce", run1, "--repeat", 3, "--schedule", "sequential", "--against",
                             "model:legacy")
    written = here.parent / "data" / "reductions" / "run1-0.reduced.trace"
    assert status == ExitCode.OK and f"wrote {written}; replayed alone it wedges the same way" in out
    assert list(here.iterdir()) == [] and TraceReader(str(written)).meta["backend"] == "reduce"
    assert os.readlink(written.parent / "latest.reduced.trace") == written.name
