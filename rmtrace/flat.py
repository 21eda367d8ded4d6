"""Flat construct structs as the hot paths use them, every number derived from the definition.

rmtrace's binary layouts (the record, the chunk header, the file header and
footer, the ring control page) are each defined once as a flat construct
``Struct`` of little-endian scalars.  ``FlatStruct`` derives from that one
definition everything a fast reader or writer needs: one ``struct.Struct``
codec, each field's position in the codec's tuples (``index.source``) and its
byte offset, a named-tuple view (made on first use), a keyword packer, and ``Scalar`` accessors
that read or write one field in place.  No offset, tuple position or format
character is written down twice.

``FlatStruct.lazy`` takes the definition as a function instead, called only when
the construct ``Struct`` itself is wanted: what the hot paths need (each field's
name, format and default) is derived from it once and kept in the user's cache
(``layouts.json``), under the CRC and length of the source file that defines it, so a process
that only reads or writes records (``rmtrace record``) never imports construct,
which is a fifth of a recorder's start-up.  A definition must therefore use no
names but its own module's: an edit anywhere in that file derives it again.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections import namedtuple
from collections.abc import Callable, Mapping
from operator import itemgetter
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from construct import Struct

LAYOUTS_FILE = "layouts.json"
CACHE_ENV = "RMTRACE_CACHE_DIR"


def user_cache_dir() -> str:
    """$RMTRACE_CACHE_DIR, else $XDG_CACHE_HOME/rmtrace, else ~/.cache/rmtrace."""
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rmtrace")


def _leaf(sub: Any) -> Any:
    """The FormatField (or Bytes, or Array) under a field's wrappers (Const, Renamed)."""
    from construct import Array, Bytes, FormatField
    leaf = sub.subcon
    while not isinstance(leaf, FormatField | Bytes | Array):
        leaf = getattr(leaf, "subcon", None)
        if leaf is None:
            raise TypeError(f"field {sub.name} is not a plain scalar or byte string")
    return leaf


def _code(sub: Any) -> str:
    """The struct format character(s) of one field."""
    from construct import Array, Bytes
    leaf = _leaf(sub)
    if isinstance(leaf, Bytes | Array):  # one item of the codec's tuples: the raw bytes
        return f"{sub.sizeof()}s"
    if leaf.fmtstr[0] != "<":
        raise TypeError(f"field {sub.name} is not little-endian")
    return leaf.fmtstr[1:]


def _const(sub: Any) -> Any:
    """The Const value of a field, or None."""
    from construct import Const
    node = sub.subcon
    while node is not None:
        if isinstance(node, Const):
            return node.value
        node = getattr(node, "subcon", None)
    return None


def struct_codec(definition: Struct) -> struct.Struct:
    """A ``struct.Struct`` with exactly the layout of a flat construct ``Struct``.

    Only fixed-size little-endian scalar fields (``FormatField``, possibly
    wrapped in ``Const``), ``Bytes`` and fixed ``Array``s (each one item of
    raw bytes) are allowed; anything else is a programming error.
    """
    codec = struct.Struct("<" + "".join(_code(sub) for sub in definition.subcons))
    if codec.size != definition.sizeof():
        raise TypeError(f"{definition} has padding or variable fields: codec {codec.size} != {definition.sizeof()}")
    return codec


def field_offset(definition: Struct, name: str) -> int:
    """Byte offset of a field in a flat, fixed-size construct Struct."""
    offset = 0
    for sub in definition.subcons:
        if sub.name == name:
            return offset
        offset += sub.sizeof()
    raise KeyError(name)


class Scalar:
    """One field of a flat struct: where it lies and its codec, to read or write it in place."""

    __slots__ = ("name", "offset", "codec")

    def __init__(self, name: str, offset: int, code: str) -> None:
        self.name = name
        self.offset = offset
        self.codec = struct.Struct("<" + code)

    def get(self, data: Any, base: int = 0) -> Any:
        """The field's value in the struct that starts at ``base`` of ``data``."""
        return self.codec.unpack_from(data, base + self.offset)[0]

    def put(self, data: Any, value: Any, base: int = 0) -> None:
        """Store ``value`` into the field (``data`` is writable: bytearray, mmap, memoryview)."""
        self.codec.pack_into(data, base + self.offset, value)

    def replaced(self, data: bytes, value: Any) -> bytes:
        """A copy of ``data`` with this field set to ``value``."""
        return data[:self.offset] + self.codec.pack(value) + data[self.offset + self.codec.size:]

    @property
    def end(self) -> int:
        return self.offset + self.codec.size


