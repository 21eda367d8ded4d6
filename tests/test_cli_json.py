"""Every command's --json is JSON Lines in the one schema docs/json-schema.md writes down."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from rmtrace import captures
from rmtrace.cli.main import build_parser, main

DOC = Path(__file__).resolve().parent.parent / "docs" / "json-schema.md"
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list,
              "null": type(None)}


def documented() -> dict[str, dict[str, tuple[set[str], bool]]]:
    """type -> field -> (JSON types allowed, optional), read off the document's tables."""
    types: dict[str, dict[str, tuple[set[str], bool]]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^### (\w+)$", line)
        if heading:
            current = types.setdefault(heading.group(1), {})
            continue
        row = re.match(r"^\| `(\w+)` \| ([a-z ,]+) \|", line)
        if row and current is not None:
            kinds, _, optional = row.group(2).partition(", ")
            current[row.group(1)] = (set(kinds.split(" or ")), optional == "optional")
    return types


SCHEMA = documented()


def objects(capsys, *argv) -> list[dict]:
    main([str(a) for a in argv])
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()]


def check(obj: dict) -> None:
    fields = SCHEMA[obj["type"]]
    required = {name for name, (_, optional) in fields.items() if not optional}
    assert required <= set(obj) <= set(fields), (obj["type"], set(obj) ^ set(fields))
    for name, value in obj.items():
        kinds, _ = fields[name]
        allowed = tuple(JSON_TYPES[k] for k in kinds)
        assert isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed), \
            (obj["type"], name, value)
    assert next(iter(obj)) == "type"


