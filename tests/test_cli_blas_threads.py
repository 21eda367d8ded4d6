"""The column commands load numpy with OpenBLAS on one thread (``rmtrace.cli.main.import_numpy_without_blas_threads``),
and leave the environment their children inherit as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rmtrace import captures

CHILD = """
import json, os, sys
from rmtrace.cli.main import main
sys.stdout = open(os.devnull, "w")
code = main(["stats", "--json", sys.argv[1]])
print(json.dumps({"code": code, "threads": len(os.listdir("/proc/self/task")),
                  "env": os.environ.get("OPENBLAS_NUM_THREADS")}), file=sys.stderr)
"""


def run_stats(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(captures.path("nvidia-smi-q"))], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stderr.splitlines()[-1])


def test_stats_loads_numpy_on_one_thread_and_restores_the_environment():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["RMTRACE_CACHE"] = "off"
    assert run_stats(env) == {"code": 0, "threads": 1, "env": None}


def test_a_thread_count_the_user_set_is_kept():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", RMTRACE_CACHE="off")
    got = run_stats(env)
    assert got["code"] == 0 and got["env"] == "2" and got["threads"] == min(2, os.cpu_count() or 1)