def _namedtuple(name: str, names: tuple[str, ...]) -> Any:
    """A namedtuple type of fields known only at run time (built from a definition)."""
    return namedtuple(name, names)


def _fields(definition: Struct) -> list[tuple[str, str, Any]]:
    """(name, format, default) of each field of a flat definition: the default is the Const value, zero
    (or zero bytes) for a ``reserved*`` field, else None."""
    from construct import Array, Bytes
    out = []
    for sub in definition.subcons:
        default = _const(sub)
        if default is None and sub.name.startswith("reserved"):
            default = bytes(sub.sizeof()) if isinstance(_leaf(sub), Bytes | Array) else 0
        out.append((sub.name, _code(sub), default))
    if struct.calcsize("<" + "".join(code for _, code, _ in out)) != definition.sizeof():
        raise TypeError(f"{definition} has padding or variable fields")
    return out


class _Layouts:
    """The fields derived from lazy definitions, kept in the user's cache: key -> (CRC of the defining
    file, fields).  Loaded once a process; written back when a definition had to be derived."""

    def __init__(self) -> None:
        self._entries: dict[str, Any] | None = None
        self._crcs: dict[str, int] = {}

    def _path(self) -> str:
        return os.path.join(user_cache_dir(), LAYOUTS_FILE)

    def _crc(self, filename: str) -> int | None:
        if filename not in self._crcs:
            try:
                with open(filename, "rb") as f:
                    text = f.read()
                self._crcs[filename] = zlib.crc32(text) << 32 | len(text)  # its CRC and its length
            except OSError:
                return None
        return self._crcs[filename]

    def fields(self, define: Callable[[], Struct]) -> list[tuple[str, str, Any]]:
        """The fields of what ``define`` returns: from the cache when its file is unchanged, else derived."""
        key = f"{define.__module__}:{define.__qualname__}"
        crc = self._crc(define.__code__.co_filename)
        if self._entries is None:
            try:
                with open(self._path()) as f:
                    self._entries = dict(json.load(f))
            except (OSError, ValueError, TypeError):
                self._entries = {}
        hit = self._entries.get(key)
        if crc is not None and isinstance(hit, list) and len(hit) == 2 and hit[0] == crc:
            try:
                return [(name, code, bytes.fromhex(d[1]) if isinstance(d, list) else d) for name, code, d in hit[1]]
            except (TypeError, ValueError):
                pass
        fields = _fields(define())
        if crc is not None:
            self._entries[key] = [crc, [(n, c, ["hex", d.hex()] if isinstance(d, bytes) else d) for n, c, d in fields]]
            self._store()
        return fields

    def _store(self) -> None:
        """Write the entries back (atomically); a cache that cannot be written is no error."""
        path = self._path()
        tmp = f"{path}.{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(self._entries, f)
            os.replace(tmp, path)
        except OSError:
            pass


_LAYOUTS = _Layouts()


