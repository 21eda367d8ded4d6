"""The column commands (stats, wedges, diff, show, export, tui) run with OpenBLAS told to start one thread
(``rmtrace.cli.main.blas_on_one_thread``), and leave the environment as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmtrace import captures
from rmtrace.cli.show import TABLE_FROM_RECORDS

CHILD = """
import json, os, sys
from rmtrace.cli.main import main
sys.stdout = open(os.devnull, "w")
code = main([*sys.argv[2:], sys.argv[1]])
print(json.dumps({"code": code, "numpy": "numpy" in sys.modules, "threads": len(os.listdir("/proc/self/task")),
                  "env": os.environ.get("OPENBLAS_NUM_THREADS")}), file=sys.stderr)
"""


def run(env: dict[str, str], trace: Path, *command: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), *command], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stderr.splitlines()[-1])


@pytest.fixture(scope="module")
def big_enough(replicated) -> Path:
    """A trace show chooses its calls for by the call table (numpy's columns), not by decoding every call."""
    return replicated(TABLE_FROM_RECORDS + 4_000)


@pytest.mark.parametrize("command", [("stats", "--json"), ("wedges", "--json"), ("show",), ("show", "--json"),
                                     ("show", "--failed")])
def test_a_column_command_loads_numpy_on_one_thread_and_restores_the_environment(command, big_enough, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["RMTRACE_CACHE"] = str(tmp_path / "cache")
    assert run(env, big_enough, *command) == {"code": 0, "numpy": True, "threads": 1, "env": None}


def test_a_small_trace_s_show_loads_no_numpy():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["RMTRACE_CACHE"] = "off"
    got = run(env, captures.path("nvidia-smi-q"), "show")
    assert got == {"code": 0, "numpy": False, "threads": 1, "env": None}


def test_a_thread_count_the_user_set_is_kept():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", RMTRACE_CACHE="off")
    got = run(env, captures.path("nvidia-smi-q"), "stats", "--json")
    assert got["code"] == 0 and got["env"] == "2" and got["threads"] == min(2, os.cpu_count() or 1)
