"""rmtrace show and rmtrace stats --decode on traces written with the real writer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from rmtrace.decoders.gsp import codec_for
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.sema import SemaOp, message_record

from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import TraceWriter
from tests.traffic import cuda_session


def rmtrace(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Two clients (the second wedged in UVM_REGISTER_GPU), GSP traffic and sema messages, one unknown op."""
    profile = load_profile("580.142")
    path = tmp_path_factory.mktemp("show") / "two-clients.trace"
    codec = codec_for(profile)
    payload = codec.payload(76, {"hClient": 0xC1D00001, "hObject": 0xCAF00002, "cmd": 0x20801801, "params": bytes(16)})
    records = cuda_session(profile, pid=1001, t0=1_000_000)
    records += [Record(Source.GSP, Phase.SEND, op=76, time_ns=9_000_000, fd=0,
                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, codec.build(76, payload, 4)),)),
                Record(Source.GSP, Phase.RECV, op=76, time_ns=9_000_900, fd=0,
                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, codec.build(76, payload, 4, rpc_result=0)),)),
                message_record(SemaOp.COMPLETION_HINT, {"channel": 0xCAF000D4, "rank": 2, "value": 9, "rc": -22,
                                                        "reserved": 0}, time_ns=9_500_000, pid=1001, tid=1001),
                Record(Source.RM, Phase.EVENT, op=0x7F, time_ns=9_600_000, pid=1001, tid=1001,
                       buffers=(Buffer(Role.ARG, When.ONCE, b"\xde\xad"),))]
    records += cuda_session(profile, pid=1002, t0=10_000_000, wedge=True)
    with TraceWriter(path, {"driver_version": "580.159.04"}) as w:
        for rec in sorted(records, key=lambda r: r.time_ns):
            w.write(rec)
    return path


def test_show_folds_and_names_everything(trace):
    proc = rmtrace("show", trace)
    lines = proc.stdout.splitlines()
    assert "using 580.142, the nearest of branch 580" in proc.stderr
    assert any("RM_ALLOC(hClient=0xc1d003e9, hParent=0xcaf00020, hObject=0xcaf000d4, HOPPER_CHANNEL_GPFIFO_A{…}) "
               "= NV_OK <240µs>" in line for line in lines)
    assert any(line.startswith("[1002/1002]") and "UVM_REGISTER_GPU(" in line and "= ? <in flight since +11.740ms, 1.000s at the end>"
               in line for line in lines)
    assert any("GSP_RM_CONTROL(seq=4, hClient=0xc1d00001, hObject=0xcaf00002" in line and
               "NV2080_CTRL_CMD_BUS_GET_PCI_INFO{…}) = NV_OK <900ns>" in line for line in lines)
    assert any("SEMA_COMPLETION_HINT(" in line and line.endswith("= -22 EINVAL") for line in lines)
    assert any("RM_OP_0x7f()" in line for line in lines)
    assert sum(" RM_CONTROL(" in line for line in lines) == 2 * 18


def test_filters(trace):
    def shown(*args):
        return rmtrace("show", trace, *args).stdout.splitlines()
    assert all("UVM_REGISTER_" in line for line in shown("--name", "UVM_REGISTER_*")) and len(shown("--name", "UVM_REGISTER_*")) == 4
    gpu = shown("--name", "NV2080_CTRL_CMD_GPU_*")
    assert len(gpu) == 8 and all("NV2080_CTRL_CMD_GPU_" in line for line in gpu)
    assert [l.split()[-2] for l in shown("--failed")] == ["NV_ERR_NOT_SUPPORTED", "-22", "NV_ERR_NOT_SUPPORTED"]
    assert len(shown("--status", "NV_ERR_NOT_SUPPORTED")) == 2 and len(shown("--status", "0x56")) == 2
    channel = shown("--handle", "0xcaf000d4", "--pid", "1001")
    assert any("HOPPER_CHANNEL_GPFIFO_A" in l for l in channel) and any("UVM_REGISTER_CHANNEL" in l for l in channel)
    assert any("SEMA_COMPLETION_HINT" in l for l in channel)  # its channel member is a handle too
    assert all("[1002/" in l for l in shown("--pid", "1002"))
    assert all("UVM" in l for l in shown("--source", "uvm"))
    assert len(shown("--name", "RM_CONTROL", "--limit", "3")) == 3
    window = shown("--from", "7.9ms", "--to", "8.55ms")
    assert [("GSP" in l, "SEMA" in l) for l in window] == [(True, False), (False, True)]


