"""One check for every construct definition, as construct's declarativeunittest.common does.

``common(definition, data, value)``: parsing ``data`` gives ``value`` (when
given), building that gives ``data`` back, parsing the built bytes gives the
value again, ``sizeof`` is ``len(data)`` (for fixed-size definitions), and the
compiled definition parses and builds exactly as the interpreted one.
"""

from __future__ import annotations

from typing import Any

from construct import Construct, SizeofError


def common(definition: Construct, data: bytes, value: Any = None, *, compiled: bool = True) -> Any:
    parsed = definition.parse(data)
    if value is not None:
        assert parsed == value
    built = definition.build(parsed)
    assert built == data
    assert definition.parse(built) == parsed
    try:
        assert definition.sizeof() == len(data)
    except SizeofError:
        pass  # variable size: a Rebuild count decides it
    if compiled:
        fast = definition.compile()
        assert fast.parse(data) == parsed
        assert fast.build(parsed) == data
    return parsed
