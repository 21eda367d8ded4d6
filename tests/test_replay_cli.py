"""rmtrace replay and rmtrace reduce from the command line: tables, exit statuses, files, errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from rmtrace.replayer.plan import build_plan

from rmtrace.cli.main import main
from rmtrace.exitcodes import ExitCode
from rmtrace.record import SysOp
from rmtrace.trace import TraceReader
from tests.cuda_traffic import Process, cuda_client, write_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "run1.trace"
    return write_trace(str(path), [cuda_client(1447)], command=["/opt/victory_mail"])


def rmtrace(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_legacy_sequential_prints_the_wedge_chain_and_exits_3(trace, tmp_path, capsys):
    out_trace, report = tmp_path / "r.trace", tmp_path / "r.xml"
    status, out, _ = rmtrace(capsys, "replay", trace, "--repeat", 3, "--schedule", "sequential",
                             "--against", "model:legacy", "-o", out_trace, "--junit", report)
    assert status == ExitCode.WEDGED
    lines = out.splitlines()
    assert lines[0] == "replay run1.trace: 3 clients, 123 messages, sequential against model:legacy"
    assert any(line.startswith("c1 pid 1447 (victory_mail)") and line.endswith("green (41 messages)") for line in lines)
    assert any("wedged at message 13 UVM_REGISTER_GPU" in line and line.startswith("c2") for line in lines)
    assert any("waiting for the UVM global lock, held by c2" in line for line in lines)
    assert out.count("drain-held") == 1  # the holder's chain once, not again under the client waiting for it
    assert f"rmtrace wedges {out_trace}" in out
    assert max(len(line) for line in lines if str(out_trace) not in line) <= 100
    assert "host counters: pub_calls=" in out and out.rstrip().endswith("exit 3: wedged")
    assert TraceReader(str(out_trace)).meta["replay"]["schedule"] == "sequential"
    suite = ET.parse(report).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("3", "2", "0")


def test_fixed_simultaneous_defaults_to_four_streams_and_exits_0(trace, tmp_path, capsys):
    status, out, _ = rmtrace(capsys, "replay", trace, "--schedule", "simultaneous", "-o", tmp_path / "s.trace")
    assert status == 0
    # 41 messages, and 3 more lanes of 14: the channel group, its context share, its 2 channels with their engine
    # objects and tokens, their UVM registrations, the group's schedule and its free
    assert "83 messages, simultaneous against model:fixed" in out and out.rstrip().endswith("exit 0: all green")


def test_a_divergence_exits_1_and_says_where(tmp_path, capsys):
    proc = Process(1447, 1_000_000_000)
    proc.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl", ret=3)
    proc.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", assigned=0xC1D00001)
    proc.control(3, 0xC1D00001, 0x5C0000EE, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", gpuInfoListSize=1)
    path = write_trace(str(tmp_path / "bad.trace"), [proc])
    status, out, _ = rmtrace(capsys, "replay", path, "-o", tmp_path / "x.trace")
    assert status == 1 and out.rstrip().endswith("exit 1: diverged")
    assert ("diverged at message 3 RM_CONTROL(NV2080_CTRL_CMD_GPU_GET_INFO_V2): status NV_ERR_OBJECT_NOT_FOUND, "
            "expected NV_OK") in out


def test_chaos_runs_list_the_failing_seeds_and_write_one_trace(trace, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RMTRACE_DATA_DIR", str(tmp_path / "data"))
    status, out, _ = rmtrace(capsys, "replay", trace, "--repeat", 3, "--schedule", "chaos", "--runs", 6,
                             "--against", "model:legacy")
    assert status == ExitCode.WEDGED
    assert "runs failed: seeds " in out and "(rerun one with --schedule chaos:" in out
    summary = next(line for line in out.splitlines() if " runs failed: seeds " in line)
    failing = summary.split("seeds ")[1].split(" (")[0].split(", ")
    assert len(failing) > 1
    written = tmp_path / "data" / "replays" / "run1-0.replay.trace"
    assert f"replay trace: {written}" in out and TraceReader(str(written)).meta["replay"]["schedule"] == \
        f"chaos:{failing[0]}"  # the first failing seed's; the others rerun with their number
    assert sorted(p.name for p in written.parent.iterdir()) == ["latest.replay.trace", "run1-0.replay.trace"]
    assert list(tmp_path.iterdir()) == [tmp_path / "data"]
    status, out, _ = rmtrace(capsys, "replay", trace, "--repeat", 3, "--schedule", "chaos", "--runs", 6)
    assert status == 0 and "6 runs, all green" in out and "none (every run green)" in out
    assert len(list(written.parent.iterdir())) == 2


@pytest.mark.parametrize("argv, message", [
    (["--schedule", "sideways"], "unknown schedule 'sideways'"),
    (["--against", "gpu"], "unknown target 'gpu'"),
    (["--against", "model:sturdy"], "unknown host-service model 'sturdy'"),
    (["--runs", "3"], "--runs explores seeds of the chaos schedule"),
    (["--clients", "2"], "no client 2"),
    (["--clients", "one"], "--clients takes client numbers"),
    (["-o", "/nonexistent-dir/out.trace"], "cannot write the replay's trace to /nonexistent-dir/out.trace"),
])
def test_bad_arguments_are_clear_errors(trace, tmp_path, capsys, argv, message):
    status, _out, err = rmtrace(capsys, "replay", trace, "-o", tmp_path / "e.trace", *argv)
    assert status == 2 and message in err and "Traceback" not in err


def test_a_file_that_is_not_a_trace_is_a_clear_error(tmp_path, capsys):
    bogus = tmp_path / "bogus.trace"
    bogus.write_bytes(b"not a trace at all")
    status, _out, err = rmtrace(capsys, "replay", bogus)
    assert status == 2 and "not an rmtrace trace" in err


def test_reduce_shrinks_a_legacy_wedge_to_two_clients_and_a_handful_of_messages(trace, tmp_path, capsys):
    small = tmp_path / "small.trace"
    status, out, _ = rmtrace(capsys, "reduce", trace, "--repeat", 3, "--schedule", "sequential",
                             "--against", "model:legacy", "-o", small)
    assert status == 0, out
    assert out.startswith("reduced 3 clients / 123 messages to 2 clients / ")
    assert "wedge kept: UVM_REGISTER_GPU (registration exchange)" in out and "wedges the same way" in out
    plan = build_plan(str(small))
    session = ["SYS_OPEN", "RM_ALLOC(NV01_ROOT_CLIENT)", "RM_ALLOC(NV01_DEVICE_0)", "RM_ALLOC(NV20_SUBDEVICE_0)",
               "SYS_OPEN", "UVM_INITIALIZE", "UVM_REGISTER_GPU"]  # UVM_REGISTER_GPU with what its handles need
    # c1 ends by a close: which of its ends the search keeps follows the order it tries candidates in, which
    # the dependencies set (with UVM_UNREGISTER_CHANNEL depending on its registration: the close, not the exit)
    assert [[m.name for m in c.messages] for c in plan.clients] == [session + ["SYS_CLOSE"], session]
    status, out, _ = rmtrace(capsys, "replay", small, "--schedule", "sequential", "--against", "model:legacy",
                             "-o", tmp_path / "again.trace")
    assert status == ExitCode.WEDGED and "c2" in out and "registration exchange" in out


def test_reduce_refuses_a_replay_that_does_not_wedge(trace, tmp_path, capsys):
    status, _out, err = rmtrace(capsys, "reduce", trace, "--repeat", 3, "--schedule", "sequential",
                                "-o", tmp_path / "r.trace")
    assert status == 2 and "nothing to reduce" in err
    status, _out, err = rmtrace(capsys, "reduce", trace, "--against", "recorded")
    assert status == 2 and "never wedges on itself" in err
