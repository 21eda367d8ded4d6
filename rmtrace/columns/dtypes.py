"""numpy views of the one record format, derived from its construct mirror (``rmtrace.record``).

Nothing here names an offset: every field's position and type comes from
``RecordHeader`` and ``BufferHeader`` through the ``struct`` codec that
``rmtrace.record`` already derives from them, so a change to the mirror moves
these too.
"""

from __future__ import annotations

import numpy as np
from construct import Struct

from rmtrace.flat import struct_codec
from rmtrace.record import BufferHeader, RecordHeader

_NUMPY_CODES = {"B": "u1", "b": "i1", "H": "u2", "h": "i2", "I": "u4", "L": "u4", "i": "i4", "l": "i4",
                "Q": "u8", "q": "i8"}


def numpy_dtype(definition: Struct) -> np.dtype:
    """The packed numpy dtype of a flat construct Struct of little-endian scalars (same layout, same names)."""
    codes = struct_codec(definition).format[1:]
    names = [sub.name for sub in definition.subcons]
    dtype = np.dtype([(name, "<" + _NUMPY_CODES[code]) for name, code in zip(names, codes)])
    assert dtype.itemsize == definition.sizeof()
    return dtype


HEADER_DTYPE = numpy_dtype(RecordHeader)
BUFFER_DTYPE = numpy_dtype(BufferHeader)

