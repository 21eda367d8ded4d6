"""The folded session model, kept in a trace's cache entry beside its call table.

``session(reader, decoders, fold)`` gives the trace's ``SessionModel``: loaded
when the entry holds one, else folded (``fold`` over the call table, itself
loaded or built) and stored.  The model is kept as columns where it is large
(its RM objects and its transitions, ``rmtrace.columns.frames``) and as tagged
JSON where it is small (processes, clients, channels, ranks, GSP exchanges,
stray frees, the recorder's stop reason, losses and the calls it marked in flight), in ``entry/model``,
written to a temporary directory and renamed into place.  A model the codec
cannot save (a value it has no form for) is simply folded again next time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmtrace.decoders import DecoderSet

from rmtrace.columns.cache import build_into, cache_root, cacheable, call_table, entry_key, load
from rmtrace.columns.frames import Unsaved, decode, decode_instance, encode, encode_instance, load_frame, save_frame
from rmtrace.columns.table import CallTable
from rmtrace.session.entities import CallInfo, Channel, Client, GspExchange, Process, Rank, RmObject, Transition
from rmtrace.session.fold import Folder
from rmtrace.session.model import SNAPSHOT_EVERY, Objects, SessionModel, client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader

MODEL = "model"
MODEL_VERSION = 2
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
    root = cache_root() if cache and cacheable(reader) else None
    if root is None:
        return fold(reader, decoders, call_table(reader, decoders, cache=False), snapshot_every), _kept
    key = entry_key(reader, decoders)
    table = load(root / key) or build_into(root, key, reader, decoders)
    model = load_model(root / key, reader, decoders, table, snapshot_every)
    if model is not None:
        return model, _kept
    folded = fold(reader, decoders, table, snapshot_every)
    return folded, lambda: (root / key).is_dir() and store_model(root / key, folded)


def _kept() -> bool:
    return False


FoldObjects = Callable[[TraceReader, DecoderSet, CallTable], Objects]
"""Folds a trace's call table as far as its objects (``rmtrace.session.model.fold_objects``)."""


def objects(reader: TraceReader, decoders: DecoderSet, fold: FoldObjects, cache: bool = True) -> Objects:
    """The trace's processes, clients and objects: its whole model when the entry holds one, else ``fold``
    over its call table (loaded, or built into the entry)."""
    root = cache_root() if cache and cacheable(reader) else None
    if root is None:
        return fold(reader, decoders, call_table(reader, decoders, cache=False))
    key = entry_key(reader, decoders)
    table = load(root / key) or build_into(root, key, reader, decoders)
    model = load_model(root / key, reader, decoders, table, SNAPSHOT_EVERY)
    return model if model is not None else fold(reader, decoders, table)


def store_model(entry: Path, model: SessionModel) -> bool:
    """Keep ``model`` in ``entry``; False when it has a value the codec cannot save, or the entry cannot be written."""
    try:
        work = Path(tempfile.mkdtemp(prefix="model.", suffix=".tmp", dir=entry))
    except OSError:
        return False
    try:
        manifest = {
            "version": MODEL_VERSION, "start_ns": model.start_ns, "end_ns": model.end_ns,
            "objects": save_frame(model.object_list, RmObject, work, "objects"),
            "transitions": save_frame(model.transitions, Transition, work, "transitions"),
            "processes": [encode_instance(p) for p in model.processes.values()],
            "clients": [encode_instance(c) for c in model.clients],
            "channels": [encode_instance(c) for c in model.channels.values()],
            "ranks": [encode_instance(r) for r in model.ranks.values()],
            "gsp": [encode_instance(x) for x in model.gsp],
            "stray_frees": [encode_instance(c) for c in model.stray_frees],
            "stop_reason": encode(model.stop_reason), "lost": encode(model.lost),
            "marked_in_flight": encode(set(model.marked_in_flight)),
        }
        (work / "manifest.json").write_text(json.dumps(manifest))
        os.rename(work, entry / MODEL)
        return True
    except (Unsaved, OSError):
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_model(entry: Path, reader: TraceReader, decoders: DecoderSet, table: CallTable,
               snapshot_every: int) -> SessionModel | None:
    """The model ``entry`` holds, on ``table``; None when there is none or it cannot be read."""
    where = entry / MODEL
    try:
        manifest = json.loads((where / "manifest.json").read_text())
        if manifest.get("version") != MODEL_VERSION:
            return None
        timeline = Timeline(snapshot_every)
        folder = Folder(decoders, timeline, client_ids(reader.meta))
        _restore(folder, manifest, where)
        transitions = load_frame(Transition, manifest["transitions"], where, "transitions")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for t in transitions:  # in time order already: freeze keeps that order
        timeline.set(t.t_ns, t.seq, t.entity, t.attr, t.value)
    timeline.freeze(manifest["end_ns"])
    return SessionModel(reader, decoders, folder, timeline, manifest["start_ns"], manifest["end_ns"], table)


def _restore(folder: Folder, manifest: dict[str, Any], where: Path) -> None:
    """The fold's results, as the fold left them in ``folder``."""
    folder.object_list = load_frame(RmObject, manifest["objects"], where, "objects")
    folder.objects = {(o.client_id, o.handle): o for o in folder.object_list}  # the newest object of each handle
    folder.processes = {p.pid: p for p in (decode_instance(Process, f) for f in manifest["processes"])}
    folder.clients = {c.id: c for c in (decode_instance(Client, f) for f in manifest["clients"])}
    folder.channels = {c.id: c for c in (decode_instance(Channel, f) for f in manifest["channels"])}
    folder.ranks = {r.id: r for r in (decode_instance(Rank, f) for f in manifest["ranks"])}
    folder.gsp = [decode_instance(GspExchange, f) for f in manifest["gsp"]]
    folder.stray_frees = [decode_instance(CallInfo, f) for f in manifest["stray_frees"]]
    folder.stop_reason = decode(manifest["stop_reason"])
    folder.lost = decode(manifest["lost"])
    folder.marked_in_flight = decode(manifest["marked_in_flight"])