class FlatStruct:
    """A flat construct ``Struct`` with its derived codec, field positions and offsets."""

    def __init__(self, definition: Struct | None, name: str, *,
                 fields: list[tuple[str, str, Any]] | None = None,
                 define: Callable[[], Struct] | None = None) -> None:
        self._definition = definition
        self._define = define
        self.name = name
        fields = _fields(definition) if fields is None and definition is not None else fields or []
        self._codes = [code for _, code, _ in fields]
        self.codec = struct.Struct("<" + "".join(self._codes))
        self.size = self.codec.size
        self.names: tuple[str, ...] = tuple(n for n, _, _ in fields)
        self._fields_type: Any = None
        self.index = SimpleNamespace(**{n: i for i, n in enumerate(self.names)})
        """Each field's position in the codec's tuples: ``index.source`` (a plain namespace: a named-tuple
        type costs a tenth of a millisecond to make, and a recorder's start makes a dozen FlatStructs)."""
        self.scalars: dict[str, Scalar] = {}
        offset = 0
        for field_name, code, _ in fields:
            self.scalars[field_name] = Scalar(field_name, offset, code)
            offset += struct.calcsize("<" + code)
        self.defaults: Mapping[str, Any] = {n: d for n, _, d in fields if d is not None}
        """What ``pack`` writes for a field not given: its Const, or zero for a ``reserved*`` field."""

    @classmethod
    def lazy(cls, define: Callable[[], Struct], name: str) -> FlatStruct:
        """The FlatStruct of what ``define()`` returns, without calling it (nor importing construct)
        while the user's cache holds its fields for the unchanged file that defines it."""
        return cls(None, name, fields=_LAYOUTS.fields(define), define=define)

    @property
    def Fields(self) -> Any:
        """The named-tuple type of the fields (``unpack``'s), made on first use."""
        if self._fields_type is None:
            self._fields_type = _namedtuple(self.name, self.names)
        return self._fields_type

    @property
    def definition(self) -> Struct:
        """The construct ``Struct`` (for a lazy one, made on first use)."""
        if self._definition is None:
            assert self._define is not None
            self._definition = self._define()
        return self._definition

    def __getitem__(self, name: str) -> Scalar:
        return self.scalars[name]

    def offset(self, name: str) -> int:
        return self.scalars[name].offset

    def unpack(self, data: Any, offset: int = 0) -> Any:
        """The fields as a named tuple (``.magic``, ``.seq``, ...)."""
        return self.Fields._make(self.codec.unpack_from(data, offset))

    def pack(self, **values: Any) -> bytes:
        """The struct's bytes; every field not Const or reserved must be given, by name."""
        unknown = values.keys() - self.scalars.keys()
        if unknown:
            raise TypeError(f"{self.name} has no field {sorted(unknown)}")
        try:
            return self.codec.pack(*[values[n] if n in values else self.defaults[n] for n in self.names])
        except KeyError as exc:
            raise TypeError(f"{self.name}.pack: missing field {exc.args[0]}") from None

    def packer(self, *given: str, attrs: tuple[str, ...] = ()) -> Callable[..., bytes]:
        """A fast packer: ``packer("a", "b", attrs=("c",))(obj, a, b)`` packs ``a`` and ``b`` as given,
        ``c`` as ``obj.c``, and every other field as its default (Const, or zero when reserved).
        Without ``attrs`` there is no ``obj`` argument.

        Like ``collections.namedtuple``, it is generated source: one call of the codec with the
        arguments in the definition's order, as fast as a hand-written ``pack``."""
        named = set(given) | set(attrs)
        unknown = named - set(self.names)
        missing = [n for n in self.names if n not in named and n not in self.defaults]
        if missing or unknown or len(named) != len(given) + len(attrs):
            raise TypeError(f"{self.name}.packer: missing {missing}, unknown {sorted(unknown)}, given {given} {attrs}")
        scope = {"_pack": self.codec.pack, **{f"_d_{n}": v for n, v in self.defaults.items()}}
        values = ", ".join(n if n in given else f"obj.{n}" if n in attrs else f"_d_{n}" for n in self.names)
        params = ", ".join((("obj",) if attrs else ()) + given)
        exec(f"def packed({params}):\n    return _pack({values})\n", scope)  # noqa: S102
        return scope["packed"]

    def getter(self, *names: str) -> Callable[[tuple], tuple]:
        """The named fields, in that order, out of one of the codec's tuples."""
        positions = [self.names.index(n) for n in names]
        if len(positions) == 1:
            (only,) = positions
            return lambda values: (values[only],)
        return itemgetter(*positions)

    def prefix(self, last: str) -> struct.Struct:
        """A codec for the fields from the first one up to and including ``last``."""
        count = self.names.index(last) + 1
        return struct.Struct("<" + "".join(self._codes[:count]))


def lazy_mirrors(module: str, mirrors: Mapping[str, FlatStruct]) -> Callable[[str], Any]:
    """A module's PEP 562 ``__getattr__`` for its construct mirrors: ``mirrors[name]``'s definition, made on
    first use, so that a module whose callers need only the FlatStructs never imports construct."""
    def mirror(name: str) -> Any:
        flat = mirrors.get(name)
        if flat is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return flat.definition
    return mirror
