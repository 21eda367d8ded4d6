"""The C side of rmtrace: the record header, the ring header and the capture shim.

Only the headers are shared with Python (``rmtrace_record.h``, ``rmtrace_ring.h``,
and ``rmtrace_sema.h``, the host sema-service messages), each with one construct mirror.
"""

import importlib.util
from pathlib import Path

from rmtrace.errors import RmtraceError

HERE = Path(__file__).resolve().parent
INTERPOSER_MODULE = "rmtrace.kmod_shim._interposer"


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
    """The built capture shim (an LD_PRELOAD library, built by the package install)."""
    spec = importlib.util.find_spec(INTERPOSER_MODULE)
    if spec is None or not spec.origin:
        raise RmtraceError("the capture shim is not built: reinstall rmtrace with a C compiler present "
                           "(pip install -e . builds kmod_shim/interposer.c)")
    return Path(spec.origin)
