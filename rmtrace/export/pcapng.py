"""pcapng: one packet per record, one interface per source, for Wireshark and tshark.

Each source (``rmtrace.record.Source``) is one interface, in the enum's order,
on the private link types DLT_USER0 + n (147, 148, ...), with nanosecond
timestamps (``if_tsresol`` 9) in UTC wall-clock time.  A packet's bytes are
the record exactly as the trace holds it (docs/trace-format.md), and its two
comments say who made it (``pid P tid T``) and what it was: the call's
one-line summary, as ``rmtrace show`` prints it.  The generated Lua dissector
(``rmtrace.export.dissector``) names the fields.

Packets come out in record order, a batch of chunks at a time, each line
from the call table (``rmtrace.export.table_lines``: show's lines from the
columns, the calls it cannot print decoded), never pairing and decoding
the trace call by call.

The section and interface blocks are written by scapy's ``RawPcapNgWriter``,
with two things it does not do: the interface blocks carry a description
and ``if_tsresol``.  The packets are its enhanced packet blocks byte for
byte, put together here a batch at a time.
"""

from __future__ import annotations

import struct

from scapy.utils import RawPcapNgWriter

from rmtrace.export.source import ExportInput
from rmtrace.export.table_lines import RecordLines, record_lines
from rmtrace.record import Source

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
    """scapy's pcapng writer with one interface per rmtrace source, described, in nanoseconds (the packets
    are ``_EnhancedPackets``')."""

    def __init__(self, filename: str, descriptions: dict[int, str]) -> None:
        super().__init__(filename)
        self.descriptions = descriptions

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


def _option(code: int, value: bytes) -> bytes:
    return _OPT.pack(code, len(value)) + value + b"\0" * (-len(value) % 4)


def descriptions(src: ExportInput) -> dict[int, str]:
    """Each interface's description: what it carries, and the driver and profile its records are named with."""
    driver = src.meta.get("driver_version") or "unknown"
    tail = f"rmtrace records; driver {driver}, profile {src.decoders.profile.version}; host {src.meta.get('host', '?')}"
    return {source: f"{what} ({tail})" for source, (_name, what) in INTERFACES.items()}


def write_pcapng(src: ExportInput, out: str) -> int:
    """Write the trace as pcapng to ``out`` (a path); returns the packets written."""
    writer = RecordPcapNgWriter(out, descriptions(src))
    packets = 0
    try:
        writer._write_header(None)
        epb = _EnhancedPackets(writer)
        for batch in record_lines(src):
            packets += epb.write(batch, src.wall_offset_ns or 0)
    finally:
        writer.close()
    return packets


class _EnhancedPackets:
    """Enhanced packet blocks as scapy's ``_write_block_epb`` makes them (the same bytes), put together
    here with one ``struct`` call a packet: scapy packs each field on its own."""

    def __init__(self, writer: RecordPcapNgWriter) -> None:
        self.f = writer.f
        self.head = struct.Struct(writer.endian + "IIIIIII")  # type, length, interface, time high, low, 2 lengths
        self.option = struct.Struct(writer.endian + "HH")
        self.length = struct.Struct(writer.endian + "I")
        self.end = self.option.pack(OPT_END, 0)
        self.ifid = {source: writer.interfaces2id[name.encode()] for source, (name, _what) in INTERFACES.items()}
        self.other = self.ifid[Source.MARK]
        self.who: dict[tuple[int, int], bytes] = {}

    def write(self, batch: RecordLines, offset: int) -> int:
        """Write a batch's packets; returns how many."""
        head, option, length, end, ifid, other, who = (self.head, self.option, self.length, self.end, self.ifid,
                                                        self.other, self.who)
        blocks: list[bytes | memoryview] = []
        for data, source, time_ns, pid, tid, line in zip(batch.data, batch.source, batch.time_ns, batch.pid,
                                                         batch.tid, batch.line):
            mine = who.get((pid, tid))
            if mine is None:
                if len(who) >= _WHO_KEPT:  # a trace of many processes would keep one per thread it ever had
                    who.clear()
                text = f"pid {pid} tid {tid}".encode()
                mine = who[(pid, tid)] = option.pack(OPT_COMMENT, len(text)) + text + b"\0" * (-len(text) % 4)
            summary = line.encode()
            pad = b"\0" * (-len(summary) % 4)
            n = len(data)
            total = 32 + n + (-n % 4) + len(mine) + 4 + len(summary) + len(pad) + 4
            ts = time_ns + offset
            blocks += (head.pack(6, total, ifid.get(source, other), ts >> 32, ts & 0xFFFFFFFF, n, n), data,
                       b"\0" * (-n % 4), mine, option.pack(OPT_COMMENT, len(summary)), summary, pad, end,
                       length.pack(total))
            if len(blocks) >= _PIECES_AT_ONCE:
                self.f.write(b"".join(blocks))
                blocks.clear()
        self.f.write(b"".join(blocks))
        return len(batch.data)


_PIECES_AT_ONCE = 9 * 1024
"""Pieces of packet blocks (nine a packet) joined and written together: a whole batch's packets at once
held its bytes twice over (the pieces and their join), some 15 MB."""
_WHO_KEPT = 4096
"""Threads whose ``pid P tid T`` comment is kept made (a few bytes each): those of the trace's recent records."""
