"""Users' own decoders: structs from their debug-built objects, and plugin packages.

``rmtrace decoders from-dwarf MODULE.ko --struct NAME --source SRC --op N``
reads NAME's layout (and every struct it contains) from the object's DWARF
(``rmtrace.dwarf``, the reader the profile generator uses) and
saves it as JSON in the user decoder directory (``$RMTRACE_DECODER_DIR``, else
``platformdirs.user_config_dir("rmtrace")/decoders``).  Every later
``DecoderSet`` loads those files and binds (SRC, N) to a :class:`StructOp`:
each buffer of such a record is decoded as the first given struct whose size
equals the buffer's (the first struct when none does).  User decoders are laid
over the built-in tables, so they can also replace one.

Packages can add whole tables through the entry point group
``rmtrace.decoders``: the entry point names a callable ``tables(profile) ->
{source: {op: Op}}`` (see docs/decoders.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from rmtrace.decoders.base import Decoded, Label, Level, Op
from rmtrace.decoders.context import FLEX_RULES
from rmtrace.decoders.ioctl import summary_args
from rmtrace.decoders.parse import handles_of, parse_buffer, status_of
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.structs import Definitions

from rmtrace.errors import RmtraceError
from rmtrace.layout import Field, Layout
from rmtrace.record import Record, Source, enum_name

FORMAT = 1
ENV_DIR = "RMTRACE_DECODER_DIR"
ENTRY_POINT_GROUP = "rmtrace.decoders"


def decoder_dir() -> Path:
    """Where user decoders live."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    import platformdirs
    return Path(platformdirs.user_config_dir("rmtrace")) / "decoders"


@dataclasses.dataclass(frozen=True)
class UserDecoder:
    """A saved user decoder: which (source, op) it names, its structs and their layouts."""

    source: int
    op: int
    name: str
    structs: tuple[str, ...]
    layouts: Mapping[str, Any]
    origin: str = ""

    @property
    def path_name(self) -> str:
        return f"{enum_name(Source, self.source).lower()}-{self.op:#x}.json"

    def to_json(self) -> dict:
        return {"format": FORMAT, "source": enum_name(Source, self.source), "op": self.op, "name": self.name,
                "structs": list(self.structs), "origin": self.origin,
                "layouts": {n: {"size": l.size, "kind": l.kind, "fields": [dataclasses.asdict(f) for f in l.fields]}
                            for n, l in self.layouts.items()}}

    @classmethod
    def from_json(cls, data: dict, origin: str) -> UserDecoder:
        if data.get("format") != FORMAT:
            raise RmtraceError(f"{origin}: user decoder format {data.get('format')!r}, this rmtrace reads {FORMAT}")
        try:
            layouts = {name: Layout(name, l["size"], tuple(Field(**{**f, "dims": tuple(f.get("dims", ()))})
                                                             for f in l["fields"]), l["kind"])
                       for name, l in data["layouts"].items()}
            return cls(int(Source[data["source"]]), int(data["op"]), data["name"], tuple(data["structs"]),
                       layouts, data.get("origin", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise RmtraceError(f"{origin}: not a user decoder ({type(exc).__name__}: {exc})") from None


def from_dwarf(obj: str | os.PathLike, structs: Sequence[str], source: int, op: int, name: str | None = None) -> UserDecoder:
    """A decoder for (source, op) from the layouts of ``structs`` in ``obj``'s DWARF."""
    from rmtrace.dwarf import ObjectFacts  # pyelftools: only here, not in every command that decodes
    path = os.fspath(obj)
    try:
        facts = ObjectFacts(path)
    except FileNotFoundError:
        raise RmtraceError(f"{path}: no such file") from None
    except Exception as exc:  # noqa: BLE001 -- pyelftools raises many types for non-ELF input
        raise RmtraceError(f"{path}: not an object file with DWARF ({type(exc).__name__}: {exc})") from None
    layouts = facts.layouts(structs)
    missing = [s for s in structs if facts.layout_name(s) not in layouts]
    if missing:
        raise RmtraceError(f"{path}: no struct or union called {', '.join(missing)} in its DWARF "
                           f"(compile with -g; give the struct tag or typedef name)")
    roots = tuple(n for s in structs if (n := facts.layout_name(s)) is not None)
    return UserDecoder(int(source), int(op), name or roots[0].upper(), roots, layouts, origin=path)


def save(decoder: UserDecoder, directory: Path | None = None) -> Path:
    directory = directory or decoder_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / decoder.path_name
    path.write_text(json.dumps(decoder.to_json(), indent=1) + "\n")
    return path


def load_all(directory: Path | None = None) -> Iterator[tuple[Path, UserDecoder | RmtraceError]]:
    """Every saved user decoder (or the error that keeps one from loading)."""
    directory = directory or decoder_dir()
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json")):
        try:
            yield path, UserDecoder.from_json(json.loads(path.read_text()), str(path))
        except ValueError as exc:
            yield path, RmtraceError(f"{path}: not JSON ({exc})")
        except RmtraceError as exc:
            yield path, exc


class StructOp(Op):
    """A user decoder: every buffer decoded as the user's struct of matching size."""

    def __init__(self, decoder: UserDecoder) -> None:
        self.decoder = decoder
        self.name = decoder.name
        self.defs = Definitions(decoder.layouts, FLEX_RULES)
        self.by_size = {decoder.layouts[s].size: s for s in reversed(decoder.structs)}

    def label(self, record: Record) -> Label:
        return Label(self.name)

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        first = records[0]
        out = Decoded(first.source, first.op, self.name, level=level)
        for rec in records:
            for buf in rec.buffers:
                struct = self.by_size.get(len(buf.data), self.decoder.structs[0])
                parsed = parse_buffer(self.defs, struct, buf)
                if parsed.value is None:
                    out.known = False
                    out.note(parsed.note or f"not a {struct}")
                elif not out.args:
                    out.args = summary_args(parsed.layout, parsed.value, frozenset(), self.defs.layouts)
                    out.handles = handles_of(parsed.layout, parsed.value, self.defs.layouts)
                    status = status_of(parsed.layout, parsed.value, self.defs.layouts)
                    if status is not None:
                        out.status, out.status_name, out.ok = status, str(status), status == 0
                if level >= Level.FULL:
                    out.buffers.append(parsed)
        out.extra["user_decoder"] = self.decoder.origin
        return out


def user_tables(profile: DriverProfile) -> Iterator[tuple[str, Mapping[int, Mapping[int, Op]]]]:
    """(origin, {source: {op: Op}}) of every user decoder file and plugin; broken ones are skipped."""
    for path, found in load_all():
        if isinstance(found, UserDecoder):
            yield str(path), {found.source: {found.op: StructOp(found)}}
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            tables = entry.load()(profile)
        except Exception:  # noqa: BLE001 -- a broken plugin is listed by 'rmtrace decoders list', not fatal
            continue
        yield f"plugin {entry.name} ({entry.value})", tables


def plugin_errors(profile: DriverProfile) -> list[str]:
    """Why each broken plugin did not load (for ``rmtrace decoders list``)."""
    errors = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()(profile)
        except Exception as exc:  # noqa: BLE001 -- reported, not raised
            errors.append(f"plugin {entry.name} ({entry.value}): {type(exc).__name__}: {exc}")
    return errors
