"""Lists of dataclass instances as columns on disk, and back: how the cache keeps a folded model.

``save_frame`` writes one ``.npy`` per field: numbers as int64 (with a mask
where a field can be None), strings as indexes into a string table kept as one
UTF-8 blob and its offsets (a model has an object per RM handle, and as many
stable names), anything else (sets, enums, bytes, tuples) as indexes into a
table of values in a tagged JSON.  ``load_frame`` gives the same list back,
equal field for field.  ``encode``/``decode`` are that tagged JSON, for the
few instances a model holds of everything else.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rmtrace.decoders.roles import Category

from rmtrace.semantics.events import LockKind
from rmtrace.session.entities import FreedBy, LaneState

ENUMS: dict[str, type[enum.Enum]] = {"LaneState": LaneState, "FreedBy": FreedBy, "Category": Category,
                                     "LockKind": LockKind}
"""The enums a model's values may be, by the tag they are saved under."""


class Unsaved(TypeError):
    """A value the codec has no form for: the model is not cached (it is folded again next time)."""


def encode(value: Any) -> Any:
    """``value`` as JSON with tags for what JSON lacks: tuples, sets, bytes, enums, dataclasses."""
    if value is None or isinstance(value, (bool, str, float)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, enum.Enum):
        tag = type(value).__name__
        if ENUMS.get(tag) is not type(value):
            raise Unsaved(f"no saved form for {value!r}")
        return {"enum": tag, "value": value.value}
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((encode(v) for v in value), key=json.dumps)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise Unsaved(f"no saved form for {type(value).__name__}")


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "enum" in value:
        return ENUMS[value["enum"]](value["value"])
    if "bytes" in value:
        return bytes.fromhex(value["bytes"])
    if "tuple" in value:
        return tuple(decode(v) for v in value["tuple"])
    if "set" in value:
        return {decode(v) for v in value["set"]}
    return {decode(k): decode(v) for k, v in value["dict"]}


def encode_instance(item: Any) -> dict[str, Any]:
    return {f.name: encode(getattr(item, f.name)) for f in dataclasses.fields(item)}


def decode_instance(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**{name: decode(value) for name, value in fields.items()})


def save_frame(items: Sequence[Any], cls: type, directory: Path, prefix: str) -> dict[str, Any]:
    """Write ``items`` (instances of dataclass ``cls``) as ``directory/{prefix}.{field}...npy``;
    returns what ``load_frame`` needs besides the files."""
    return save_columns({f.name: [getattr(item, f.name) for item in items] for f in dataclasses.fields(cls)},
                        directory, prefix)


def save_columns(fields: dict[str, list[Any]], directory: Path, prefix: str) -> dict[str, Any]:
    """``save_frame`` of rows given as a column per field (of equal lengths), in the dataclass's order."""
    columns: dict[str, Any] = {}
    for name, values in fields.items():
        path = directory / f"{prefix}.{name}"
        if all(type(v) is int for v in values):
            np.save(f"{path}.npy", np.array(values, dtype=np.int64))
            columns[name] = "int"
        elif all(v is None or type(v) is int for v in values):
            np.save(f"{path}.npy", np.array([0 if v is None else v for v in values], dtype=np.int64))
            np.save(f"{path}.none.npy", np.array([v is None for v in values], dtype=bool))
            columns[name] = "int?"
        elif all(v is None or type(v) is str for v in values):
            _save_strings(values, path)
            columns[name] = "str"
        else:
            texts: dict[tuple[type, Any], str] = {}
            _save_strings([None if v is None else _json_text(v, texts) for v in values], path)
            columns[name] = "json"
    return {"rows": len(next(iter(fields.values()), [])), "columns": columns}


_ATOMS = (str, int, bool, float)
"""Types whose values ``_json_text`` encodes once per column (a value equal to another of its type is the same)."""


def _json_text(value: Any, texts: dict[tuple[type, Any], str]) -> str:
    """``json.dumps(encode(value))``, kept in ``texts`` by type and value for a scalar or enum member: a
    timeline's values are a few states, engines and ranks, tens of thousands of times (each encoded was
    a fifth of a model's store).  Containers are encoded each time (a tuple of 1 and True equals one of 1 and 1)."""
    kind = type(value)
    if kind not in _ATOMS and not isinstance(value, enum.Enum):
        return json.dumps(encode(value))
    key = (kind, value)
    text = texts.get(key)
    if text is None:
        text = texts[key] = json.dumps(encode(value))
    return text


def load_frame(cls: type, frame: dict[str, Any], directory: Path, prefix: str) -> list[Any]:
    """The instances ``save_frame`` wrote."""
    fields = load_columns(frame, directory, prefix)
    # positionally, in the dataclass's order: save_frame wrote every field (one missing is a KeyError: the
    # model is folded again), and a call by keyword costs a dict per row
    return [cls(*row) for row in zip(*(fields[f.name] for f in dataclasses.fields(cls)))]


def load_columns(frame: dict[str, Any], directory: Path, prefix: str) -> dict[str, list[Any]]:
    """The values ``save_frame`` wrote, a list per field: for a reader that keeps them as rows of its own
    (a timeline's transitions), not as instances."""
    fields: dict[str, list[Any]] = {}
    for name, kind in frame["columns"].items():
        path = directory / f"{prefix}.{name}"
        if kind == "int":
            fields[name] = np.load(f"{path}.npy").tolist()
        elif kind == "int?":
            values, none = np.load(f"{path}.npy").tolist(), np.load(f"{path}.none.npy").tolist()
            fields[name] = [None if n else v for v, n in zip(values, none)]
        elif kind == "str":
            fields[name] = _load_strings(path)
        else:
            fields[name] = _load_strings(path, lambda text: decode(json.loads(text)))
    return fields


def _save_strings(values: list[str | None], path: Path) -> None:
    """Each distinct string once (a UTF-8 blob and its offsets), and each value's index (-1: None)."""
    table: dict[str, int] = {}
    ids = np.array([-1 if v is None else table.setdefault(v, len(table)) for v in values], dtype=np.int64)
    blobs = [s.encode() for s in table]
    np.save(f"{path}.ids.npy", ids)
    np.save(f"{path}.offsets.npy", np.cumsum([0] + [len(b) for b in blobs], dtype=np.int64))
    Path(f"{path}.blob").write_bytes(b"".join(blobs))


def _load_strings(path: Path, make: Callable[[str], Any] = str) -> list[Any]:
    """The values ``_save_strings`` wrote, each distinct one made once by ``make`` (values that can
    change are made for each row that holds them)."""
    ids = np.load(f"{path}.ids.npy")
    offsets = np.load(f"{path}.offsets.npy").tolist()
    blob = Path(f"{path}.blob").read_bytes()
    texts = [blob[a:b].decode() for a, b in zip(offsets, offsets[1:])]
    table = [make(text) for text in texts]
    if any(isinstance(v, (list, set, dict)) for v in table):
        return [None if i < 0 else make(texts[i]) for i in ids.tolist()]
    return [None if i < 0 else table[i] for i in ids.tolist()]
