"""pcapng from the call table is byte for byte what the decoders' call-by-call path writes.

The oracle here pairs and decodes every call with the decoders (``ExportInput.calls``), renders its line
as ``rmtrace show`` does, and writes each record with scapy's own enhanced packet block writer, in record
order: what ``write_pcapng`` wrote before it read the table.
"""

from __future__ import annotations

import io

import pytest
from rmtrace.decoders import Level, render

from rmtrace import captures
from rmtrace.export.pcapng import INTERFACES, RecordPcapNgWriter, descriptions, write_pcapng
from rmtrace.export.progress import Progress
from rmtrace.export.source import ExportInput
from rmtrace.record import decode_record
from tests.export_support import legacy_replay  # noqa: F401 -- a fixture


def decoders_pcapng(path: str, out: str) -> int:
    with ExportInput(path, progress=False) as src:
        raw: dict[int, bytes] = {}  # each record's bytes as the file holds them, by sequence number

        def records():
            for view in src.reader.raw_records():
                rec = decode_record(view)
                raw[rec.seq] = bytes(view)
                yield rec

        packets = []
        for call in src.decoders.calls(records()):
            line = render.line(src.decoders.decode(call, Level.CALL), call, src.start_ns, src.end_ns)
            packets += [(rec, raw.pop(rec.seq), line) for rec in call.records]
        writer = RecordPcapNgWriter(out, descriptions(src))
        writer.tsresol = 1  # timestamps handed over in ns, the interfaces' unit
        writer._write_header(None)
        interfaces = list(INTERFACES)
        for rec, data, line in sorted(packets, key=lambda p: p[0].seq):
            writer._write_block_epb(data, ifid=interfaces.index(rec.source), timestamp=rec.time_ns + (src.wall_offset_ns or 0),
                                    comments=[f"pid {rec.pid} tid {rec.tid}".encode(), line.encode()])
        writer.close()
        return len(packets)


@pytest.mark.parametrize("trace", [*captures.shipped(), "legacy-replay"])
def test_table_pcapng_is_the_decoders_byte_for_byte(trace, tmp_path, legacy_replay):  # noqa: F811
    path = legacy_replay if trace == "legacy-replay" else str(captures.path(trace))
    expected, got = tmp_path / "decoders.pcapng", tmp_path / "table.pcapng"
    count = decoders_pcapng(path, str(expected))
    with ExportInput(path, progress=False) as src:
        assert write_pcapng(src, str(got)) == count == src.reader.record_count
    assert got.read_bytes() == expected.read_bytes()


def test_the_progress_line_counts_every_record(tmp_path):
    path = str(captures.path("cuda-streams-3x-sequential"))
    shown = io.StringIO()
    with ExportInput(path) as src:
        total = src.reader.record_count
        src.progress = Progress("rmtrace export", total, stream=shown, enabled=True, interval_s=0)
        write_pcapng(src, str(tmp_path / "out.pcapng"))
    drawn = shown.getvalue().split("\r")[1:]
    assert len(drawn) >= 2  # as it went, then once more at the end
    assert drawn[-1].startswith(f"rmtrace export: {total:,} of {total:,} records (100%), ") and drawn[-1].endswith("\n")


def test_the_comments_kept_per_thread_are_bounded_and_change_nothing(tmp_path, monkeypatch):
    import rmtrace.export.pcapng as pcapng

    path = str(captures.path("cuda-streams-3x-sequential"))  # five processes: their comments made again and again
    whole, small = tmp_path / "whole.pcapng", tmp_path / "small.pcapng"
    with ExportInput(path, progress=False) as src:
        write_pcapng(src, str(whole))
    monkeypatch.setattr(pcapng, "_WHO_KEPT", 1)
    with ExportInput(path, progress=False) as src:
        write_pcapng(src, str(small))
    assert small.read_bytes() == whole.read_bytes()
