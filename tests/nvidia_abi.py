"""Where the NVIDIA ABI reference facts live, for tests that check shipped profiles against them.

The folder is not part of the repository: ``$RMTRACE_REFERENCE_DIR``, else
``../shared/reference/nvidia-abi`` beside the repository.  Tests that need it
skip, saying why, where it is absent on a developer's machine; in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _missing(why: str) -> None:
    """CI must run these tests, so there a missing reference is a failure, not a skip."""
    (pytest.fail if os.environ.get("CI") else pytest.skip)(why)


def reference_dir() -> Path | None:
    env = os.environ.get("RMTRACE_REFERENCE_DIR")
    path = Path(env) if env else REPO.parent / "shared" / "reference" / "nvidia-abi"
    return path if (path / "versions").is_dir() else None


@cache
def reference(name: str) -> dict:
    """A reference JSON file (``versions/580.142.json``, ``escapes.json``...), or skip the test."""
    base = reference_dir()
    if base is None:
        _missing("NVIDIA ABI reference facts absent (set RMTRACE_REFERENCE_DIR or provide ../shared/reference/nvidia-abi)")
    path = base / name
    if not path.exists():
        _missing(f"reference file {name} absent in {base}")
    return json.loads(path.read_text())
