"""The columnar call table against the session fold and the decoders it stands in for.

Every row of the table must be the CallInfo the fold makes of the same call, on
every committed capture, the constructed multi-client boots and replays of
them; and the fixed-offset plan must read what the construct decode reads for
every argument layout of every shipped profile.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from rmtrace.decoders import DecoderSet, Level, decoders_for
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.rm import ControlCall

from rmtrace.analysis.stats import op_stats
from rmtrace.calls import CallState
from rmtrace.cli.main import main
from rmtrace.columns.argspec import Kind, Plan
from rmtrace.columns.stats import operation_rows
from rmtrace.columns.table import CallTableBuilder
from rmtrace.record import Buffer, BufferFlag, Phase, Record, Role, Source, When
from rmtrace.session import load_session
from rmtrace.session.fold import Folder
from rmtrace.session.model import _mark_open_calls
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import TraceReader, TraceWriter
from tests.scenarios import sequential

REPO = Path(__file__).resolve().parent.parent
CAPTURES = sorted((REPO / "captures").glob("*.trace"))


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    """Every committed capture, the constructed boots, and replays of the shipped three-client capture."""
    d = tmp_path_factory.mktemp("columns")
    found = {p.name: p for p in CAPTURES}
    found["wedged.trace"] = sequential(d / "wedged.trace", wedge=True)
    found["green.trace"] = sequential(d / "green.trace", wedge=False)
    shipped = REPO / "captures" / "cuda-streams-3x-sequential.trace"
    for name, argv in (("legacy-sequential.trace", ["--schedule", "sequential", "--against", "model:legacy"]),
                       ("fixed-concurrent.trace", ["--schedule", "concurrent", "--against", "model:fixed"])):
        main(["replay", str(shipped), *argv, "-o", str(d / name)])
        found[name] = d / name
    return found


def rechunk(src: Path, dst: Path, chunk_bytes: int) -> Path:
    """The same records in chunks of about ``chunk_bytes``: calls then span chunks and batches."""
    with TraceReader(src) as reader, TraceWriter(dst, reader.meta, chunk_bytes=chunk_bytes) as writer:
        for raw in reader.raw_records():
            writer.write_encoded(bytes(raw))
    return dst


def table_of(path: Path, batch_records: int = 16_384):
    reader = TraceReader(path)
    builder = CallTableBuilder(reader, decoders_for(reader), batch_records=batch_records,
                               client_ids=client_ids(reader.meta))
    builder.update()
    return builder.table()


def per_call_fold(path: Path) -> tuple[Folder, Timeline]:
    """The session fold as it runs call by call (``Folder.fold``): what the table-driven fold must equal."""
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    timeline = Timeline()
    folder = Folder(decoders, timeline, client_ids(reader.meta))
    for call in decoders.calls(reader.records(), window=1 << 62):
        folder.fold(call)
    _mark_open_calls(folder.calls, timeline)
    timeline.freeze((reader.time_span or (0, 0))[1])
    return folder, timeline


def assert_same_as_fold(path: Path, batch_records: int = 16_384) -> None:
    """The call table, and the model folded over it, are what folding every call gives."""
    folder, timeline = per_call_fold(path)
    table = table_of(path, batch_records)
    assert list(table.infos()) == folder.calls
    assert {c.id: (c.pid, c.first_seq, c.first_ns, c.gsp_session) for c in table.clients} == \
        {c.id: (c.pid, c.first_seq, c.first_ns, c.gsp_session) for c in folder.clients.values()}
    model = load_session(path, cache=False)
    assert list(model.processes.values()) == list(folder.processes.values())
    assert [replace(c, label="") for c in model.clients] == list(folder.clients.values())  # in order of appearance
    for name in ("object_list", "gsp", "stray_frees", "stop_reason", "lost"):
        assert getattr(model, name) == getattr(folder, name), name
    assert list(model.channels.values()) == list(folder.channels.values())
    assert list(model.ranks.values()) == list(folder.ranks.values())
    assert model.transitions == timeline.transitions
    assert {seq: cid for seq, cid in folder.seq_client} == {seq: model.client_of(seq) for seq, _ in folder.seq_client}


@pytest.mark.parametrize("name", [p.name for p in CAPTURES] + ["wedged.trace", "green.trace",
                                                                "legacy-sequential.trace", "fixed-concurrent.trace"])
def test_table_and_fold_are_the_per_call_fold(traces, name):
    assert_same_as_fold(traces[name])


@pytest.mark.parametrize("name", ["cuda-streams-2-together.trace", "legacy-sequential.trace", "wedged.trace"])
def test_calls_across_chunks_and_batches(traces, name, tmp_path):
    """One small chunk per batch: enters meet their exits batches later, GSP exchanges too."""
    assert_same_as_fold(rechunk(traces[name], tmp_path / name, 3000), batch_records=1)


def test_update_continues_a_growing_trace(traces, tmp_path):
    """Rows of a live trace as it grows are the rows of the whole trace read at once."""
    src = traces["legacy-sequential.trace"]
    with TraceReader(src) as reader:
        raws, meta = [bytes(r) for r in reader.raw_records()], reader.meta
    path = tmp_path / "live.trace"
    writer = TraceWriter(path, meta, chunk_bytes=2000, threaded=False)
    reader = TraceReader(path)
    builder = CallTableBuilder(reader, decoders_for(reader), client_ids=client_ids(reader.meta))
    sizes = []
    for k, raw in enumerate(raws):
        writer.write_encoded(raw)
        if k % 700 == 699:
            writer.flush()
            reader.refresh()
            sizes.append(builder.update())
    writer.close()
    reader = TraceReader(path)
    builder.reader = reader
    builder.update()
    assert len([s for s in sizes if s]) > 2
    assert list(builder.table().infos()) == per_call_fold(path)[0].calls


# -- the fixed-offset plan against the construct decode, every layout of every profile ---------


def _calls(decoders: DecoderSet, rng: random.Random) -> list[list[Record]]:
    """For every ioctl argument layout of the profile: calls that return, fail, stay in flight, carry a
    short or unreadable argument, or are only an exit."""
    plan = Plan(decoders)
    profile = decoders.profile
    out = []
    call_id = 0
    controls, classes = sorted(profile.controls), sorted(profile.classes)
    for source in (Source.RM, Source.UVM):
        for op in sorted(decoders.tables[source]):
            p = plan.op(source, op)
            if p.kind != Kind.IOCTL:
                continue
            layouts = list(p.arg_layouts.items()) + ([(p.default.size + 8, p.default)] if p.default else [])
            for size, layout in layouts:
                for variant in ("ok", "failed", "in_flight", "short", "unreadable", "exit_only", "no_status"):
                    call_id += 1
                    data = bytearray(rng.randbytes(size))
                    if layout is not None and layout.key is not None and rng.random() < 0.5:  # a name the profile has
                        real = rng.choice(controls if isinstance(p.op, ControlCall) else classes)
                        data[layout.key.offset:layout.key.offset + 4] = real.to_bytes(4, "little")
                    if variant == "ok" and layout is not None and layout.status is not None:
                        data[layout.status.offset:layout.status.offset + layout.status.size] = bytes(layout.status.size)
                    length = size - 1 if variant == "short" else size
                    flags = int(BufferFlag.UNREADABLE) if variant == "unreadable" else 0
                    before = Buffer(Role.ARG, When.BEFORE, bytes(data[:length]) if not flags else b"", flags)
                    after = Buffer(Role.ARG, When.AFTER, bytes(rng.randbytes(length)) if variant != "ok" else
                                   bytes(data[:length]), flags)
                    ret, err = (-1, 22) if variant == "failed" else (0, 0)
                    enter = Record(source, Phase.ENTER, op=op, pid=7, tid=7, call_id=call_id, buffers=(before,))
                    exit_ = Record(source, Phase.EXIT, op=op, pid=7, tid=7, call_id=call_id, ret=ret, err=err,
                                   buffers=(after,) if variant != "no_status" else (after, before))
                    out.append({"in_flight": [enter], "exit_only": [exit_]}.get(variant, [enter, exit_]))
    return out


@pytest.mark.parametrize("version", available_profiles())
def test_plan_reads_what_the_decoders_read(version, tmp_path):
    decoders = DecoderSet(load_profile(version), user=False)
    calls = _calls(decoders, random.Random(version))
    path = tmp_path / "layouts.trace"
    t = 0
    with TraceWriter(path, {"driver_version": version}) as writer:
        for records in calls:
            for rec in records:
                t += 1000
                writer.write(replace(rec, time_ns=t))
    table = table_of(path)
    assert len(table) == len(calls)
    with TraceReader(path) as reader:
        for row, call in enumerate(decoders.calls(reader.records())):
            got = table.info(row)
            want = decoders.decode(call, Level.CALL)
            assert (got.name, got.detail, got.status, got.status_name, got.ok, got.handles) == \
                (want.name, want.detail, want.status, want.status_name, want.ok, want.handles), (row, call)
            assert got.in_flight == (call.state is CallState.IN_FLIGHT)


# -- stats from the table ----------------------------------------------------------------------


@pytest.mark.parametrize("name", [p.name for p in CAPTURES] + ["wedged.trace", "legacy-sequential.trace",
                                                                "fixed-concurrent.trace"])
def test_operations_table_is_todays(traces, name):
    """``rmtrace stats``' operations from the table, JSON for JSON (key order too), against today's
    ``op_stats`` over the per-call fold's calls."""
    folder, _ = per_call_fold(traces[name])
    assert json.dumps(operation_rows(table_of(traces[name]))) == json.dumps([r.to_dict() for r in op_stats(folder.calls)])


def test_tui_call_index_from_the_table(traces):
    """The TUI's call index built from the table's columns is the one built call by call."""
    from rmtrace.tui.view import CallIndex
    model = load_session(traces["legacy-sequential.trace"], cache=False)
    a, b = CallIndex.of_model(model), CallIndex.build(list(model.calls))
    assert (a.by_enter, a.enter_idx, a.by_exit, a.exit_idx) == (b.by_enter, b.enter_idx, b.by_exit, b.exit_idx)
