"""The TUI in a real terminal (tmux), as a person would run it; and the CLI's refusals."""

import os
import random
import re
import shutil
import subprocess
import sys
import time

import pytest
from rmtrace.replayer import Schedule, build_plan, make_target, replay

from rmtrace import captures
from rmtrace.record import Phase, Record, Source
from rmtrace.trace import TraceWriter

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux is not installed (apt-get install tmux); CI must have it")
"""A real terminal: skipped on a developer's machine without tmux, never in CI (there it fails)."""


def rmtrace(*args):
    """The CLI with no terminal at all: no standard stream is one, and a session of its own has no /dev/tty."""
    return subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, start_new_session=True)


def test_cli_refuses_without_a_terminal_and_bad_arguments(tmp_path):
    path = tmp_path / "t.trace"
    with TraceWriter(path, {}) as w:
        w.write(Record(Source.RM, Phase.ENTER, 0x2A, time_ns=1))
    out = rmtrace("tui", path)
    assert out.returncode == 2 and "needs a terminal" in out.stderr and "Traceback" not in out.stderr
    out = rmtrace("tui", path, path, path)
    assert out.returncode == 2 and "two to compare" in out.stderr
    assert "--follow" in rmtrace("tui", "--help").stdout


def screen_span(shown):
    """Seconds on screen, from the timeline's status line (``… │  10.299s/screen``)."""
    value, unit = re.search(r"([0-9.]+)(s|ms)/screen", shown).groups()
    return float(value) / (1000 if unit == "ms" else 1)


class Tmux:
    """A detached tmux session running a shell; commands are typed into it, as a person would."""

    def __init__(self, name, size=(120, 34)):
        self.name = name
        self.tmux = ["tmux", "-L", name]  # a server of its own: nobody else's sessions are touched
        subprocess.run([*self.tmux, "new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]),
                        "bash --norc --noprofile"], check=True)

    def type(self, command):
        self.keys(command, "Enter")

    def screen(self, history=False):
        """What the terminal shows now (with ``history``: everything that scrolled off it too)."""
        since = ["-S", "-"] if history else []
        return subprocess.run([*self.tmux, "capture-pane", "-t", self.name, "-p", *since], capture_output=True,
                              text=True).stdout

    def wait_for(self, text, timeout=20.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")

    def wait_until_still(self, quiet=3.0, timeout=120.0):
        """Until the screen has not changed for ``quiet`` seconds (what was sent has been handled)."""
        end = time.monotonic() + timeout
        shown = self.screen()
        while time.monotonic() < end:
            time.sleep(quiet)
            now = self.screen()
            if now == shown:
                return
            shown = now
        raise AssertionError(f"the screen never settled:\n{shown}")

    def keys(self, *keys):
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def close(self):
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


@needs_tmux
def test_a_new_user_opens_the_shipped_capture(tmp_path):
    """`rmtrace tui` with no FILE: the real H200 capture of three CUDA clients, decoded and folded."""
    term = Tmux(f"rmtrace-tui-capture-{tmp_path.name}")
    try:
        term.type(f"PS1='$ '; cd {tmp_path}; {sys.executable} -m rmtrace.cli.main tui; echo exited $?")
        first = term.wait_for("3 clients")
        assert "cuda-streams-3x-sequential.trace" in first and "Events (5,031)" in first
        assert "▾ c1 pid" in first and "RM_ALLOC NV01_ROOT" in first
        term.keys("g")
        term.wait_for("Go to a time")
        term.keys("4", "2", "0", "m", "s", "Enter")
        assert "cursor +420.000ms" in term.wait_for("cursor +420.000ms")
        term.keys("w")
        term.wait_for("No wedge found")
        term.keys("q")
        term.wait_for("exited 0")
    finally:
        term.close()


@needs_tmux
def test_a_new_user_finds_the_wedge_of_a_legacy_replay_in_a_real_terminal(tmp_path):
    replayed = tmp_path / "legacy-replay.trace"
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
    replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=str(replayed))
    term = Tmux(f"rmtrace-tui-{tmp_path.name}")
    try:
        term.type(f"PS1='$ '; {sys.executable} -m rmtrace.cli.main tui {replayed}; echo exited $?")
        first = term.wait_for("4 wedges")
        assert "Timeline" in first and "Events (2,433)" in first and "? Help" in first
        term.keys("?")
        assert "Next wedge" in term.wait_for("rmtrace tui: keys")
        term.keys("Escape")
        term.wait_for("State  Objects  Wedges")
        term.keys("w")
        shown = term.wait_for("UVM_REGISTER_GPU never returned")
        assert "in flight" in shown and "c2 pid 507 (cuda_streams): in_flight (UVM_REGISTER_GPU)" in shown
        term.keys("t")
        term.wait_for("+ Zoom in")  # the footer follows the focus; keys sent before it may go to the old widget
        span = screen_span(term.screen())
        for _ in range(3):  # each + halves the time on screen
            term.keys("+")
            end = time.monotonic() + 20
            while screen_span(term.screen()) > span * 0.6 and time.monotonic() < end:
                time.sleep(0.2)
            assert screen_span(term.screen()) == pytest.approx(span / 2, rel=0.01)
            span /= 2
        term.keys("q")
        term.wait_for("exited 0")
    finally:
        term.close()