def test_verbose_tree_and_json(trace):
    verbose = rmtrace("show", "-V", "--name", "NV2080_CTRL_CMD_GPU_GET_INFO_V2", "--pid", "1001", trace).stdout
    assert "params/after NV2080_CTRL_GPU_GET_INFO_V2_PARAMS (564 bytes)" in verbose
    assert "gpuInfoList[1] {index=2, data=32}" in verbose and "0000  02 00 00 00 01 00 00 00" in verbose
    raw = rmtrace("show", "-V", "--name", "RM_OP_*", trace).stdout
    assert "no decoder for RM operation 0x7f" in raw and "de ad" in raw
    calls = [json.loads(l) for l in rmtrace("show", "--json", "--name", "RM_ALLOC", "--pid", "1001", trace).stdout.splitlines()]
    channel = next(c for c in calls if c["detail"] == "HOPPER_CHANNEL_GPFIFO_A")
    params = next(b for b in channel["buffers"] if b["buffer"] == "alloc_params/after")
    assert params["layout"] == "NV_CHANNEL_ALLOC_PARAMS" and params["fields"]["gpFifoEntries"] == 1024
    assert len(bytes.fromhex(params["hex"])) == 368
    assert [r["phase"] for r in channel["records"]] == ["ENTER", "EXIT"] and channel["duration_ns"] == 240_000


def test_driver_override_and_errors(trace):
    proc = rmtrace("show", "--driver", "595.45.04", "--name", "RM_ALLOC", trace)
    assert "using profile 595.45.04 (--driver)" in proc.stderr
    bad = rmtrace("show", "--driver", "123.4", trace, check=False)
    assert bad.returncode == 2 and "no such shipped profile" in bad.stderr and "Traceback" not in bad.stderr
    bad = rmtrace("show", "--handle", "banana", trace, check=False)
    assert bad.returncode == 2 and "--handle" in bad.stderr


def test_stats_decode(trace):
    out = rmtrace("stats", "--decode", trace).stdout
    print(out)
    assert "records named           99.43%  (175 of 176)" in out and "not named: RM op 0x7f ×1" in out
    assert "classes named          100.00%" in out
    assert "decoder exceptions     0" in out
    data = json.loads(rmtrace("stats", "--decode", "--json", trace).stdout)
    assert data["controls"] == 2 * 18 + 1 and data["controls_at_least_class_and_category_pct"] == 100.0
    assert data["controls_by_naming"]["class"] == 2 and data["exceptions"] == 0
    assert data["unnamed_ops"] == {"RM op 0x7f": 1}


def test_tree_collapses_repeats():
    from rmtrace.decoders import DecoderSet, render
    from rmtrace.decoders.craft import Crafter
    profile = load_profile("580.142")
    records = Crafter(profile).rm_control(1, 2, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2",
                                          after={"numClasses": 3, "classList": [0xC86F, 0xCBC0, 0xC8B5]})
    decoders = DecoderSet(profile, user=False)
    lines = render.tree(decoders.decode(list(decoders.calls(records))[0]), profile.status.get)
    assert "      classList[0..199] 0 (×200)" in lines  # before the call
    assert "      classList[0:] 51311, 52160, 51381" in lines and "      classList[3..199] 0 (×197)" in lines
    assert lines.count("      *") >= 2  # hex dump of the zero runs


