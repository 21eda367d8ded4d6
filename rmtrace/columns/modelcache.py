"""The folded session model, kept in a trace's cache entry beside its call table.

``session(reader, decoders, fold)`` gives the trace's ``SessionModel``: loaded
when the entry holds one, else folded (``fold`` over the call table, itself
loaded or built) and stored.  The model is kept as columns where it grows with
the trace: its RM objects (``rmtrace.session.objects.ObjectColumns``, mapped
when loaded and made into ``RmObject``\\ s only when read), its transitions
and its channels (``rmtrace.columns.frames``); and as tagged JSON where it is
small (processes, clients, ranks, GSP exchanges, stray frees, the recorder's
stop reason, losses and the calls it marked in flight), in ``entry/model``,
written to a temporary directory and renamed into place.  ``objects`` gives
what ``load_objects`` wants (processes, clients, objects) from the same files
without the rest, or from ``entry/objects``, where an objects-only fold keeps
just those.  ``channels`` keeps the model a channels-only fold makes (what
wedges reads) in ``entry/channels``, in the same form as the whole model's,
so that the next wedges (or the TUI's first screen) loads it, whichever
command made the entry.  A model the codec cannot save (a value it has no
form for) is simply folded again next time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtrace.decoders import DecoderSet

from rmtrace.columns.cache import build_into, built_table, cache_root, cacheable, entry_key, load
from rmtrace.columns.collector import young_collections
from rmtrace.columns.frames import (
    Unsaved,
    decode,
    decode_instance,
    encode,
    encode_instance,
    load_columns,
    load_frame,
    save_columns,
    save_frame,
)
from rmtrace.columns.table import CallTable
from rmtrace.session.entities import CallInfo, Channel, Client, GspExchange, Process, Rank
from rmtrace.session.model import SNAPSHOT_EVERY, Objects, ObjectsModel, SessionModel
from rmtrace.session.objects import NewestObjects, ObjectColumns, ObjectList
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader

if TYPE_CHECKING:
    from rmtrace.session.fold import Folder

MODEL = "model"
CHANNELS = "channels"
OBJECTS = "objects"
MODEL_VERSION = 3
"""Bumped whenever what a stored model holds changes meaning."""

Fold = Callable[[TraceReader, DecoderSet, CallTable, int], SessionModel]
"""Folds a trace's call table into its model (``rmtrace.session.model.fold_session``)."""


def session(reader: TraceReader, decoders: DecoderSet, snapshot_every: int, fold: Fold,
            cache: bool = True) -> SessionModel:
    model, keep = unkept_session(reader, decoders, snapshot_every, fold, cache)
    keep()
    return model


def unkept_session(reader: TraceReader, decoders: DecoderSet, snapshot_every: int, fold: Fold,
                   cache: bool = True) -> tuple[SessionModel, Callable[[], bool]]:
    """``session``'s model, and what stores it in the cache entry (nothing when it came from there): for a
    caller that shows the model before it pays for storing it (the TUI's lanes and wedges)."""
    model, _, keep = _unkept(reader, decoders, cache, snapshot_every, lambda table: fold(reader, decoders, table, snapshot_every),
                             (MODEL,), store_model)
    return model, keep


def _unkept(reader: TraceReader, decoders: DecoderSet, cache: bool, snapshot_every: int,
            fold: Callable[[CallTable], SessionModel], kept: tuple[str, ...], store: Callable[[Path, SessionModel], bool]
            ) -> tuple[SessionModel, str | None, Callable[[], bool]]:
    """The model of the first of ``kept`` the trace's entry holds, and its name; else ``fold`` over the call
    table (loaded, or built into the entry), None, and what stores it in the entry (``store``)."""
    found = _entry(reader, decoders, cache)
    if found is None:
        return fold(built_table(reader, decoders, stash=True, params=True)), None, _kept
    entry, table = found
    for name in kept:
        model = load_model(entry, reader, decoders, table, snapshot_every, name)
        if model is not None:
            return model, name, _kept
    folded = fold(table)
    return folded, None, lambda: entry.is_dir() and store(entry, folded)


