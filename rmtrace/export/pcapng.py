"""pcapng: one packet per record, one interface per source, for Wireshark and tshark.

Each source (``rmtrace.record.Source``) is one interface, in the enum's order,
on the private link types DLT_USER0 + n (147, 148, ...), with nanosecond
timestamps (``if_tsresol`` 9) in UTC wall-clock time.  A packet's bytes are
the record exactly as the trace holds it (docs/trace-format.md), and its two
comments say who made it (``pid P tid T``) and what it was: the call's
one-line summary, as ``rmtrace show`` prints it.  The generated Lua dissector
(``rmtrace.export.dissector``) names the fields.

Packets come out in record order although the decoders pair records into
calls first: a record waits in a heap until every call that starts before it
has been seen (bounded by the pairing window).

The blocks are written by scapy's ``RawPcapNgWriter``; two things it does not
do are added here: the interface blocks carry a description and
``if_tsresol``, and timestamps are handed over already in nanoseconds.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterable, Iterator

from scapy.utils import RawPcapNgWriter

from rmtrace.calls import Call
from rmtrace.decoders import Level, render
from rmtrace.export.source import ExportInput
from rmtrace.record import Record, Source

DLT_USER0 = 147
"""LINKTYPE_USER0: the first of the 16 link types set aside for private use."""

INTERFACES: dict[int, tuple[str, str]] = {
    Source.RM: ("rm", "RM ioctls"),
    Source.UVM: ("uvm", "UVM ioctls"),
    Source.GSP: ("gsp", "GSP RPCs"),
    Source.SEMA: ("sema", "host semaphore-service messages"),
    Source.SYS: ("sys", "system: open, close, mmap, fork, exec, exit"),
    Source.MARK: ("mark", "marks: calls in flight, losses, notes, verdicts"),
}
"""Interface name and what it carries, per source; interface n is the n-th source, on DLT_USER0 + n."""

LINKTYPES = {source: DLT_USER0 + i for i, source in enumerate(INTERFACES)}
NS_RESOLUTION = 9
"""if_tsresol: timestamps count 10^-9 s."""

_OPT = struct.Struct("<HH")
OPT_END, OPT_COMMENT, IF_NAME, IF_DESCRIPTION, IF_TSRESOL = 0, 1, 2, 3, 9


class RecordPcapNgWriter(RawPcapNgWriter):
    """scapy's pcapng writer with one interface per rmtrace source, described, in nanoseconds."""

    def __init__(self, filename: str, descriptions: dict[int, str]) -> None:
        super().__init__(filename)
        self.descriptions = descriptions
        # Timestamps are handed to scapy already in the interfaces' unit (ns): scapy multiplies them
        # by ``tsresol`` and would otherwise count microseconds.
        self.tsresol = 1

    def _write_header(self, pkt: object) -> None:
        if self.header_present:
            return
        self.header_present = True
        self._write_block_shb()
        self.interfaces2id = {}
        for i, (source, (name, _what)) in enumerate(INTERFACES.items()):
            self.interfaces2id[name.encode()] = i
            self._write_idb(LINKTYPES[source], name, self.descriptions[source])

    def _write_idb(self, linktype: int, name: str, description: str) -> None:
        options = b"".join(_option(code, value) for code, value in (
            (IF_NAME, name.encode()), (IF_DESCRIPTION, description.encode()), (IF_TSRESOL, bytes([NS_RESOLUTION]))))
        body = struct.pack("<HHI", linktype, 0, 0)  # link type, reserved, snaplen 0: no limit
        self.f.write(self.build_block(struct.pack("<I", 1), body, options=options + _OPT.pack(OPT_END, 0)))

    def write_record(self, data: bytes, source: int, time_ns: int, comments: list[bytes]) -> None:
        if not self.header_present:
            self._write_header(None)
        name = INTERFACES.get(source, INTERFACES[Source.MARK])[0]
        self._write_block_epb(data, ifid=self.interfaces2id[name.encode()], timestamp=time_ns, comments=comments)


def _option(code: int, value: bytes) -> bytes:
    return _OPT.pack(code, len(value)) + value + b"\0" * (-len(value) % 4)


def descriptions(src: ExportInput) -> dict[int, str]:
    """Each interface's description: what it carries, and the driver and profile its records are named with."""
    driver = src.meta.get("driver_version") or "unknown"
    tail = f"rmtrace records; driver {driver}, profile {src.decoders.profile.version}; host {src.meta.get('host', '?')}"
    return {source: f"{what} ({tail})" for source, (_name, what) in INTERFACES.items()}


def in_record_order(calls: Iterable[Call], render_line: Callable[[Call], str]) -> Iterator[tuple[Record, str]]:
    """(record, its call's summary line) in record order, from calls in order of their first record.

    A call is yielded once every call starting before it has been, so every
    record before its first record is final: those are released from the heap.
    """
    heap: list[tuple[int, Record, str]] = []
    for call in calls:
        text = render_line(call)
        for rec in call.records:
            heapq.heappush(heap, (rec.seq, rec, text))
        first = call.first.seq
        while heap and heap[0][0] < first:
            _seq, rec, line = heapq.heappop(heap)
            yield rec, line
    while heap:
        _seq, rec, line = heapq.heappop(heap)
        yield rec, line


def write_pcapng(src: ExportInput, out: str) -> int:
    """Write the trace as pcapng to ``out`` (a path); returns the packets written."""
    decoders = src.decoders
    start, end = src.start_ns, src.end_ns

    def line(call: Call) -> str:
        return render.line(decoders.decode(call, Level.CALL), call, start, end)

    writer = RecordPcapNgWriter(out, descriptions(src))
    packets = 0
    try:
        offset = src.wall_offset_ns or 0
        raw: dict[int, bytes] = {}
        for rec, text in in_record_order(src.calls(raw), line):
            writer.write_record(raw.pop(rec.seq), rec.source, rec.time_ns + offset,
                                [f"pid {rec.pid} tid {rec.tid}".encode(), text.encode()])
            packets += 1
        if not writer.header_present:  # an empty trace: the section and its interfaces all the same
            writer._write_header(None)
    finally:
        writer.close()
    return packets