@pytest.fixture(scope="module")
def legacy_replay(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("json") / "legacy.trace"
    main(["replay", "cuda-streams-3x-sequential", "--schedule", "sequential", "--against", "model:legacy", "-o", str(out)])
    return out


def test_the_document_lists_every_type_it_uses():
    assert {"info", "record", "call", "wedge", "divergence", "traffic", "process", "client", "stats", "coverage",
            "replay", "verdict", "reduction", "row", "profile", "profile_entry", "profile_diff"} == set(SCHEMA)
    assert all(fields["type"] == ({"string"}, False) for fields in SCHEMA.values())


PRINTED = {
    ("info", "{replay}", "--json"): ["info"],
    ("info", "--shipped", "--json"): ["info"],
    ("show", "nvidia-smi-q", "--json"): ["call"],
    ("show", "nvidia-smi-q", "--raw", "--json"): ["record"],
    ("export", "nvidia-smi-q", "--format", "jsonl", "-o", "-"): ["call"],
    ("wedges", "{replay}", "--json"): ["wedge"],
    ("diff", captures.path("cuda-streams"), captures.path("nvidia-smi-q"), "--json"): ["divergence", "traffic"],
    ("stats", "cuda-streams", "--json"): ["process", "client", "stats"],
    ("stats", "nvidia-smi-q", "--decode", "--json"): ["coverage"],
    ("replay", "nvidia-smi-q", "-o", "{tmp}/r.trace", "--json"): ["replay", "verdict"],
    ("query", "SELECT op, count(*) AS n, max(t_ns) FROM calls GROUP BY op", "{dataset}", "--json"): ["row"],
    ("profiles", "list", "--json"): ["profile"],
    ("profiles", "show", "580.142", "--json"): ["profile"],
    ("profiles", "show", "580.142", "--control", "NV2080_CTRL_CMD_GPU_GET_INFO", "--json"): ["profile_entry"],
    ("profiles", "diff", "575.64.05", "580.142", "--json"): ["profile_diff"],
}
"""Each command line that prints JSON, and the types it prints in order (docs/json-schema.md's first table)."""


def json_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every (sub)command of rmtrace's parser that takes --json."""
    found = {path} if any("--json" in a.option_strings for a in parser._actions) else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= json_commands(sub, (*path, name))
    return found


def test_every_json_option_is_checked():
    checked = {tuple(argv[:2]) if argv[0] in ("profiles", "model") else argv[:1] for argv in PRINTED}
    elsewhere = {("reduce",)}  # test_a_reduction_says_what_made_it_and_from_what (a reduction takes its time)
    assert json_commands(build_parser()) == checked - {("export",)} | elsewhere


def test_every_command_prints_documented_objects(capsys, legacy_replay, tmp_path):
    dataset = tmp_path / "dataset"
    assert main(["export", "nvidia-smi-q", "--format", "parquet", "-o", str(dataset)]) == 0
    for argv, types in PRINTED.items():
        argv = tuple(str(a).format(replay=legacy_replay, tmp=tmp_path, dataset=dataset) for a in argv)
        got = objects(capsys, *argv)
        assert got and list(dict.fromkeys(o["type"] for o in got)) == types, argv
        for obj in got:
            check(obj)
    for obj in objects(capsys, "show", "nvidia-smi-q", "--json", "--limit", "20"):
        for rec in obj["records"]:
            check(rec)
    rows = objects(capsys, "query", "SELECT 'x' AS type, 7 AS n", dataset, "--json")
    assert rows == [{"type": "row", "values": {"type": "x", "n": 7}}]  # a column called type stays a column


def test_one_clock_everywhere(capsys, legacy_replay):
    """t_ns is since the trace's first record in show, wedges and the records; info ties it to time_ns."""
    info, = objects(capsys, "info", legacy_replay, "--json")
    calls = {c["seq"]: c for c in objects(capsys, "show", legacy_replay, "--json", "--pid", 523)}  # c2's replay pid
    wedges = objects(capsys, "wedges", legacy_replay, "--json")
    top = wedges[0]
    assert top["kind"] == "in_flight" and calls[top["seq"]]["t_ns"] == top["t_ns"] > 0
    assert calls[top["seq"]]["state"] == "in_flight"
    for call in calls.values():
        assert call["time_ns"] == info["start_time_ns"] + call["t_ns"]
        assert all(r["time_ns"] == info["start_time_ns"] + r["t_ns"] for r in call["records"])
    first, = objects(capsys, "show", legacy_replay, "--json", "--limit", 1)
    assert first["t_ns"] == 0 and first["time_ns"] == info["start_time_ns"]


def test_a_replay_says_what_made_it_and_from_what(capsys, legacy_replay):
    info, = objects(capsys, "info", legacy_replay, "--json")
    source, = objects(capsys, "info", "cuda-streams-3x-sequential", "--json")
    assert source["made"] is None and source["recorded"]["backend"] == "preload"
    made = info["made"]
    assert made["by"] == "rmtrace replay" and made["from"] == str(captures.path("cuda-streams-3x-sequential"))
    assert (made["target"], made["schedule"]) == ("model:legacy", "sequential")
    assert made["host"] and made["time"] and made["time"] != source["recorded"]["start_time"]
    assert info["recorded"] == source["recorded"]  # the recording it goes back to, not this file
    main(["info", str(legacy_replay)])
    text = capsys.readouterr().out
    assert re.search(r"^made by +rmtrace replay .* against model:legacy, schedule sequential$", text, re.M)
    assert re.search(r"^made from +.*cuda-streams-3x-sequential.trace$", text, re.M)
    assert re.search(r"^recording +2026-11-29T16:30:33.* on vm \(kernel 6.18.44-fc-v657-gpu\) backend preload$",
                     text, re.M)
    assert "recorded " not in text


def test_a_reduction_says_what_made_it_and_from_what(capsys, legacy_replay, tmp_path):
    """A reduced trace made from a replay: made by reduce from that replay file, the recording still the one
    the replay was made from."""
    small = tmp_path / "small.trace"
    reduction, = objects(capsys, "reduce", legacy_replay, "--schedule", "sequential", "--against", "model:legacy",
                         "-o", small, "--json")
    check(reduction)
    assert reduction["type"] == "reduction" and reduction["same"] and reduction["exit_status"] == 0
    assert (reduction["clients_before"], reduction["clients"]) == (3, 2) and reduction["output"] == str(small)
    assert reduction["signature"] == [{"name": "UVM_REGISTER_GPU", "kind": "registration exchange"}]
    assert reduction["kept"][1]["messages"][-1] == "UVM_REGISTER_GPU"
    info, = objects(capsys, "info", small, "--json")
    source, = objects(capsys, "info", "cuda-streams-3x-sequential", "--json")
    made = info["made"]
    assert (made["by"], made["from"], made["target"], made["schedule"]) == \
        ("rmtrace reduce", str(legacy_replay), "model:legacy", "sequential")
    assert info["recorded"] == source["recorded"]
    main(["info", str(small)])
    text = capsys.readouterr().out
    assert re.search(r"^made by +rmtrace reduce .* against model:legacy, schedule sequential$", text, re.M)
    assert re.search(rf"^made from +{re.escape(str(legacy_replay))}$", text, re.M)
    assert re.search(r"^recording +2026-11-29T16:30:33.* on vm \(kernel 6.18.44-fc-v657-gpu\)", text, re.M)


@pytest.mark.parametrize("count", [0, 1, 255, 256, 257, 600])
def test_write_lines_writes_encode_lines_in_order_after_earlier_text(count):
    import io

    from rmtrace import jsonschema

    objects = [{"type": "n", "n": i, "text": "é" if i % 7 == 3 else "a"} for i in range(count)]
    expected = "".join(jsonschema.encode(o, newline=True).decode("ascii") for o in objects)
    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="ascii")
    text.write("before\n")  # buffered as text: must come out ahead of the lines written as bytes
    assert jsonschema.write_lines(iter(objects), text) == count
    text.write("after\n")
    text.flush()
    assert raw.getvalue().decode("ascii") == "before\n" + expected + "after\n"
    plain = io.StringIO()  # no binary buffer: the same lines as text
    assert jsonschema.write_lines(objects, plain, limit=count // 2) == count // 2
    assert plain.getvalue() == "".join(jsonschema.encode(o, newline=True).decode("ascii") for o in objects[:count // 2])