def _entry(reader: TraceReader, decoders: DecoderSet, cache: bool, params: bool = True
           ) -> tuple[Path, CallTable] | None:
    """The trace's cache entry and its call table (loaded, or built into it, for a fold that reads params
    unless not ``params``); None with the cache off or for a trace the cache does not keep."""
    root = cache_root() if cache and cacheable(reader) else None
    if root is None:
        return None
    key = entry_key(reader, decoders)
    table = load(root / key)  # not `or`: an empty trace's table is falsy (no rows) and kept all the same
    return root / key, table if table is not None else build_into(root, key, reader, decoders, params=params)


def _kept() -> bool:
    return False


FoldObjects = Callable[[TraceReader, DecoderSet, CallTable], ObjectsModel]
"""Folds a trace's call table as far as its objects (``rmtrace.session.model.fold_objects``)."""
FoldChannels = Callable[[TraceReader, DecoderSet, CallTable], SessionModel]
"""Folds a trace's call table as far as its channels (``rmtrace.session.model.fold_channels``)."""


def objects(reader: TraceReader, decoders: DecoderSet, fold: FoldObjects, cache: bool = True) -> Objects:
    """The trace's processes, clients and objects: from its entry (its model's or its objects'), else
    ``fold`` over its call table (loaded, or built into the entry), stored in ``entry/objects``."""
    found = _entry(reader, decoders, cache, params=False)  # the objects' fold reads no params
    if found is None:
        return fold(reader, decoders, built_table(reader, decoders, stash=True))
    entry, table = found
    for kept in (MODEL, OBJECTS):
        objects_ = load_objects_of(entry / kept, table)
        if objects_ is not None:
            return objects_
    folded = fold(reader, decoders, table)
    # the stored columns, mapped, in place of the fold's in memory (87 bytes an object: 68 MB at 10M records)
    stored = load_objects_of(entry / OBJECTS, table) if store_objects(entry, folded) else None
    return stored if stored is not None else folded


def channels(reader: TraceReader, decoders: DecoderSet, fold: FoldChannels, cache: bool = True) -> SessionModel:
    """The trace's model as far as its channels go: its whole model when the entry holds one, else the
    channels' model it holds, else ``fold`` over its call table (loaded, or built into the entry), stored
    in ``entry/channels``."""
    model, _, keep = unkept_channels(reader, decoders, fold, cache)
    keep()
    return model


def unkept_channels(reader: TraceReader, decoders: DecoderSet, fold: FoldChannels, cache: bool = True
                    ) -> tuple[SessionModel, bool, Callable[[], bool]]:
    """``channels``' model, whether it is the whole one, and what stores a folded one in ``entry/channels``
    (nothing when it came from the entry): for a caller that shows it first."""
    model, name, keep = _unkept(reader, decoders, cache, SNAPSHOT_EVERY, lambda table: fold(reader, decoders, table),
                                (MODEL, CHANNELS), _store_channels)
    return model, name == MODEL, keep


def store_model(entry: Path, model: SessionModel) -> bool:
    """Keep ``model`` in ``entry``; False when it has a value the codec cannot save, or the entry cannot be written."""
    return _store_session(entry, model, MODEL)


def _store_channels(entry: Path, model: SessionModel) -> bool:
    """``store_model`` of a channels-only fold's model, to ``entry/channels``."""
    return _store_session(entry, model, CHANNELS)


def _store_session(entry: Path, model: SessionModel, name: str) -> bool:
    """``store_model`` to ``entry/name`` (``MODEL``, or ``CHANNELS`` for a channels-only fold's model)."""
    def write(work: Path) -> dict[str, Any]:
        try:
            columns = ObjectColumns.from_objects(model.object_list, [c.id for c in model.clients])
        except ValueError as e:  # objects no fold made (or made otherwise): folded again next time
            raise Unsaved(str(e)) from e
        return {
            "start_ns": model.start_ns, "end_ns": model.end_ns,
            **_objects_part(model, columns, work),
            "transitions": save_columns(model.timeline.columns(), work, "transitions"),
            "channels": save_frame(list(model.channels.values()), Channel, work, "channels"),
            "ranks": [encode_instance(r) for r in model.ranks.values()],
            "gsp": [encode_instance(x) for x in model.gsp],
            "stray_frees": [encode_instance(c) for c in model.stray_frees],
            "stop_reason": encode(model.stop_reason), "lost": encode(model.lost),
            "marked_in_flight": encode(set(model.marked_in_flight)),
        }
    return _store(entry, name, write)


def store_objects(entry: Path, model: ObjectsModel) -> bool:
    """Keep an objects-only fold's processes, clients and objects in ``entry/objects``."""
    return _store(entry, OBJECTS, lambda work: _objects_part(model, model.columns, work))