@needs_tmux
def test_it_draws_on_the_terminal_when_its_streams_are_redirected(tmp_path):
    """``2>/dev/null`` (Textual draws on stderr) and ``</dev/null``: the TUI uses /dev/tty, as less does."""
    term = Tmux(f"rmtrace-tui-tty-{tmp_path.name}", size=(80, 24))
    try:
        cli = f"{sys.executable} -m rmtrace.cli.main tui cuda-streams"
        term.type(f"PS1='$ '; {cli} 2>/dev/null </dev/null >{tmp_path}/out.txt; echo exited $?")
        shown = term.wait_for("1 client, 21 lanes")
        assert "Events (1,675)" in shown
        term.keys("q")
        term.wait_for("exited 0")
    finally:
        term.close()


@needs_tmux
def test_bad_files_are_a_clear_error_in_a_terminal(tmp_path):
    (tmp_path / "text.trace").write_text("not a trace\n")
    term = Tmux(f"rmtrace-tui-bad-{tmp_path.name}", size=(240, 20))
    try:
        cli = f"{sys.executable} -m rmtrace.cli.main tui"
        term.type(f"PS1='$ '; {cli} {tmp_path}/missing.trace; echo first $?; {cli} {tmp_path}/text.trace; echo second $?")
        shown = term.wait_for("second 2")
        assert "missing.trace: no such file" in shown and "first 2" in shown
        assert "not an rmtrace trace" in shown and "Traceback" not in shown
    finally:
        term.close()


MODALS = ("Filter the events (Enter applies", "Go to a time after", "Search the events (n", "esc Close")
"""What each screen over the main one shows (help and the field view: their footer)."""

STORM_KEYS = (
    # tmux's names for every key some screen binds, but q (it quits the main screen: the storm ends with it)
    "?", "w", "W", "f", "/", "g", "t", "e", "s", "o", "d", "x", "F", "n", "N", "p", "c", "0", "+", "=", "-", "[", "]",
    "C-r", "Left", "Right", "Up", "Down", "S-Left", "S-Right", "Home", "End", "PPage", "NPage", "Enter", "Escape",
    "Space", "Tab", "BTab", "BSpace", "DC", *"abhjkmruvyz12345679.,",
)


@needs_tmux
def test_keys_in_bursts_in_a_real_terminal_at_80x24(tmp_path):
    """Issue 14's case (``?``, then ↓ ↓ at once, then ``t``), then 400 random keys as fast as tmux sends them."""
    term = Tmux(f"rmtrace-tui-storm-{tmp_path.name}", size=(80, 24))
    try:
        term.type(f"PS1='$ '; {sys.executable} -m rmtrace.cli.main tui cuda-streams; echo exited $?")
        term.wait_for("1 client, 21 lanes")
        term.keys("?")
        term.wait_for("rmtrace tui: keys")
        term.keys("Down", "Down")
        term.keys("t")
        time.sleep(1)
        shown = term.screen()
        assert "esc Close" in shown and "rmtrace tui: keys" not in shown  # still the help, scrolled; t does nothing
        term.keys("Escape")
        term.wait_for("Events (1,675)")
        rng = random.Random("tmux storm")
        for _ in range(20):
            term.keys(*rng.choices(STORM_KEYS, k=20))
        # Back to the main screen and q.  The app may still be working through the storm (keys that come while
        # a screen opens go where the focus was), so look again after each key until it has quit.
        for _ in range(12):
            term.wait_until_still()
            shown = term.screen()
            if "exited 0" in shown:
                break
            term.keys("Escape" if any(modal in shown for modal in MODALS) else "q")
        else:
            raise AssertionError(f"the TUI did not quit on q after the storm:\n{term.screen()}")
        assert "Traceback" not in term.screen(history=True), shown
    finally:
        term.close()
