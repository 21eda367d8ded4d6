"""The streaming fold forgets an exited client, and the Perfetto writer the state tracks it no longer needs."""

from __future__ import annotations

import io

from rmtrace.export.fold import StreamingFold
from rmtrace.export.perfetto import PerfettoWriter, written_calls
from rmtrace.export.source import ExportInput
from tests.export_support import shipped


def _kept_of(fold: StreamingFold, client_id: str) -> dict[str, int]:
    """How many entries of each of the fold's per-object and per-channel maps belong to ``client_id``."""
    f = fold.folder
    chans = [c for cs in f._channels_by_bare_handle.values() for c in cs]
    return {
        "objects": sum(1 for key in f.objects if key[0] == client_id),
        "object_list": sum(1 for obj in f.object_list if obj.client_id == client_id),
        "by_handle": sum(1 for obj in f._by_handle.values() if obj.client_id == client_id),
        "siblings": sum(1 for key in f._siblings if key[0] == client_id),
        "channels": sum(1 for chan in f.channels.values() if chan.client_id == client_id),
        "channel_flags": sum(1 for cid in f._channel_flags if cid.startswith(f"{client_id}/")),
        "bare_handles": sum(1 for chan in chans if chan.client_id == client_id),
        "channel_by_handle": sum(1 for chan in f._channel_by_handle.values() if chan.client_id == client_id),
    }


def test_an_exited_client_is_forgotten_by_the_fold_and_by_perfetto():
    # three CUDA programs one after another: c1 and c2 have exited (and c3 has started) by the end
    with ExportInput(shipped("cuda-streams-3x-sequential"), progress=False) as src:
        fold = StreamingFold(src.decoders)
        writer = PerfettoWriter(io.BytesIO(), src, fold)
        seen: dict[str, dict[str, int]] = {}
        for info in written_calls(src, fold, writer):
            if info.client_id in ("c1", "c2") and info.client_id not in seen:
                seen[info.client_id] = {}
            for cid in seen:
                kept = _kept_of(fold, cid)
                seen[cid] = {k: max(v, seen[cid].get(k, 0)) for k, v in kept.items()}
        for cid in ("c1", "c2"):
            assert seen[cid]["objects"] > 0 and seen[cid]["channels"] > 0 and seen[cid]["siblings"] > 0, seen
            assert _kept_of(fold, cid) == dict.fromkeys(seen[cid], 0), cid
            assert not [e for e in (*writer._segments, *writer._tracks) if e.startswith(f"chan/{cid}/")], cid
            assert fold.folder.clients[cid].pid  # the client stays: a later record of its pid still names it
        assert not fold.retired  # every forgotten channel's last state was written


def test_a_fold_for_rows_keeps_no_transitions():
    # parquet takes each call's CallInfo and no lane states: nothing may pile up for it
    with ExportInput(shipped("cuda-streams-3x-sequential"), progress=False) as src:
        fold = StreamingFold(src.decoders, transitions=False)
        clients = {fold.fold(call).client_id for call in src.calls()}
        assert {"c1", "c2", "c3"} <= clients
        assert not fold.transitions.pending and not list(fold.transitions.final()) and not fold.retired
