"""Traces recorded on real hardware (see README.md here); shipped with the package as data.

``shipped()`` lists them; ``path(name)`` finds one; ``DEFAULT`` is the one commands use when
no trace is named, so that a fresh install has something real to look at.
"""

from __future__ import annotations

from pathlib import Path

from rmtrace.errors import RmtraceError

HERE = Path(__file__).resolve().parent
DEFAULT = "cuda-streams-3x-sequential"
"""Three CUDA clients one after another in one recording, on an H200: the sequential case."""


def shipped() -> list[str]:
    """Names of the shipped captures (file names without .trace)."""
    return sorted(p.stem for p in HERE.glob("*.trace"))


def path(name: str = DEFAULT) -> Path:
    """The file of shipped capture ``name``."""
    found = HERE / f"{name.removesuffix('.trace')}.trace"
    if not found.is_file():
        raise RmtraceError(f"no shipped capture named {name!r} (shipped: {', '.join(shipped())})")
    return found
