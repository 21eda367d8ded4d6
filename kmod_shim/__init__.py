"""The C side of rmtrace: the record header and the capture shim.

Only the record header (``rmtrace_record.h``) is shared with Python.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def record_header_path() -> Path:
    """Path of rmtrace_record.h, the one definition of the record format."""
    return HERE / "rmtrace_record.h"
