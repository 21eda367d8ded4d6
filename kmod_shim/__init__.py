"""The C side of rmtrace: the record header, the ring header and the capture shim.

Only the headers are shared with Python (``rmtrace_record.h``, ``rmtrace_ring.h``,
and ``rmtrace_sema.h``, the host sema-service messages), each with one construct mirror.
The shim is a plain shared library the install builds here (``shim_build.py``).
"""

import os
from pathlib import Path

from rmtrace.errors import RmtraceError

HERE = Path(__file__).resolve().parent
SHIM_LIBRARY = "librmtrace_shim.so"
SHIM_ENV = "RMTRACE_SHIM"
"""Names another build of the shim to preload (the tests' build, with its test hooks)."""


def record_header_path() -> Path:
    """Path of rmtrace_record.h, the one definition of the record format."""
    return HERE / "rmtrace_record.h"


def sema_header_path() -> Path:
    """Path of rmtrace_sema.h, the one definition of the sema-service messages."""
    return HERE / "rmtrace_sema.h"


def ring_header_path() -> Path:
    """Path of rmtrace_ring.h: the shim's rings, session control and capture table."""
    return HERE / "rmtrace_ring.h"


def interposer_path() -> Path:
    """The capture shim to preload: $RMTRACE_SHIM when set, else the one the package install built."""
    chosen = os.environ.get(SHIM_ENV)
    path = Path(chosen) if chosen else HERE / SHIM_LIBRARY
    if not path.is_file():
        if chosen:
            raise RmtraceError(f"{SHIM_ENV}={chosen}: no such file")
        raise RmtraceError("the capture shim is not built: reinstall rmtrace with a C compiler present "
                           f"(pip install -e . builds kmod_shim/{SHIM_LIBRARY})")
    return path.resolve()
