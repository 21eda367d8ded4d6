"""jsonl: the objects `rmtrace show --json` prints, line for line; progress shows on a terminal only."""

from __future__ import annotations

import io
import json
import math
import struct
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from construct import Container
from rmtrace.decoders import render
from rmtrace.decoders.base import Label

from rmtrace import jsonschema
from rmtrace.cli.main import main
from rmtrace.export.progress import Progress
from rmtrace.layout import Field, Layout
from rmtrace.record import Role
from tests.export_support import legacy_replay, shipped  # noqa: F401 -- legacy_replay is a fixture


def test_jsonl_is_show_json(tmp_path, capsys, legacy_replay):  # noqa: F811
    for path in (str(shipped("cuda-streams")), legacy_replay):
        out = tmp_path / "out.jsonl"
        assert main(["export", path, "--format", "jsonl", "-o", str(out), "--force"]) == 0
        capsys.readouterr()
        assert main(["show", path, "--json"]) == 0
        shown = capsys.readouterr().out
        assert out.read_text() == shown and shown.count("\n") > 100


def test_progress_draws_on_a_terminal_and_stays_quiet_elsewhere():
    tty = io.StringIO()
    progress = Progress("rmtrace export", 5000, stream=tty, enabled=True, interval_s=0)
    assert sum(1 for _ in progress.count(range(5000))) == 5000
    progress.finish()
    lines = tty.getvalue().split("\r")
    assert lines[-1] == "rmtrace export: 5,000 of 5,000 records (100%), " + lines[-1].split(", ", 1)[1]
    assert "records/s" in lines[-1] and tty.getvalue().endswith("\n") and len(lines) > 2
    pipe = io.StringIO()  # not a terminal: nothing
    quiet = Progress("rmtrace export", 5000, stream=pipe)
    assert sum(1 for _ in quiet.count(range(5000))) == 5000
    quiet.finish()
    assert pipe.getvalue() == ""


def _objects(path: str) -> list[dict]:
    from rmtrace.decoders import Level, decoders_for

    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader:
        decoders = decoders_for(reader)
        start = reader.time_span[0]
        return [jsonschema.call(decoders.decode(call, Level.FULL), call, start) for call in decoders.calls(reader.records())]


def _stdlib(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=str).encode("ascii")


def test_the_encoder_writes_the_bytes_json_writes(legacy_replay):  # noqa: F811
    """orjson, with json itself for what orjson would write otherwise: the same bytes, object for object."""
    for path in (str(shipped("nvidia-smi-q")), legacy_replay):
        objects = _objects(path)
        assert len(objects) > 200 and all(jsonschema.encode(o) == _stdlib(o) for o in objects)
    odd = [{"text": "größe ∞ 🚀", "del": "a\x7fb", "control": "\x00\x1b\t\n\"\\"}, {"big": 2**64, "small": -2**63 - 1},
           {"u64": 2**64 - 1, "s64": -2**63}, {7: "int key", None: 1}, {"lone": "\ud800"},
           {"np": np.float64(1.5), "npint": np.int64(3)}, {"when": datetime(2026, 12, 1, tzinfo=timezone.utc)},
           {"record": Label("RM_ALLOC")}, {"bytes": b"\x01"}, {"tuple": (1, "x"), "bool": True, "none": None}]
    for obj in odd:
        assert jsonschema.encode(obj) == _stdlib(obj), obj
        assert jsonschema.dumps(obj) == _stdlib(obj).decode()
        assert jsonschema.encode(obj, newline=True) == _stdlib(obj) + b"\n"


def test_floats_read_back_as_the_same_number():
    """A float is written in its shortest form that reads back the same (below 1e-4 orjson spells some
    otherwise than json: 0.00001 for 1e-05); docs/json-schema.md says so."""
    for x in (0.1, 1e-05, 1.5e-07, 5e-324, 1.7976931348623157e308, -0.0, 123456789.125, 3.4028234663852886e38):
        assert json.loads(jsonschema.encode({"f": x})) == {"f": x}


def test_a_float_member_that_is_not_a_number_is_null():
    """JSON has no NaN or infinity: such a member is null in JSON (its bits are in the buffer's hex), while
    the field tree still shows it."""
    layout = Layout("FLOATS", 12, (Field("a", 0, 4, "NvF32", "float"), Field("b", 4, 4, "NvF32", "float"),
                                   Field("c", 8, 4, "NvF32", "float")))
    value = Container(a=0x3F800000, b=0x7FC00000, c=0xFF800000)
    assert render.plain(value, layout) == {"a": 1.0, "b": None, "c": None}
    assert [render.scalar_text(f, value[f.name]) for f in layout.fields] == ["1.0", "nan", "-inf"]


