"""The table's stream forgets an exited client, and the Perfetto writer the state tracks it no longer needs."""

from __future__ import annotations

import io

from rmtrace.export.fold import TableStream
from rmtrace.export.perfetto import PerfettoWriter, written_rows
from rmtrace.export.source import ExportInput
from tests.export_support import shipped


def _kept_of(stream: TableStream, client_id: str) -> dict[str, int]:
    """How many entries of each of the fold's per-object and per-channel maps belong to ``client_id``."""
    f = stream.folder
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
        stream = TableStream(src.reader, src.decoders, block_rows=256)
        writer = PerfettoWriter(io.BytesIO(), src, stream)
        seen: dict[str, dict[str, int]] = {}
        for row in written_rows(src, stream, writer):
            if row.client_id in ("c1", "c2") and row.client_id not in seen:
                seen[row.client_id] = {}
            for cid in seen:
                kept = _kept_of(stream, cid)
                seen[cid] = {k: max(v, seen[cid].get(k, 0)) for k, v in kept.items()}
        for cid in ("c1", "c2"):
            assert seen[cid]["objects"] > 0 and seen[cid]["channels"] > 0 and seen[cid]["siblings"] > 0, seen
            assert _kept_of(stream, cid) == dict.fromkeys(seen[cid], 0), cid
            assert not [e for e in (*writer._segments, *writer._tracks) if e.startswith(f"chan/{cid}/")], cid
            assert stream.folder.clients[cid].pid  # the client stays: a later record of its pid still names it
        assert not stream.retired  # every forgotten channel's last state was written
        assert not stream.transitions.pending and not stream.folder.gsp  # nothing piles up
