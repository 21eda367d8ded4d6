"""Perfetto export read back through Perfetto's own protos: tracks described, slices nest, flows pair, the wedge is there."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from rmtrace.export.perfetto import write_perfetto
from rmtrace.export.source import ExportInput
from rmtrace.session import load_session
from tests.export_support import legacy_replay, shipped  # noqa: F401 -- legacy_replay is a fixture

TE = pb.TrackEvent


@dataclass
class Slice:
    name: str
    category: str
    t0: int
    t1: int
    depth: int
    args: dict


@dataclass
class Loaded:
    """A Perfetto trace as its tracks, slices, instants, flows and counters (what the UI would show)."""

    tracks: dict = field(default_factory=dict)         # uuid -> TrackDescriptor
    slices: dict = field(default_factory=lambda: defaultdict(list))    # uuid -> [Slice]
    instants: dict = field(default_factory=lambda: defaultdict(list))  # uuid -> [(t, name)]
    counters: dict = field(default_factory=lambda: defaultdict(list))  # uuid -> [(t, value)]
    flow_out: dict = field(default_factory=dict)        # flow id -> (t, uuid, name)
    flow_in: dict = field(default_factory=dict)


def load(path: str) -> Loaded:
    """Parse with the perfetto package's Trace proto and rebuild slices as trace processor does:
    events of a track in timestamp order (stable), an END closing the innermost open slice."""
    trace = pb.Trace.FromString(open(path, "rb").read())
    out = Loaded()
    events = defaultdict(list)
    for n, packet in enumerate(trace.packet):
        assert packet.trusted_packet_sequence_id == 1
        if packet.HasField("track_descriptor"):
            out.tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        if packet.HasField("track_event"):
            ev = packet.track_event
            assert ev.track_uuid in out.tracks, "an event on a track not described before it"
            events[ev.track_uuid].append((packet.timestamp, n, ev))
    for uuid, evs in events.items():
        stack: list[tuple[int, TE]] = []
        for t, _n, ev in sorted(evs, key=lambda x: (x[0], x[1])):
            if ev.type == TE.TYPE_SLICE_BEGIN:
                stack.append((t, ev))
                flows_at = (t, uuid, ev.name)
            elif ev.type == TE.TYPE_SLICE_END:
                assert stack, f"an END without a BEGIN on track {uuid} at {t}"
                t0, begin = stack.pop()
                assert t >= t0
                args = {a.name: a.string_value or a.int_value for a in begin.debug_annotations}
                out.slices[uuid].append(Slice(begin.name, ",".join(begin.categories), t0, t, len(stack), args))
                continue
            elif ev.type == TE.TYPE_INSTANT:
                out.instants[uuid].append((t, ev.name))
                flows_at = (t, uuid, ev.name)
            elif ev.type == TE.TYPE_COUNTER:
                out.counters[uuid].append((t, ev.counter_value))
                continue
            for f in ev.flow_ids:
                assert f not in out.flow_out
                out.flow_out[f] = flows_at
            for f in ev.terminating_flow_ids:
                assert f not in out.flow_in
                out.flow_in[f] = flows_at
        assert not stack, f"slices left open on track {uuid}: {[e.name for _, e in stack]}"
    return out


def thread_tracks(loaded: Loaded) -> dict[int, int]:
    return {d.thread.tid: uuid for uuid, d in loaded.tracks.items() if d.HasField("thread")}


def named(loaded: Loaded, prefix: str) -> dict[str, int]:
    return {d.name: uuid for uuid, d in loaded.tracks.items() if d.name.startswith(prefix)}


def export(path: str, tmp_path) -> tuple[Loaded, ExportInput]:
    out = str(tmp_path / "out.pftrace")
    with ExportInput(path) as src:
        assert write_perfetto(src, out) > 0
    return load(out), src


def test_a_real_capture_has_every_call_as_a_nested_slice(tmp_path):
    path = str(shipped("cuda-streams-3x-sequential"))
    loaded, src = export(path, tmp_path)
    model = load_session(path)
    expected = Counter((c.tid, c.full_name) for c in model.calls if c.exit_seq is not None and c.exit_seq != c.enter_seq)
    got = Counter()
    threads = thread_tracks(loaded)
    for tid, uuid in threads.items():
        for s in loaded.slices[uuid]:
            got[(tid, s.name)] += 1
            assert s.depth == 0  # one call at a time per thread
    assert got == expected
    pids = {d.process.pid: d.process.process_name for d in loaded.tracks.values() if d.HasField("process")}
    assert {517, 523, 529} <= set(pids) and pids[517] == "cuda_streams"
    assert_states_are_the_models_lanes(loaded, model)


def assert_states_are_the_models_lanes(loaded: Loaded, model) -> None:
    """Every channel's and rank's state track is its lane in the session model, segment for segment."""
    tracks = {**named(loaded, "channel "), **named(loaded, "rank ")}
    entities = [(f"channel {c.id} ", c.entity) for c in model.channels.values()]
    entities += [(f"rank {r.index}", r.entity) for r in model.ranks.values()]
    assert len(tracks) == len(entities)
    for prefix, entity in entities:
        uuid = next(u for n, u in tracks.items() if n.startswith(prefix))
        shown = [(s.t0, s.t1, s.name) for s in sorted(loaded.slices[uuid], key=lambda s: s.t0)]
        assert shown == [(s.t0, s.t1, f"{s.state}: {s.detail}" if s.detail else s.state)
                         for s in model.timeline.segments(entity)], entity


def test_a_legacy_replay_shows_the_wedge_the_flows_and_the_counters(tmp_path, legacy_replay):  # noqa: F811
    loaded, src = export(legacy_replay, tmp_path)
    model = load_session(legacy_replay)
    threads = thread_tracks(loaded)
    # the wedge: c2's and c3's UVM_REGISTER_GPU run to the end of the trace
    for client in ("c2", "c3"):
        pid = model.client(client).pid
        wedged = [s for s in loaded.slices[threads[pid]] if s.category == "in_flight"]
        assert [(s.name, s.t1) for s in wedged] == [("UVM_REGISTER_GPU", src.end_ns)]
        assert wedged[0].args["client"] == client
    # flows pair: each starts once and ends once, forward in time
    assert loaded.flow_out.keys() == loaded.flow_in.keys() and loaded.flow_out
    for f, (t0, _uuid, _name) in loaded.flow_out.items():
        assert loaded.flow_in[f][0] >= t0
    kinds = Counter((loaded.flow_out[f][2].split("(")[0], loaded.flow_in[f][2].split("(")[0]) for f in loaded.flow_out)
    gsp = len([g for g in model.gsp if g.response_seq is not None])
    assert sum(n for (a, b), n in kinds.items() if b.startswith("GSP_")) == gsp > 0
    assert kinds[("UVM_REGISTER_GPU", "SEMA_RELEASE")] >= 1  # c1's registration, released by the host
    # channel and rank states: the model's lanes; c2's channel still waits and rank 2 is held at the end
    assert_states_are_the_models_lanes(loaded, model)
    c2 = named(loaded, "channel c2/ch0 ")
    assert [s.name for s in loaded.slices[next(iter(c2.values()))] if s.t1 == src.end_ns] == ["waiting: waiting for value 1"]
    assert [s.name.split(":")[0] for s in loaded.slices[named(loaded, "rank 2")["rank 2"]] if s.t1 == src.end_ns] == ["drain_held"]
    # the host counters: their last values are the model's
    final = model.state_at(model.end_ns).counters
    counters = {d.name: uuid for uuid, d in loaded.tracks.items() if d.HasField("counter")}
    assert final and set(final) <= set(counters)
    for name, value in final.items():
        assert loaded.counters[counters[name]][-1][1] == value


@pytest.mark.parametrize("example", ["docs/legacy-replay.pftrace"])
def test_the_docs_example_loads(example, repo_root):
    loaded = load(str(repo_root / example))
    assert loaded.flow_out and any(s.category == "in_flight" for ss in loaded.slices.values() for s in ss)
