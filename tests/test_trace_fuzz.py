"""Fuzzing real traces: every kind of damage leaves every record it did not touch, and no
command crashes, hangs or says something unclear on a damaged trace.

CI runs a seeded, bounded sample; ``python bench/trace_fuzz.py`` runs every bit and cut.
"""

from __future__ import annotations

import contextlib
import io
import signal

import pytest

from rmtrace import captures
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode
from tests.trace_damage import Case, cut, flip, junk, read_back, rewrite, sample, swap
from tests.tui_support import open_app, pilot_test, settle


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return rewrite(captures.path("cuda-streams-3x-sequential"), tmp_path_factory.mktemp("fuzz") / "orig.trace")


def test_each_kind_of_damage_costs_at_most_the_chunk_it_lands_in(original, tmp_path):
    assert len(original.chunks) >= 5
    path = tmp_path / "case.trace"
    by_kind: dict[str, list[tuple[int, int]]] = {}
    for case in sample(original, flips=240, cuts=60):
        path.write_bytes(case.data)
        got = read_back(original, path)
        where = f"{case.kind} at {case.where}"
        assert got.error is None, f"{where}: {got.error}"
        assert got.wrong == 0, f"{where}: {got.wrong} records differ from the ones written"
        assert got.recovered >= case.at_least, f"{where}: {got.recovered} of {original.total}, {case.at_least} intact"
        by_kind.setdefault(case.kind, []).append((got.recovered, case.at_least))
    # a cut gives back the records before it (16 KiB blocks), not only the whole chunks before it
    cuts = by_kind["cut"]
    assert sum(got > whole for got, whole in cuts) > len(cuts) // 2
    assert len({got for got, _ in cuts}) > len({whole for _, whole in cuts})
    assert {got for got, _ in by_kind["junk"] + by_kind["swap"]} == {original.total}


COMMANDS = [
    ("info", "{f}"), ("info", "--json", "{f}"), ("show", "{f}", "--limit", "50"), ("show", "{f}", "--json", "-V"),
    ("stats", "{f}"), ("wedges", "{f}"), ("wedges", "{f}", "--json"), ("diff", "{o}", "{f}"),
    ("export", "--format", "pcapng", "-o", "{out}.pcapng", "{f}"), ("export", "--format", "perfetto", "-o", "{out}.pftrace", "{f}"),
    ("export", "--format", "jsonl", "-o", "{out}.jsonl", "{f}"), ("export", "--format", "parquet", "-o", "{out}.parquet", "{f}"),
    ("replay", "{f}", "--against", "model:legacy", "-o", "{out}.replay.trace"),
    ("reduce", "{f}", "--against", "model:legacy", "-o", "{out}.reduced.trace"),
]
TABLE = {int(code) for code in ExitCode}


def _run(argv: list[str], seconds: int = 60) -> tuple[int, str, str]:
    """One command in this process: (status, stdout, stderr); a hang or a traceback fails the test."""
    from rmtrace.cli.main import main

    def hung(*_):
        raise TimeoutError(f"rmtrace {' '.join(argv)} hung for {seconds} s")

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return status, out.getvalue(), err.getvalue()


def _cases(original):
    chunks = original.chunks
    mid = chunks[2]
    return [
        flip(original, (mid.offset + 64 + mid.comp_len // 2) * 8 + 3),  # a payload: one chunk lost
        flip(original, (chunks[1].offset + 20) * 8),                     # a chunk header: proven by its payload
        flip(original, 40 * 8 + 1),                                      # the metadata
        cut(original, mid.offset + 64 + mid.comp_len // 3),              # a recorder killed mid-write
        cut(original, chunks[0].offset + 64 + chunks[0].comp_len // 2),  # a copy cut inside the first chunk
        junk(original, b"\xffjunk" * 50),
        swap(original, 1, 3),
        Case("cut", 20, original.data[:20], 0),                          # inside the file header: an error
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """nvidia-smi -q's 410 records in 8 KiB chunks: each command folds it in a fraction of a second."""
    return rewrite(captures.path("nvidia-smi-q"), tmp_path_factory.mktemp("fuzz") / "small.trace", chunk_bytes=8 << 10)


def test_every_command_reads_a_damaged_trace_or_says_why(small, tmp_path):
    assert len(small.chunks) >= 4
    orig = tmp_path / "orig.trace"
    orig.write_bytes(small.data)
    for n, case in enumerate(_cases(small)):
        path = tmp_path / f"damaged-{n}.trace"
        path.write_bytes(case.data)
        for command in COMMANDS:
            argv = [a.format(f=path, o=orig, out=tmp_path / f"out-{n}-{command[0]}") for a in command]
            status, out, err = _run(argv)
            what = f"{case.kind} at {case.where}: rmtrace {' '.join(argv)}"
            assert status in TABLE, f"{what}: exit {status}, not in docs/exit-codes.md"
            if status == ExitCode.ERROR:
                lines = err.strip().splitlines()  # one error naming the file; beside it only rmtrace's notes
                errors = [line for line in lines if line.startswith(f"rmtrace {command[0]}: error: ")]
                assert len(errors) == 1 and str(path) in errors[0] and all(line.startswith("rmtrace") for line in lines), \
                    f"{what}: unclear error {err!r}"
            elif command[0] == "info" and "--json" not in command:
                assert "state" in out and ("complete" in out or "recovered" in out or "intact" in out), what


@pilot_test
async def test_the_tui_opens_every_damaged_trace_or_says_why(small, tmp_path):
    """The TUI is a command too: on each damaged trace it draws what was recovered and keeps answering keys,
    or (a file whose header is gone) refuses it with an error naming the file, before drawing anything."""
    opened = 0
    for n, case in enumerate(_cases(small)):
        path = tmp_path / f"damaged-{n}.trace"
        path.write_bytes(case.data)
        try:
            app = open_app(str(path))
        except RmtraceError as exc:
            assert str(path) in str(exc), f"{case.kind} at {case.where}: unclear error {exc}"
            continue
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            for key in ("w", "tab", "down", "enter", "escape", "tab", "question_mark", "escape"):
                await pilot.press(key)
            await settle(pilot)
            assert app.screen is app.main, f"{case.kind} at {case.where}: {app.screen}"
            await pilot.press("q")
        assert app.return_code == 0, f"{case.kind} at {case.where}"
        opened += 1
    assert opened >= len(_cases(small)) - 1
