"""The CLI plumbing on real trace files: info, show, help and user errors (exit 2, no traceback)."""

import json
import subprocess
import sys

import pytest

from rmtrace.record import Buffer, MarkOp, Phase, Record, Role, Source, When
from rmtrace.trace import TraceWriter


def rmtrace(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def small_trace(tmp_path):
    path = tmp_path / "small.trace"
    meta = {"host": "h200", "kernel": "6.18.44", "driver_version": "580.159.04", "backend": "preload",
            "gpus": [{"name": "NVIDIA H200"}], "command": ["./prog", "--x"], "start_time": "2026-11-29T15:00:00Z"}
    with TraceWriter(path, meta) as w:
        w.write(Record(Source.SYS, Phase.EVENT, op=1, time_ns=1_000, pid=41, tid=41, fd=3,
                       buffers=(Buffer(Role.PATH, When.ONCE, b"/dev/nvidiactl"),)))
        w.write(Record(Source.RM, Phase.ENTER, op=0x2A, time_ns=2_000, pid=41, tid=41, call_id=1, fd=3,
                       buffers=(Buffer(Role.ARG, When.BEFORE, bytes(32)),)))
        w.write(Record(Source.RM, Phase.EXIT, op=0x2A, time_ns=40_000, pid=41, tid=41, call_id=1, fd=3,
                       buffers=(Buffer(Role.ARG, When.AFTER, bytes(32)),)))
        w.write(Record(Source.UVM, Phase.ENTER, op=37, time_ns=50_000, pid=42, tid=43, call_id=2, fd=4))
        w.write(Record(Source.MARK, Phase.EVENT, op=MarkOp.IN_FLIGHT, time_ns=90_000, pid=42, tid=43, call_id=2))
    return path


def test_info(small_trace):
    out = rmtrace("info", small_trace).stdout
    assert "580.159.04" in out and "NVIDIA H200" in out and "./prog --x" in out
    assert "complete" in out and "5 in 1 chunks" in out
    assert "RM" in out and "enter 1, exit 1" in out
    assert "1 calls still in flight" in out
    data = json.loads(rmtrace("info", "--json", small_trace).stdout)
    assert data["records"] == 5 and data["processes"] == [41, 42] and data["sources"]["UVM"] == {"enter": 1}
    assert data["duration_ns"] == 89_000 and data["start_time_ns"] == 1_000


def test_show_raw_and_json(small_trace):
    assert len(rmtrace("show", "--raw", small_trace).stdout.splitlines()) == 5
    objs = [json.loads(line) for line in rmtrace("show", "--raw", "--json", small_trace).stdout.splitlines()]
    assert len(objs) == 5
    first_rm = next(o for o in objs if o["source"] == "RM")
    assert first_rm["op"] == 0x2A and first_rm["pid"] == 41
    assert any(b.get("role") == "ARG" or b.get("role") == "arg" for o in objs for b in o.get("buffers", []))
    only_uvm = rmtrace("show", "--raw", "--json", "--source", "uvm", small_trace).stdout.splitlines()
    assert len(only_uvm) == 1


def test_show_folds_calls(small_trace):
    lines = rmtrace("show", small_trace).stdout.splitlines()
    assert len(lines) == 4  # the RM enter and exit are one line
    assert any("RM_CONTROL(" in line and "= NV_OK" in line for line in lines)
    assert any("UVM_REGISTER_GPU(" in line and "= ? <in flight since" in line for line in lines)
    calls = [json.loads(line) for line in rmtrace("show", "--json", small_trace).stdout.splitlines()]
    rm = next(c for c in calls if c["name"] == "RM_CONTROL")
    assert rm["state"] == "complete" and len(rm["records"]) == 2 and rm["duration_ns"] == 38_000


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"", "empty file"),
    (b"GIF89a" + bytes(100), "not an rmtrace trace"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, content, message):
    path = tmp_path / "bad.trace"
    if content is not None:
        path.write_bytes(content)
    for cmd in ("info", "show"):
        proc = rmtrace(cmd, path, check=False)
        assert proc.returncode == 2
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_truncated_file_is_read_and_says_so(small_trace, tmp_path):
    data = small_trace.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:-40])  # footer and part of the index gone
    out = rmtrace("info", cut).stdout
    assert "recovered by scanning" in out and "5 in 1 chunks" in out
    first_chunk = 32 + (int.from_bytes(data[12:16], "little") + 7) // 8 * 8
    cut.write_bytes(data[:first_chunk + 30])  # inside the first chunk: nothing intact
    proc = rmtrace("info", cut)
    assert "0 in 0 chunks" in proc.stdout and "torn tail" in proc.stdout


def test_help_explains(small_trace):
    top = rmtrace("--help").stdout
    assert "record" in top.lower() and "info" in top and "show" in top
    assert "metadata" in rmtrace("info", "--help").stdout
    proc = rmtrace("show", small_trace, "--source", "bogus", check=False)
    assert proc.returncode == 2 and "unknown source 'bogus'" in proc.stderr and "Traceback" not in proc.stderr


def test_shipped_capture_is_the_default_and_named_by_name(tmp_path):
    listed = rmtrace("info", "--shipped").stdout
    assert "cuda-streams-3x-sequential" in listed and "nvidia-smi-q" in listed
    proc = rmtrace("info")
    assert "this is the shipped capture cuda-streams-3x-sequential.trace" in proc.stderr
    assert "580.159.04" in proc.stdout and "NVIDIA H200" in proc.stdout
    by_name = rmtrace("info", "--json", "nvidia-smi-q")
    assert json.loads(by_name.stdout)["meta"]["command"][0] == "nvidia-smi"
    proc = rmtrace("info", str(tmp_path / "nvidia-smi-q"), check=False)  # a path is a path, never a shipped name
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_os_events_show_their_nv_status_by_name():
    """ALLOC_OS_EVENT and FREE_OS_EVENT return an NV_STATUS in their Status member: NV_OK, not 0 (issue 14)."""
    lines = rmtrace("show", "cuda-streams", "--name", "ALLOC_OS_EVENT,FREE_OS_EVENT").stdout.splitlines()
    names = {line.split(" ", 2)[2].split("(", 1)[0] for line in lines}
    assert names == {"ALLOC_OS_EVENT", "FREE_OS_EVENT"} and len(lines) > 4
    assert all(" = NV_OK <" in line for line in lines), lines


@pytest.mark.parametrize("damage", ["bit flip", "no footer"])
def test_info_on_a_damaged_recording_prints_its_metadata_and_what_was_lost(tmp_path, damage):
    """One flipped bit, or a recorder killed before its footer: info reads on, and says what the recording was
    and what is gone (issue 14: one flipped bit used to refuse the whole file)."""
    from rmtrace import captures
    data = bytearray(captures.path("cuda-streams-3x-sequential").read_bytes())
    if damage == "bit flip":
        data[len(data) // 2] ^= 0x10
    else:
        del data[len(data) - 4096:]
    path = tmp_path / "damaged.trace"
    path.write_bytes(bytes(data))
    rows = dict(line.split(None, 1) for line in rmtrace("info", path).stdout.splitlines() if line[:1] != " ")
    assert rows["recorded"].startswith("2026-11-29T16:30:33") and rows["driver"] == "580.159.04"
    assert rows["command"].startswith("sh -c ") and rows["gpus"] == "NVIDIA H200"
    assert "records lost" in rows["state"] and f"{path}" in rows["file"]
    info = json.loads(rmtrace("info", path, "--json").stdout)
    assert not info["complete"] or damage == "bit flip"
    assert 0 < info["records"] < 5031 and "lost" in info["recovery"]