def shown_in_process(capsys, *argv) -> tuple[int, list[str], str]:
    from rmtrace.cli.main import main
    status = main(["show", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_a_phase_filter_is_not_the_exit_never_happening(trace, capsys):
    """--phase enter shows the calls that have an enter, each with how it returned; only the one call that
    never returned is in flight (issue 14: filtering out the exit is not the exit never happening)."""
    _, entered, _ = shown_in_process(capsys, trace, "--phase", "enter")
    in_flight = [line for line in entered if "= ? <in flight since" in line]
    assert len(in_flight) == 1 and "[1002/1002]" in in_flight[0] and "UVM_REGISTER_GPU(" in in_flight[0]
    _, every_call, _ = shown_in_process(capsys, trace, "--json")
    with_an_enter = [c["seq"] for c in map(json.loads, every_call) if any(r["phase"] == "ENTER" for r in c["records"])]
    _, entered_json, _ = shown_in_process(capsys, trace, "--phase", "enter", "--json")
    assert [c["seq"] for c in map(json.loads, entered_json)] == with_an_enter and len(entered) == len(with_an_enter)
    _, exited, _ = shown_in_process(capsys, trace, "--phase", "exit")
    assert set(exited) == set(entered) - set(in_flight)
    _, sent, _ = shown_in_process(capsys, trace, "--phase", "send", "--source", "gsp")
    assert len(sent) == 1 and "GSP_RM_CONTROL(" in sent[0] and sent[0].endswith("= NV_OK <900ns>")


def test_a_window_shows_how_its_calls_ended(trace, capsys):
    """--to picks calls that start by then; one that returns after it still shows its result."""
    _, everything, _ = shown_in_process(capsys, trace)
    alloc = next(line for line in everything if "HOPPER_CHANNEL_GPFIFO_A" in line and line.startswith("[1001/"))
    start_ms = float(alloc.split("+", 1)[1].split("ms", 1)[0])
    _, window, _ = shown_in_process(capsys, trace, "--from", f"{start_ms}ms", "--to", f"{start_ms + 0.1}ms")
    assert window[0] == alloc and alloc.endswith("= NV_OK <240µs>")  # it returned 240µs later, after --to
    status, _, err = shown_in_process(capsys, trace, "--from", "5ms", "--to", "1ms")
    assert status == 2 and "--from is after --to" in err


@pytest.mark.parametrize("argv, message", [
    (("--status", "NV_ERR_BOGUS"), "--status: nothing is called 'NV_ERR_BOGUS'"),
    (("--status", "NV_ERR_NOT_SUPORTED"), "(did you mean NV_ERR_NOT_SUPPORTED"),
    (("--name", "UVM_REGISTER_GPUS"), "--name: nothing is called 'UVM_REGISTER_GPUS' (did you mean UVM_REGISTER_GPU"),
    (("--name", "NV2080_CTRL_CMD_NOPE_*"), "--name: nothing is called 'NV2080_CTRL_CMD_NOPE_*'"),
])
def test_names_that_match_nothing_are_refused(trace, capsys, argv, message):
    status, lines, err = shown_in_process(capsys, trace, *argv)
    assert status == 2 and message in err and not lines


def test_every_name_and_status_of_the_real_captures_is_accepted(capsys):
    """The checks refuse only what no call can be called: every name and status the shipped captures show passes."""
    from rmtrace.decoders import Level, decoders_for

    from rmtrace import captures
    from rmtrace.cli.show import operation_names, status_names
    from rmtrace.trace import TraceReader
    for name in captures.shipped():
        with TraceReader(captures.path(name)) as reader:
            decoders = decoders_for(reader)
            names, statuses = operation_names(decoders), status_names(decoders)
            for call in decoders.calls(reader.records()):
                d = decoders.decode(call, Level.CALL)
                assert d.name in names and (d.detail is None or d.detail in names or "0x" in d.detail), (name, d.name)
                if d.status_name and d.status_name.startswith("NV_"):
                    assert d.status_name in statuses


def _streamed(reader, decoders, table, records, wanted, lines=None):
    """How show chose its calls before the call table: every record paired, every call decoded (none
    printed from the columns)."""
    import dataclasses
    return decoders.calls(reader.iter_filtered(dataclasses.replace(records, t1=None)))


def _show_in_process(argv, capsys):
    from rmtrace.cli.main import main
    code = main(["show", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out


SHIPPED = ("cuda-streams-3x-sequential", "torch-one-kernel", "nvidia-smi-q")
REPLAYS = ("cuda-streams.sequential-3.sigint.nvidia.trace", "cuda-streams.sequential-2.client-killed.nvidia.trace")


def _filters(path):
    """Every filter show has, each alone and a few together, with times that cut calls in two."""
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader:
        t0, t1 = reader.time_span
        pid = reader.record_at(reader.record_count // 2).pid
    third = (t1 - t0) // 3
    return [[], ["--failed"], ["--name", "RM_CONTROL,UVM_*,NV2080_CTRL_CMD_GPU_*"], ["--status", "NV_ERR_*,0x0"],
            ["--status", "EINVAL"], ["--pid", pid], ["--source", "gsp,sema,sys"], ["--op", "0x2b,0x2a"],
            ["--phase", "exit"], ["--from", f"{third}ns"], ["--from", f"{third}ns", "--to", f"{2 * third}ns"],
            ["--to", f"{third}ns", "--name", "RM_*"], ["--from", f"{2 * third}ns", "--failed"],
            ["-V", "--name", "RM_ALLOC", "--limit", "7"], ["--json", "--from", f"{third}ns", "--limit", "40"],
            ["--handle", "0xcaf000d4"]]


@pytest.mark.parametrize("name", SHIPPED + REPLAYS)
def test_show_chooses_on_the_call_table_what_it_chose_decoding_every_call(name, trace, monkeypatch, capsys, tmp_path):
    """The columns choose the calls (decoding only those printed): the output is the streamed one's, byte
    for byte, for every filter, on the real captures, replays cut by a signal or a killed client, and
    the constructed trace with GSP and sema traffic."""
    from pathlib import Path

    from rmtrace import captures
    from rmtrace.cli import show
    from rmtrace.columns import select
    monkeypatch.setattr(show, "TABLE_FROM_RECORDS", 0)  # these traces are small: the table must choose anyway
    path = trace if name == "two-clients" else (Path(captures.path()).parent / "replays" / name
                                                if name.endswith(".trace") else captures.path(name))
    monkeypatch.setenv("RMTRACE_CACHE", str(tmp_path / "cache"))
    for argv in _filters(path):
        code, chosen = _show_in_process([*argv, path], capsys)
        with monkeypatch.context() as m:
            m.setattr(select, "selected_calls", _streamed)
            streamed_code, streamed = _show_in_process([*argv, path], capsys)
        assert (code, chosen) == (streamed_code, streamed), argv
    assert any((tmp_path / "cache").iterdir())  # a finished trace's table was kept: the next show loads it


def test_show_chooses_on_the_columns_in_the_constructed_trace(trace, monkeypatch, capsys):
    from rmtrace.cli import show
    from rmtrace.columns import select
    monkeypatch.setattr(show, "TABLE_FROM_RECORDS", 0)
    monkeypatch.setenv("RMTRACE_CACHE", "off")
    for argv in _filters(trace) + [["--source", "gsp"], ["--from", "9000500ns"], ["--name", "SEMA_*", "--status", "-22"]]:
        code, chosen = _show_in_process([*argv, trace], capsys)
        with monkeypatch.context() as m:
            m.setattr(select, "selected_calls", _streamed)
            assert (code, chosen) == _show_in_process([*argv, trace], capsys), argv
