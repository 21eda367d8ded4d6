"""What the export tests share: a legacy-model replay of a real capture, and tools that must be there in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def legacy_replay(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The real cuda-streams capture replayed three times in a row against the unfixed host model:
    c1 green, c2 and c3 wedged in UVM_REGISTER_GPU (GSP RPCs and sema messages included)."""
    from rmtrace.replayer import Schedule, build_plan, make_target, replay

    from rmtrace import captures

    out = str(tmp_path_factory.mktemp("legacy") / "legacy-replay.trace")
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
    replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=out)
    return out


def need_program(name: str, how: str) -> str:
    """The path of a program a test needs; a skip with ``how`` to get it on a developer's machine, a failure in CI."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing in CI: .ci/run installs it")
        pytest.skip(f"{name} is not installed ({how})")
    return path


def shipped(name: str) -> Path:
    from rmtrace import captures
    return Path(captures.path(name))
