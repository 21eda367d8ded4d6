"""wedges, diff and stats on the constructed second-client wedge and its green counterpart."""

import json
import subprocess
import sys

import pytest
from rmtrace.decoders.craft import Crafter
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.sema import SemaOp

from rmtrace import captures
from rmtrace.analysis.diff import first_divergence, traffic_table
from rmtrace.analysis.stats import session_stats
from rmtrace.analysis.wedges import WedgeKind, cut_by_end, find_wedges
from rmtrace.exitcodes import ExitCode
from rmtrace.record import MarkOp, Phase, Record, SysOp
from rmtrace.session import load_session
from rmtrace.timefmt import format_offset
from rmtrace.trace import TraceReader, TraceWriter
from tests.scenarios import RANK, Boot, sequential


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    return sequential(d / "green.trace", wedge=False), sequential(d / "wedged.trace", wedge=True)


def rmtrace(*args):
    return subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True, text=True)


def test_wedges_prints_the_chain(paths):
    _, wedged = paths
    wedges = find_wedges(load_session(wedged))
    top = wedges[0]
    assert top.kind == "in_flight" and top.client_id == "c2" and "UVM_REGISTER_GPU" in top.summary
    text = "\n".join(top.chain)
    assert "rc=-22" in text and "rank 2's one-shot latch fired" in text and "of c1" in text
    assert "never re-armed" in text and "c3 pid 1003 waits behind it" in text
    assert "counters last moved" in text
    c3 = next(w for w in wedges if w.kind == "in_flight" and w.client_id == "c3")
    assert "waiting for the guest UVM global lock, held by c2" in "\n".join(c3.chain)
    kinds = {w.kind for w in wedges}
    assert {"latch_not_rearmed", "no_completion", "quiet"} <= kinds
    proc = rmtrace("wedges", wedged)
    assert proc.returncode == ExitCode.WEDGED and "#1 [in_flight] c2 pid 1002" in proc.stdout
    data = [json.loads(line) for line in rmtrace("wedges", "--json", wedged).stdout.splitlines()]
    assert data[0]["client"] == "c2" and data[0]["rank"] == 1


def test_a_drain_hold_is_dated_from_when_it_began(tmp_path):
    """A latch firing later does not move the hold's start (it re-states the rank's lane, nothing more)."""
    boot = Boot()
    boot.host(SemaOp.LATCH_ARM, 0, rank=RANK, channel=0, generation=0, armed=1)
    boot.client(1001, 1, host_ok=True)
    boot.host(SemaOp.DRAIN_HOLD, 0, rank=RANK, channel=0xCAF000D4, held=1, reason=1, held_ns=0)
    held_at = boot.t
    boot.t += 1_000_000
    boot.host(SemaOp.LATCH_FIRE, 0, rank=RANK, channel=0xCAF000D4, generation=1, armed=0)
    boot.client(1002, 2, host_ok=False)
    model = load_session(boot.write(tmp_path / "held.trace"))
    chain = "\n".join(find_wedges(model)[0].chain)
    assert f"rank 2 is in a drain hold since {format_offset(held_at - model.start_ns)}" in chain


def test_green_run_has_no_wedges(paths):
    green, _ = paths
    assert find_wedges(load_session(green)) == []
    proc = rmtrace("wedges", green)
    assert proc.returncode == 0 and "no wedges" in proc.stdout


def test_killed_while_blocked(tmp_path):
    wedges = find_wedges(load_session(killed_trace(tmp_path / "killed.trace")))
    top = wedges[0]
    assert top.kind == "in_flight"
    assert "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2" in top.summary and "pid 4242" in top.summary
    assert "3.000s by the end of the trace" in top.chain[0]
    assert "no host-side record" in top.chain[1]


def killed_trace(path):
    """What the recorder leaves when the command is killed inside a call: an enter and an in-flight mark."""
    c = Crafter(load_profile("580.142"), pid=4242)
    recs = c.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl")
    recs += c.rm_alloc(0, 0, 0xC1D00042, "NV01_ROOT_CLIENT", {"hClient": 0xC1D00042})
    blocked = c.rm_control(0xC1D00042, 0xC1D00042, "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2", in_flight=True)
    recs += blocked
    stop = blocked[0].time_ns + 3_000_000_000
    recs.append(Record(6, Phase.EVENT, op=MarkOp.IN_FLIGHT, time_ns=stop, pid=4242, tid=4242,
                       call_id=blocked[0].call_id))
    with TraceWriter(path, {"driver_version": "580.142"}) as w:
        for r in recs:
            w.write(r)
    return path


