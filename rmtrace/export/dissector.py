"""The Wireshark dissector: Lua code shipped as a template, its tables generated from a driver profile.

``wireshark/rmtrace.lua`` is the dissector's code: how to walk a record (the
header, then ``nbufs`` tagged buffers) and how to name what it finds.  It
holds no number of its own.  ``lua_tables(decoders)`` writes every number
and name it uses as Lua data, taken from where the Python side takes them:

* the record and buffer headers from the construct mirror (``RECORD``,
  ``BUFFER_LAYOUT``), the enums from ``rmtrace.record``;
* the operation names from the decoder tables of the profile
  (``DecoderSet.tables``: escapes, UVM commands, GSP functions and events,
  sema ops, system ops, marks), so a packet is named as ``rmtrace show``
  names its call;
* offsets of the fields a name or a status is read from (``cmd``,
  ``hClass``, ``status``/``rmStatus``, the RPC header's ``function``,
  ``sequence`` and ``rpc_result``, a sema body's ``rc``) from the profile's
  layouts and the sema mirror;
* classes, controls, the naming of controls the profile lacks (interface
  prefixes and category names), status codes, errno names.

``write_dissector(directory, decoders)`` writes ``rmtrace.lua`` there:
``tshark -X lua_script:DIR/rmtrace.lua`` or copy it to Wireshark's plugin
folder.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from construct import Struct

from rmtrace.decoders import DecoderSet
from rmtrace.decoders.gsp import DETAIL, GspOp, codec_for
from rmtrace.decoders.ioctl import IoctlOp
from rmtrace.decoders.names import names
from rmtrace.decoders.parse import STATUS_FIELDS
from rmtrace.decoders.rm import AllocCall, ControlCall, XferCall
from rmtrace.decoders.sema import HEADER_SIZE as SEMA_HEADER_SIZE
from rmtrace.decoders.sema import SemaMessageOp
from rmtrace.export.pcapng import INTERFACES, LINKTYPES
from rmtrace.flat import FlatStruct
from rmtrace.flat import field_offset as flat_field_offset
from rmtrace.record import BUFFER_LAYOUT, RECORD, Phase, Role, Source, When

TEMPLATE = "rmtrace.lua"
MARKER = "--[[ TABLES ]]"
"""Where the generated tables go in the template."""

ESCAPE_KINDS = {ControlCall: "control", AllocCall: "alloc", XferCall: "xfer"}
"""Decoder classes of escapes whose name or argument the dissector reads further."""


# -- values as Lua source ------------------------------------------------------------------


def lua(value: Any, indent: str = "") -> str:
    """A Python value (dict, list, str, int, bool, None) as a Lua expression."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)  # JSON's escapes are Lua's, for ASCII text
    if isinstance(value, Mapping):
        inner = indent + " "
        items = [f"[{lua(k)}]={lua(v, inner)}" if not _identifier(k) else f"{k}={lua(v, inner)}"
                 for k, v in value.items() if v is not None]
        return "{" + _join(items, inner) + "}"
    if isinstance(value, (list, tuple)):
        return "{" + _join([lua(v, indent + " ") for v in value], indent + " ") + "}"
    raise TypeError(f"no Lua form for {type(value).__name__}")


LUA_KEYWORDS = frozenset(
    "and break do else elseif end false for function goto if in local nil not or repeat return then true until while".split())


def _identifier(key: Any) -> bool:
    """A key Lua takes bare (``name=``); any other is written ``["key"]=``."""
    return isinstance(key, str) and key.isidentifier() and key not in LUA_KEYWORDS


def _join(items: list[str], indent: str) -> str:
    """Items comma separated, wrapped before 120 columns."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) > 118:
            lines.append(line)
            line = ""
        line += item + ","
    if line:
        lines.append(line)
    return ("\n" + indent).join(lines)


# -- what the tables hold --------------------------------------------------------------------


def header_fields(flat: FlatStruct) -> list[dict[str, Any]]:
    """Name, offset, size and signedness of each field of a flat struct (the record mirror)."""
    return [{"name": name, "offset": sc.offset, "size": sc.codec.size, "signed": sc.codec.format[-1].islower()}
            for name, sc in flat.scalars.items()]


def _member_offset(definition: Struct, name: str | None) -> int | None:
    """Where a member of a construct struct starts (members before it are fixed-size), None when it has none."""
    if name is None or name not in {sub.name for sub in definition.subcons}:
        return None
    return flat_field_offset(definition, name)


def field_offset(layouts: Mapping[str, Any], layout_name: str | None, wanted: Iterable[str], base: int = 0) -> int | None:
    """Offset of the first member named one of ``wanted``, walking into nested structs as the decoders do."""
    layout = layouts.get(layout_name) if layout_name else None
    if layout is None:
        return None
    wanted = tuple(wanted)
    for f in layout.fields:
        if f.bit_size is not None:
            continue
        if f.kind == "struct" and f.type in layouts:
            found = field_offset(layouts, f.type, wanted, base + f.offset)
            if found is not None:
                return found
        elif f.name in wanted and f.size == 4:
            return base + f.offset
    return None


def _arg_specs(op: IoctlOp, layouts: Mapping[str, Any], key: str | None) -> dict[str, Any]:
    """Per argument size: the layout's size, where the status is, and the naming field (``cmd``/``hClass``)."""
    def spec(name: str) -> dict[str, Any]:
        layout = layouts[name]
        out: dict[str, Any] = {"size": layout.size, "status": field_offset(layouts, name, STATUS_FIELDS)}
        if key is not None:
            out["key"] = field_offset(layouts, name, (key,))
        return out
    specs: dict[str, Any] = {"sizes": {size: spec(name) for size, name in op.arg_layouts.items()}}
    if op.default_layout is not None and op.default_layout in layouts:
        specs["default"] = spec(op.default_layout)
    return specs


