"""The C side of rmtrace: the record header and the capture shim.

The record header (``rmtrace_record.h``) and the sema-service message header
(``rmtrace_sema.h``) are shared with Python; each has one construct mirror.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def record_header_path() -> Path:
    """Path of rmtrace_record.h, the one definition of the record format."""
    return HERE / "rmtrace_record.h"


def sema_header_path() -> Path:
    """Path of rmtrace_sema.h, the one definition of the sema-service messages."""
    return HERE / "rmtrace_sema.h"