def _oracle(value, layout=None, layouts=None):
    """What plain gives, written the plain way (as it was before its per-layout plan): each member as
    render.members finds it, converted by its kind, recursively."""
    if layout is not None and hasattr(value, "items"):
        return {name: _oracle_member(f, v, layouts) for name, f, v in render.members(layout, value)}
    if hasattr(value, "items"):
        return {k: _oracle(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [_oracle(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


def _oracle_member(f, v, layouts):
    def nested(x, leaf):
        return [nested(y, leaf) for y in x] if isinstance(x, list) else leaf(x)

    def number(bits, size):
        x = struct.unpack("<f" if size == 4 else "<d", bits.to_bytes(size, "little"))[0]
        return x if math.isfinite(x) else None
    if f.kind in ("struct", "union"):
        return _oracle(v, (layouts or {}).get(f.type), layouts)
    if f.kind == "float":
        return number(v, f.size)
    if f.kind != "array":
        return _oracle(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace") if f.elem_kind == "char" else bytes(v).hex()
    if f.elem_kind in ("struct", "union"):
        return nested(v, lambda x: _oracle(x, (layouts or {}).get(f.elem), layouts))
    if f.elem_kind == "float":
        return nested(v, lambda x: number(x, f.size // f.count if f.count else 4))
    return _oracle(v)


def test_plain_takes_every_member_as_members_finds_it():
    """render.plain's per-layout plan and shared elements against the plain way: every buffer of two real
    captures, and every call's args and extra."""
    from rmtrace.decoders import Level, decoders_for

    from rmtrace.trace import TraceReader
    checked = 0
    for name in ("nvidia-smi-q", "cuda-streams"):
        with TraceReader(str(shipped(name))) as reader:
            decoders = decoders_for(reader)
            for call in decoders.calls(reader.records()):
                decoded = decoders.decode(call, Level.FULL)
                assert (render.plain(decoded.args), render.plain(decoded.extra)) == (_oracle(decoded.args),
                                                                                    _oracle(decoded.extra))
                for b in decoded.buffers:
                    if b.layout is not None and hasattr(b.value, "items"):
                        assert render.plain(b.value, b.layout, b.layouts) == _oracle(b.value, b.layout, b.layouts)
                        checked += 1
    assert checked > 1000


def test_args_share_the_params_fields_where_plain_makes_them_the_same():
    """render.plain_args against the plain way (the same bytes: 0 and 0.0 are equal, their JSON is not), on every
    call of every shipped capture; a UVM_MAP_EXTERNAL_ALLOCATION's per-GPU slots are its params' fields' own
    object, and jsonl encodes that object once, spliced into args and into both copies of the params."""
    import orjson
    from rmtrace.decoders import Level

    from rmtrace import captures
    from rmtrace.export import jsonl
    from rmtrace.export.source import ExportInput
    shared = 0
    for path in sorted(Path(captures.__file__).parent.glob("*.trace")):
        with ExportInput(str(path), progress=False) as src:
            for call in src.calls():
                decoded = src.decoders.decode(call, Level.FULL)
                render.BUFFER_OBJECTS.clear()  # a kept object of an earlier call holds the fields made then
                args = render.plain_args(decoded)
                assert orjson.dumps(args) == orjson.dumps(_oracle(decoded.args)), (path, call.first.seq)
                if decoded.name != "UVM_MAP_EXTERNAL_ALLOCATION":
                    continue
                before, after = (b for b in decoded.buffers if b.role == Role.ARG)
                assert args["perGpuAttributes"] is render.buffer_objects([before])[0]["fields"]["perGpuAttributes"]
                obj = jsonl._spliced(decoded, call, src.start_ns)
                assert obj is not None
                made = [b for b in obj["buffers"] if type(b) is dict]  # the others came encoded, as seen before
                if not made:
                    continue
                assert type(obj["args"]["perGpuAttributes"]) is orjson.Fragment
                if len(made) == 2 and before.data == after.data:
                    assert type(made[0]["fields"]) is orjson.Fragment and made[0]["fields"] is made[1]["fields"]
                shared += 1
    assert shared >= 100


def test_the_writer_splices_buffers_into_the_bytes_of_the_plain_objects(legacy_replay):  # noqa: F811
    """Every call of every shipped capture (and a replay with GSP and sema): jsonl's line, made of
    pre-encoded buffer objects, is the encoding of the plain object (``call`` and ``Decoded.to_dict``)."""
    from rmtrace.decoders import Level

    from rmtrace import captures
    from rmtrace.export.jsonl import encoded_line
    from rmtrace.export.source import ExportInput
    paths = [str(p) for p in sorted(Path(captures.__file__).parent.glob("*.trace"))] + [legacy_replay]
    assert len(paths) >= 6
    for path in paths:
        spliced = calls = 0
        with ExportInput(path, progress=False) as src:
            for call in src.calls():
                decoded = src.decoders.decode(call, Level.FULL)
                line = encoded_line(decoded, call, src.start_ns)
                plain = jsonschema.call(decoded, call, src.start_ns)
                assert line == jsonschema.encode(plain, newline=True), (path, call.first.seq)
                assert json.loads(line) == plain
                calls += 1
                spliced += render.buffer_fragments(decoded.buffers, []) is not None
        assert calls > 0 and spliced > calls * 0.9, (path, spliced, calls)  # the spliced way, nearly always


def test_a_call_made_again_is_its_kept_line_filled_in(tmp_path, legacy_replay):  # noqa: F811
    """A capture three times over (each copy later, as a program makes the same calls again): most lines
    come from the memo's templates, and every line is still the encoding of the plain object of its call;
    a replay's GSP and sema calls (never kept) too."""
    from rmtrace.decoders import Level

    from rmtrace import captures
    from rmtrace.export.jsonl import LINE_KEPT_MAX, LineMemo, _lines
    from rmtrace.export.source import ExportInput
    from rmtrace.record import TIME
    from rmtrace.trace import TraceReader, TraceWriter

    again = tmp_path / "again.trace"
    with TraceReader(captures.path("cuda-streams-3x-sequential")) as reader, TraceWriter(str(again), reader.meta) as w:
        span = reader.time_span[1] - reader.time_span[0] + 1
        for copy in range(3):
            for raw in reader.raw_records():
                w.write_encoded(TIME.replaced(bytes(raw), TIME.get(raw) + copy * span))
    for path in (str(again), legacy_replay):
        with ExportInput(path, progress=False) as src:
            memo = LineMemo(src.decoders)
            lines = list(_lines(src, memo))
        with ExportInput(path, progress=False) as src:
            plain = [jsonschema.encode(jsonschema.call(src.decoders.decode(call, Level.FULL), call, src.start_ns),
                                       newline=True) for call in src.calls()]
        assert len(lines) == len(plain) > 1000
        for i, (ours, theirs) in enumerate(zip(lines, plain)):
            assert ours == theirs, (path, i)
        if path == str(again):  # the second and third copies' calls, but the lines too long to keep
            assert memo.filled > 0.6 * len(lines) and memo.templates.bytes > 1 << 20
            assert {len(line) > LINE_KEPT_MAX for line in lines} == {True, False}


def test_jsonl_export_leaves_numpy_unimported(tmp_path) -> None:
    """jsonl reads call by call: numpy (a fifth of a small export's time, +28 MB) is for the table's
    formats, and the memo of lines keys by rmtrace.columns.memokey, which has none.  A fresh interpreter:
    what an earlier test imported would hide a load."""
    trace = shipped("cuda-streams")
    script = ("import sys\nfrom rmtrace.cli.main import main\n"
              f"sys.argv = ['rmtrace', 'export', {str(trace)!r}, '--format', 'jsonl', '-o', {str(tmp_path / 'o.jsonl')!r}]\n"
              "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
              "print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-1] == "False", done.stderr[-2000:]
    assert (tmp_path / "o.jsonl").stat().st_size > 0


def test_the_export_restores_the_collector_thresholds(tmp_path) -> None:
    """jsonl raises the youngest generation's threshold while it writes (``YOUNG_COLLECTED_AT``) and puts the
    thresholds back after, when the writing fails too."""
    import gc

    import pytest

    from rmtrace.export import jsonl
    from rmtrace.export.source import ExportInput
    before = gc.get_threshold()
    seen = []
    lines = jsonl._lines

    def watched(src, memo=None):
        seen.append(gc.get_threshold())
        return lines(src, memo)
    jsonl._lines = watched
    try:
        with ExportInput(str(shipped("cuda-streams")), progress=False) as src:
            assert jsonl.write_jsonl(src, str(tmp_path / "o.jsonl")) > 100
            with pytest.raises(OSError):
                jsonl.write_jsonl(src, str(tmp_path / "no" / "such" / "dir.jsonl"))
    finally:
        jsonl._lines = lines
    assert seen[0] == (jsonl.YOUNG_COLLECTED_AT, *before[1:]) and gc.get_threshold() == before