def ioctl_table(table: Mapping[int, Any], layouts: Mapping[str, Any]) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for nr, op in table.items():
        kind = ESCAPE_KINDS.get(type(op))
        key = {"control": "cmd", "alloc": "hClass", "xfer": "cmd"}.get(kind or "")
        entry = {"name": op.name, "kind": kind}
        if isinstance(op, IoctlOp):
            entry.update(_arg_specs(op, layouts, key))
        out[nr] = entry
    return out


def gsp_table(decoders: DecoderSet) -> tuple[dict[int, Any], dict[str, Any] | None]:
    codec = codec_for(decoders.profile)
    if codec is None:
        return {}, None
    layouts = decoders.profile.layouts
    out: dict[int, Any] = {}
    for num, op in decoders.tables.get(Source.GSP, {}).items():
        if not isinstance(op, GspOp):
            continue
        entry: dict[str, Any] = {"name": op.name, "event": op.event}
        payload = layouts.get(op.payload_layout) if op.payload_layout else None
        if payload is not None:
            entry["size"] = payload.size
            entry["status"] = field_offset(layouts, op.payload_layout, STATUS_FIELDS)
            detail = DETAIL.get(op.short)
            if detail is not None:
                entry["detail"] = {"kind": detail[1], "offset": field_offset(layouts, op.payload_layout, (detail[0],))}
        out[num] = entry
    header = {name: field_offset(layouts, codec.header_name, (name,)) for name in ("function", "sequence", "rpc_result")}
    header["size"] = codec.header_size
    return out, header


def sema_table(decoders: DecoderSet) -> dict[int, Any]:
    out = {}
    for num, op in decoders.tables.get(Source.SEMA, {}).items():
        if not isinstance(op, SemaMessageOp):
            continue
        body = op.kind.body
        out[num] = {"name": op.name, "rc": _member_offset(body, op.kind.status),
                    "channel": _member_offset(body, "channel"), "rank": _member_offset(body, "rank")}
    return out


def lua_tables(decoders: DecoderSet) -> str:
    """Every number and name the dissector uses, for ``decoders``' profile, as Lua assignments to ``T``."""
    profile = decoders.profile
    layouts = profile.layouts
    naming = names(profile)
    gsp, gsp_header = gsp_table(decoders)
    tables: dict[str, Any] = {
        "profile": profile.version,
        "header": header_fields(RECORD),
        "header_size": RECORD.size,
        "buffer": header_fields(BUFFER_LAYOUT),
        "buffer_size": BUFFER_LAYOUT.size,
        "sources": {int(s): s.name for s in Source},
        "phases": {int(p): p.name for p in Phase},
        "roles": {int(r): r.name for r in Role},
        "whens": {int(w): w.name for w in When},
        "role": {r.name: int(r) for r in Role},
        "when": {w.name: int(w) for w in When},
        "source": {s.name: int(s) for s in Source},
        "phase": {p.name: int(p) for p in Phase},
        "linktypes": {LINKTYPES[s] - LINKTYPES[Source.RM]: INTERFACES[s][0] for s in INTERFACES},
        "rm": ioctl_table(decoders.tables.get(Source.RM, {}), layouts),
        "uvm": ioctl_table(decoders.tables.get(Source.UVM, {}), layouts),
        "gsp": gsp,
        "gsp_header": gsp_header,
        "sema": sema_table(decoders),
        "sema_header": {"size": SEMA_HEADER_SIZE},
        "sys": {num: {"name": op.name, "result": getattr(op, "result", None)}
                for num, op in decoders.tables.get(Source.SYS, {}).items()},
        "mark": {num: op.name for num, op in decoders.tables.get(Source.MARK, {}).items()},
        "classes": {cid: info.name for cid, info in sorted(profile.classes.items())},
        "controls": {cmd: c.name for cmd, c in sorted(profile.controls.items())},
        "prefixes": dict(sorted(naming.prefixes.items())),
        "categories": {cls * 256 + cat: name for (cls, cat), name in sorted(naming.category_names.items())},
        "status": dict(sorted(profile.status.items())),
        "errno": dict(sorted(errno.errorcode.items())),
    }
    return "\n".join(f"T.{name} = {lua(value)}" for name, value in tables.items()) + "\n"


def template() -> str:
    return (resources.files("rmtrace.export") / "wireshark" / TEMPLATE).read_text()


def render_dissector(decoders: DecoderSet) -> str:
    """The whole dissector for ``decoders``' profile: the template with its tables filled in."""
    code = template()
    if MARKER not in code:
        raise RuntimeError(f"the dissector template has no {MARKER} line")
    return code.replace(MARKER, f"-- generated from driver profile {decoders.profile.version}\n"
                        + lua_tables(decoders), 1)


def write_dissector(directory: str | os.PathLike, decoders: DecoderSet) -> Path:
    """Write ``rmtrace.lua`` for ``decoders``' profile into ``directory`` (made if missing); its path."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TEMPLATE
    path.write_text(render_dissector(decoders))
    return path