@pytest.mark.parametrize("size", [30_000, 60_000, 80_000])
def test_a_torn_trace_cuts_its_calls_in_flight_instead_of_wedging(tmp_path, size):
    """``head -c SIZE`` of a green recording: what was in flight at the tear is cut, not wedged."""
    path = tmp_path / "t.trace"
    path.write_bytes(captures.path("cuda-streams-3x-sequential").read_bytes()[:size])
    model = load_session(path)
    assert model.cut and not model.recovery.complete
    assert find_wedges(model) == []
    cut = cut_by_end(model)
    assert [c.call for c in cut] == [c for c in model.calls if c.in_flight]
    proc = rmtrace("wedges", path)
    assert proc.returncode == 0 and proc.stdout.startswith("trace recovered: recovered by scanning")
    assert "never returned" not in proc.stdout
    for c in cut:
        assert f"{c.call.full_name} cut by the end of the recording" in proc.stdout


def test_a_call_the_recorder_saw_in_flight_is_still_a_wedge_when_the_footer_is_lost(tmp_path):
    path = killed_trace(tmp_path / "killed.trace")
    with TraceReader(path) as reader:
        end = reader.chunks[-1].end
    cut = tmp_path / "no-footer.trace"
    cut.write_bytes(path.read_bytes()[:end])
    model = load_session(cut)
    assert model.cut and cut_by_end(model) == []
    assert [w.kind for w in find_wedges(model)] == [WedgeKind.IN_FLIGHT]
    assert cut_by_end(load_session(path)) == []  # a complete trace cuts nothing


def test_diff_names_the_first_divergence(paths):
    green, wedged = paths
    a, b = load_session(green), load_session(wedged)
    div = first_divergence(a, b)
    assert div.client_id == "c2" and div.kind == "quiet_b" and "UVM_REGISTER_GPU" in div.summary
    assert first_divergence(a, load_session(green)) is None
    table = {row["client"]: row["sources"] for row in traffic_table(a, b)}
    assert table["c1"]["RM"] == [12, 12]
    assert table["c3"]["SEMA"][1] < table["c3"]["SEMA"][0]
    proc = rmtrace("diff", green, wedged)
    assert proc.returncode == 1 and "first divergence: c2" in proc.stdout
    assert rmtrace("diff", green, green).returncode == 0


def test_diff_sees_a_status_change(tmp_path):
    profile = load_profile("580.142")

    def run(path, status):
        c = Crafter(profile, pid=7)
        recs = c.rm_alloc(0, 0, 0xC1D00001, "NV01_ROOT_CLIENT", {"hClient": 0xC1D00001})
        recs += c.rm_alloc(0xC1D00001, 0xC1D00001, 0x5C000001 + status, "NV01_DEVICE_0", status=status)
        with TraceWriter(path, {"driver_version": "580.142"}) as w:
            for r in recs:
                w.write(r)
        return load_session(path)
    div = first_divergence(run(tmp_path / "a", 0), run(tmp_path / "b", 0x1F))
    assert div.kind == "status" and "NV_OK in run A but NV_ERR_INVALID_ARGUMENT" in div.summary


def test_stats(paths):
    _, wedged = paths
    stats = session_stats(load_session(wedged))
    ops = {(r["client"], r["operation"]): r for r in stats["operations"]}
    alloc = ops[("c1", "RM_ALLOC(NV01_DEVICE_0)")]
    assert alloc["count"] == 1 and alloc["statuses"] == {"NV_OK": 1} and alloc["latency_ns"]["median"] == 10_000
    reg = ops[("c2", "UVM_REGISTER_GPU")]
    assert reg["in_flight"] == 1 and reg["latency_ns"] is None
    out = [json.loads(line) for line in rmtrace("stats", "--json", wedged).stdout.splitlines()]
    assert [o for o in out if o.pop("type") == "stats"] == stats["operations"]
    assert "UVM_REGISTER_GPU" in rmtrace("stats", wedged).stdout
