"""Check a construct mirror against the C struct it mirrors, through DWARF.

A C header is the single definition of every structure rmtrace shares with C
(the record, the ring control page, the sema-service messages).  Each Python
mirror is a flat construct ``Struct``; ``compare`` lists every difference in
field names, order, offsets and sizes between the two.
"""

from __future__ import annotations

from construct import SizeofError, Struct

from rmtrace.layout import Layout


def mirror_fields(definition: Struct) -> list[tuple[str, int, int]]:
    """(name, offset, size) of each field of a flat construct Struct.

    A field whose size a count decides (a C flexible array member, ``T x[]``)
    has size 0, as DWARF gives the C member.
    """
    fields, offset = [], 0
    for sub in definition.subcons:
        try:
            size = sub.sizeof()
        except SizeofError:
            size = 0
        fields.append((sub.name, offset, size))
        offset += size
    return fields


def compare(layout: Layout, definition: Struct) -> list[str]:
    """Differences between a C layout and its construct mirror; empty when they agree."""
    problems = []
    c_fields = [(m.name, m.offset, m.size) for m in layout.fields]
    py_fields = mirror_fields(definition)
    py_size = sum(size for _name, _offset, size in py_fields)
    if layout.size != py_size:
        problems.append(f"{layout.name}: C size {layout.size}, mirror size {py_size}")
    c_names = [f[0] for f in c_fields]
    py_names = [f[0] for f in py_fields]
    if c_names != py_names:
        problems.append(f"{layout.name}: C fields {c_names} != mirror fields {py_names}")
    for (cn, co, cs), (pn, po, ps) in zip(c_fields, py_fields):
        if cn == pn and (co, cs) != (po, ps):
            problems.append(f"{layout.name}.{cn}: C offset {co} size {cs}, mirror offset {po} size {ps}")
    return problems
