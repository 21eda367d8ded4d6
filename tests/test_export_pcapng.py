"""pcapng export read back by tshark with the generated dissector: packet for packet what `rmtrace show --json` says."""

from __future__ import annotations

import json
import subprocess

import pytest
from rmtrace.decoders.profiles import load_profile

from rmtrace.cli.main import main
from rmtrace.export.dissector import lua_tables, render_dissector, write_dissector
from rmtrace.export.pcapng import DLT_USER0, INTERFACES, write_pcapng
from rmtrace.export.source import ExportInput
from rmtrace.record import Source
from tests.export_support import legacy_replay, need_program, shipped  # noqa: F401 -- legacy_replay is a fixture

FIELDS = ("frame.number", "rmtrace.seq", "rmtrace.pid", "rmtrace.tid", "rmtrace.source", "rmtrace.phase", "rmtrace.op",
          "rmtrace.name", "rmtrace.detail", "rmtrace.status", "rmtrace.gsp.sequence", "frame.interface_id",
          "frame.time_epoch", "frame.comment")


def tshark_fields(pcapng: str, lua: str) -> dict[int, dict[str, str]]:
    tshark = need_program("tshark", "apt-get install tshark")
    cmd = [tshark, "-X", f"lua_script:{lua}", "-r", pcapng, "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "Lua" not in out.stderr and "rror" not in out.stderr, out.stderr
    rows = [dict(zip(FIELDS, line.split("\t"))) for line in out.stdout.splitlines()]
    return {int(r["rmtrace.seq"]): r for r in rows}


def show(capsys: pytest.CaptureFixture, *args: str) -> list[str]:
    """What `rmtrace show ARGS` prints, line by line (run in this process: the CLI's own code)."""
    capsys.readouterr()
    assert main(["show", *args]) == 0
    return capsys.readouterr().out.splitlines()


def export(path: str, tmp_path) -> tuple[str, str, object, dict]:
    pcap, lua = str(tmp_path / "out.pcapng"), tmp_path / "lua"
    with ExportInput(path) as src:
        assert write_pcapng(src, pcap) == src.reader.record_count
        script = write_dissector(lua, src.decoders)
        records = {r.seq: r for r in src.reader.records()}
        return pcap, str(script), src, records


@pytest.mark.parametrize("trace", ["cuda-streams-2-together", "legacy-replay"])
def test_tshark_reads_every_record_as_show_json_decodes_it(trace, tmp_path, capsys, legacy_replay):  # noqa: F811
    path = legacy_replay if trace == "legacy-replay" else str(shipped(trace))
    pcap, lua, src, records = export(path, tmp_path)
    packets = tshark_fields(pcap, lua)
    assert len(packets) == len(records)
    offset = src.wall_offset_ns
    label = src.decoders.label
    seen_sources, enter_names_what_was_passed = set(), 0
    calls = [json.loads(line) for line in show(capsys, path, "--json")]
    lines = show(capsys, path)
    assert len(lines) == len(calls)
    for call, line in zip(calls, lines):
        last = len(call["records"]) - 1
        for i, rec in enumerate(call["records"]):
            p = packets[rec["seq"]]
            assert (int(p["rmtrace.pid"]), int(p["rmtrace.tid"]), int(p["rmtrace.op"])) == (rec["pid"], rec["tid"], rec["op"])
            source = Source[rec["source"]]
            seen_sources.add(source)
            assert int(p["rmtrace.source"]) == source and int(p["frame.interface_id"]) == list(INTERFACES).index(source)
            # nanoseconds, exactly: the record's monotonic time on the wall clock
            sec, _, frac = p["frame.time_epoch"].partition(".")
            assert int(sec) * 10**9 + int(frac.ljust(9, "0")) == rec["time_ns"] + offset
            assert p["frame.comment"].split("|") == [f"pid {rec['pid']} tid {rec['tid']}", line]
            assert p["rmtrace.name"] == call["name"], (rec, call["name"])
            if call["source"] == "GSP":
                assert p["rmtrace.gsp.sequence"] == str(call["extra"]["sequence"])
            closes = i == last and call["state"] != "in_flight"
            if closes or last == 0:
                assert p["rmtrace.detail"] == (call["detail"] or "")
                if rec["phase"] in ("EXIT", "RECV", "EVENT") or call["source"] == "SEMA":
                    assert p["rmtrace.status"] == (call["status_name"] or ""), (rec, call)
            else:
                # an enter shows what the program passed; the call is named from what RM returned
                # (NVOS64 with hClass 0, NV01_ROOT, comes back NV01_ROOT_CLIENT)
                expected = label(records[rec["seq"]]).detail or ""
                enter_names_what_was_passed += expected != (call["detail"] or "")
                assert p["rmtrace.detail"] == expected
                assert p["rmtrace.status"] == ""
    wanted = {Source.RM, Source.UVM, Source.SYS} | ({Source.GSP, Source.SEMA, Source.MARK} if trace == "legacy-replay" else set())
    assert wanted <= seen_sources
    assert enter_names_what_was_passed < len(records) // 50


def test_the_dissector_is_the_profiles_tables(tmp_path):
    """Generated, not written: the tables follow the profile (status 0x8B differs between 580.142 and 595.45.04)."""
    from rmtrace.decoders import DecoderSet
    a, b = (DecoderSet(load_profile(v), user=False) for v in ("580.142", "595.45.04"))
    ta, tb = lua_tables(a), lua_tables(b)
    assert '[139]="NV_ERR_DMA_XFER_FAILED"' in ta and '[139]="NV_ERR_OPERATION_ABORTED"' in tb
    assert f'T.profile = "{a.profile.version}"' in ta
    code = render_dissector(a)
    assert "--[[ TABLES ]]" not in code and ta in code
    assert all(f'[{i}]="{name}"' in ta for i, (name, _what) in enumerate(INTERFACES.values()))
    assert DLT_USER0 == 147


def test_cli_writes_the_dissector_and_keeps_what_exists(tmp_path, capsys):
    out, lua = tmp_path / "a.pcapng", tmp_path / "lua"
    assert main(["export", "cuda-streams", "--format", "pcapng", "-o", str(out), "--dissector", str(lua)]) == 0
    assert (lua / "rmtrace.lua").read_text().startswith("-- Wireshark dissector for rmtrace records")
    size = out.stat().st_size
    assert main(["export", "cuda-streams", "--format", "pcapng", "-o", str(out)]) == 2
    assert "exists: give --force" in capsys.readouterr().err and out.stat().st_size == size
    assert main(["export", "cuda-streams", "--format", "pcapng", "-o", str(out), "--force"]) == 0
    trace = str(shipped("cuda-streams"))
    assert main(["export", trace, "--format", "pcapng", "-o", trace, "--force"]) == 2
    assert "refusing to write over it" in capsys.readouterr().err
