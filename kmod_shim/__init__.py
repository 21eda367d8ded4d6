"""The C side of rmtrace: the record header, the ring header and the capture shim.

Only the headers are shared with Python (``rmtrace_record.h``, ``rmtrace_ring.h``,
and ``rmtrace_sema.h``, the host sema-service messages), each with one construct mirror.
The shim is a plain shared library the install builds here (``shim_build.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rmtrace.errors import RmtraceError

if TYPE_CHECKING:
    from pathlib import Path

_HERE = os.path.dirname(os.path.realpath(__file__))
SHIM_LIBRARY = "librmtrace_shim.so"
SHIM_ENV = "RMTRACE_SHIM"
"""Names another build of the shim to preload (the tests' build, with its test hooks)."""


def __getattr__(name: str) -> Path:
    """``HERE``, this folder as a Path, made on first use: an installed recorder imports this module and
    nothing else that needs pathlib, whose import is a few ms of every recording's start
    (bench/record_start.py)."""
    if name == "HERE":
        from pathlib import Path
        return Path(_HERE)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _header(name: str) -> Path:
    from pathlib import Path
    return Path(_HERE, name)


def record_header_path() -> Path:
    """Path of rmtrace_record.h, the one definition of the record format."""
    return _header("rmtrace_record.h")


def sema_header_path() -> Path:
    """Path of rmtrace_sema.h, the one definition of the sema-service messages."""
    return _header("rmtrace_sema.h")


def ring_header_path() -> Path:
    """Path of rmtrace_ring.h: the shim's rings, session control and capture table."""
    return _header("rmtrace_ring.h")


def interposer_path() -> str:
    """The capture shim to preload, resolved: $RMTRACE_SHIM when set, else the one the package install built."""
    chosen = os.environ.get(SHIM_ENV)
    path = chosen or os.path.join(_HERE, SHIM_LIBRARY)
    if not os.path.isfile(path):
        if chosen:
            raise RmtraceError(f"{SHIM_ENV}={chosen}: no such file")
        raise RmtraceError("the capture shim is not built: reinstall rmtrace with a C compiler present "
                           f"(pip install -e . builds kmod_shim/{SHIM_LIBRARY})")
    return os.path.realpath(path)
