"""Parquet: the five shipped captures into one dataset; DuckDB's answers to docs/export.md's queries are the
figures the library's stats compute, and the docs print them as `rmtrace query` does."""

from __future__ import annotations

import re
from collections import defaultdict

import pyarrow.dataset as ds
import pytest

from rmtrace import captures
from rmtrace.analysis.stats import OpStats, session_stats
from rmtrace.cli.main import main
from rmtrace.export.parquet import SCHEMA, export_dataset
from rmtrace.session import load_session

QUERY = re.compile(r'<!-- query: (?P<name>\S+) -->\n```sh\nrmtrace query "(?P<sql>.*?)" fleet/\n```\n```\n(?P<out>.*?)```',
                   re.S)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    paths = [str(captures.path(name)) for name in sorted(captures.shipped())]
    assert len(paths) == 5
    written = export_dataset(paths, root)
    models = {p: load_session(p) for p in paths}
    return root, written, models


@pytest.fixture
def docs_queries(repo_root):
    found = {m["name"]: (m["sql"], m["out"]) for m in QUERY.finditer((repo_root / "docs" / "export.md").read_text())}
    assert {"slow-uvm-register", "slow-uvm-register-100ms", "state-in-use", "alloc-p99"} <= found.keys()
    return found


def run_query(capsys, sql: str, root) -> str:
    capsys.readouterr()
    assert main(["query", sql, str(root)]) == 0
    return capsys.readouterr().out


def test_the_dataset_is_partitioned_by_host_and_day_and_holds_every_call(fleet):
    root, written, models = fleet
    assert {p.relative_to(root).parts[:2] for p, _ in written} == {("host=vm", "day=2026-11-29")}
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    assert set(SCHEMA.names) | {"host", "day"} == set(table.column_names)
    assert table.num_rows == sum(len(m.calls) for m in models.values()) == sum(n for _, n in written)
    # stable object names ride along with the handles
    rows = table.filter(ds.field("op") == "RM_ALLOC").slice(0, 50).to_pylist()
    assert any(dict(r["objects"]).get("hObject", "").startswith("NV01_ROOT_CLIENT#0/NV01_DEVICE_0#0") for r in rows)


def test_the_docs_queries_print_what_the_docs_say(fleet, docs_queries, capsys):
    root, _written, _models = fleet
    for name, (sql, out) in docs_queries.items():
        assert run_query(capsys, sql, root) == out, name


def slow_uvm_registrations(models, threshold_ns: int) -> set[tuple[str, str, str]]:
    """(host, trace, client) with a UVM_REGISTER_GPU longer than the threshold (or in flight that long), from stats."""
    out = set()
    for path, model in models.items():
        host = model.meta["host"]
        for row in session_stats(model)["operations"]:
            if row["operation"] == "UVM_REGISTER_GPU" and row["latency_ns"] and row["latency_ns"]["max"] > threshold_ns:
                out.add((host, path.rsplit("/", 1)[1], row["client"]))
        for call in model.calls:
            if call.name == "UVM_REGISTER_GPU" and call.in_flight and model.end_ns - call.t_enter > threshold_ns:
                out.add((host, path.rsplit("/", 1)[1], call.client_id))
    return out


@pytest.mark.parametrize("name, threshold", [("slow-uvm-register", 10**9), ("slow-uvm-register-100ms", 10**8)])
def test_slow_uvm_registrations_are_the_stats(name, threshold, fleet, docs_queries):
    from rmtrace.export.query import query
    root, _written, models = fleet
    columns, rows = query(docs_queries[name][0], root)
    got = {(r[columns.index("host")], r[columns.index("trace")], r[columns.index("client")]) for r in rows}
    assert got == slow_uvm_registrations(models, threshold)
    assert (name == "slow-uvm-register") == (not got)  # none over 1 s in the shipped captures; torch's 176 ms over 0.1 s


def test_state_in_use_per_driver_and_control_is_the_stats(fleet, docs_queries):
    from rmtrace.export.query import query
    root, _written, models = fleet
    columns, rows = query(docs_queries["state-in-use"][0], root)
    expected: dict[tuple[str, str], int] = defaultdict(int)
    for model in models.values():
        for row in session_stats(model)["operations"]:
            n = row["statuses"].get("NV_ERR_STATE_IN_USE")
            if n:
                control = row["operation"].removeprefix("RM_CONTROL(").removesuffix(")")
                expected[(model.meta["driver_version"], control)] += n
    assert {(r[0], r[1]): r[2] for r in rows} == expected and expected


def test_alloc_p99_per_class_across_the_fleet_is_the_stats(fleet, docs_queries):
    from rmtrace.export.query import query
    root, _written, models = fleet
    columns, rows = query(docs_queries["alloc-p99"][0], root)
    per_class: dict[str, OpStats] = {}
    for model in models.values():
        for call in model.calls:
            if call.name == "RM_ALLOC":
                per_class.setdefault(call.detail, OpStats(0, None, "RM", call.detail)).add(call)
    expected = {cls: (len(s.latencies), s.latency()["p99"]) for cls, s in per_class.items() if s.latencies}
    assert {r[0]: (r[1], r[2]) for r in rows} == expected


def test_reexporting_needs_force_and_replaces(fleet, tmp_path, capsys):
    trace = str(captures.path("nvidia-smi-q"))
    out = tmp_path / "ds"
    assert main(["export", trace, "--format", "parquet", "-o", str(out)]) == 0
    assert main(["export", trace, "--format", "parquet", "-o", str(out)]) == 2
    assert "in the dataset already" in capsys.readouterr().err
    assert main(["export", trace, "--format", "parquet", "-o", str(out), "--force", "--host", "gpu-7"]) == 0
    assert [p.relative_to(out).parts[0] for p in out.glob("**/*.parquet")] == ["host=gpu-7"]