def _objects_part(model: Objects, columns: ObjectColumns, work: Path) -> dict[str, Any]:
    """What ``load_objects_of`` reads: the processes and clients, and the objects' columns (written to ``work``)."""
    return {"processes": [encode_instance(p) for p in model.processes.values()],
            "clients": [encode_instance(c) for c in model.clients], "objects": columns.save(work, "objects")}


def _store(entry: Path, name: str, write: Callable[[Path], dict[str, Any]]) -> bool:
    """``write``'s files and manifest, made in a temporary directory of ``entry`` and renamed to ``entry/name``."""
    try:
        work = Path(tempfile.mkdtemp(prefix=f"{name}.", suffix=".tmp", dir=entry))
    except OSError:
        return False
    try:
        manifest = {"version": MODEL_VERSION, **write(work)}
        (work / "manifest.json").write_text(json.dumps(manifest))
        os.rename(work, entry / name)
        return True
    except (Unsaved, OSError):
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _manifest(where: Path) -> dict[str, Any] | None:
    """The manifest of ``where`` (``entry/model`` or ``entry/objects``) when this version wrote it."""
    manifest = json.loads((where / "manifest.json").read_text())
    return manifest if isinstance(manifest, dict) and manifest.get("version") == MODEL_VERSION else None


def load_objects_of(where: Path, table: CallTable) -> ObjectsModel | None:
    """The processes, clients and objects ``where`` keeps, on ``table``; None when it keeps none or
    they cannot be read."""
    try:
        manifest = _manifest(where)
        if manifest is None:
            return None
        processes = {p.pid: p for p in (decode_instance(Process, f) for f in manifest["processes"])}
        clients = tuple(decode_instance(Client, f) for f in manifest["clients"])
        columns = ObjectColumns.load(manifest["objects"], where, "objects")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ObjectsModel(table, processes, clients, columns)


def load_model(entry: Path, reader: TraceReader, decoders: DecoderSet, table: CallTable,
               snapshot_every: int, name: str = MODEL) -> SessionModel | None:
    """The model ``entry`` holds (in ``entry/name``: ``CHANNELS`` for the channels'), on ``table``; None
    when there is none or it cannot be read."""
    from rmtrace.session.fold import Folder  # with the semantic layer's interpreter: not for ``objects``' loads
    where = entry / name
    # a load makes the model's objects and transitions (hundreds of thousands, none garbage): a full
    # collection meanwhile walks them and the caller's whole heap (the TUI's) again, half the load's time
    try:
        with young_collections():
            manifest = _manifest(where)
            if manifest is None:
                return None
            timeline = Timeline(snapshot_every)
            folder = Folder(decoders, timeline, client_ids(reader.meta))
            _restore(folder, manifest, where)
            transitions = load_columns(manifest["transitions"], where, "transitions")
            timeline.load(transitions["t_ns"], transitions["seq"], transitions["entity"], transitions["attr"],
                          transitions["value"], manifest["end_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return SessionModel(reader, decoders, folder, timeline, manifest["start_ns"], manifest["end_ns"], table)


def _restore(folder: Folder, manifest: dict[str, Any], where: Path) -> None:
    """The fold's results, as the fold left them in ``folder`` (its objects made when first read)."""
    object_list = ObjectList(ObjectColumns.load(manifest["objects"], where, "objects"))
    folder.object_list = object_list  # type: ignore[assignment]  # a Sequence: the model only reads it
    folder.objects = NewestObjects(object_list)  # type: ignore[assignment]
    folder.processes = {p.pid: p for p in (decode_instance(Process, f) for f in manifest["processes"])}
    folder.clients = {c.id: c for c in (decode_instance(Client, f) for f in manifest["clients"])}
    folder.channels = {c.id: c for c in load_frame(Channel, manifest["channels"], where, "channels")}
    folder.ranks = {r.id: r for r in (decode_instance(Rank, f) for f in manifest["ranks"])}
    folder.gsp = [decode_instance(GspExchange, f) for f in manifest["gsp"]]
    folder.stray_frees = [decode_instance(CallInfo, f) for f in manifest["stray_frees"]]
    folder.stop_reason = decode(manifest["stop_reason"])
    folder.lost = decode(manifest["lost"])
    folder.marked_in_flight = decode(manifest["marked_in_flight"])
