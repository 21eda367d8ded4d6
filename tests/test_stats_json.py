"""``rmtrace stats --json``: its ``stats`` lines are written from the operations' columns a block at a time
(``rmtrace.jsonschema.stats_rows_lines``); they are the bytes ``encode`` gives for each row's dict
(``Operations.rows``), on every committed trace, and on operations whose texts are not ASCII, hold DEL
or quotes, or whose statuses share a text (a dict keeps one of them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rmtrace import jsonschema
from rmtrace.analysis.stats import stats_parts
from rmtrace.columns.stats import Operations
from rmtrace.session.model import load_objects
from tests.golden_outputs import COMMITTED_TRACES


def reference(stats: dict) -> bytes:
    """The lines as each object's dict encoded on its own (``write_lines`` of ``jsonschema.stats``)."""
    return b"".join(jsonschema.encode(obj, newline=True) for obj in jsonschema.stats(stats))


@pytest.mark.parametrize("path", COMMITTED_TRACES, ids=lambda p: Path(p).name)
def test_stats_lines_are_each_objects_encode(path, monkeypatch):
    stats = stats_parts(load_objects(path, cache=False))
    want = reference(stats)
    assert b"".join(jsonschema.stats_lines(stats)) == want
    ops = stats["operations"]
    monkeypatch.setattr(ops, "blocks", lambda block=4096, texts=None, blocks=ops.blocks: blocks(3, texts))
    assert b"".join(jsonschema.stats_lines(stats)) == want
    assert b"".join(jsonschema.stats_lines({**stats, "operations": list(ops.rows())})) == want


def small_operations(status_names: list[str], names: list[str], clients: list[str]) -> Operations:
    """Four groups: one status, two, three, none timed; operation and client texts by index."""
    def col(*values: int) -> np.ndarray:
        return np.array(values, dtype=np.int64)
    return Operations(
        pid=col(1, 1, 2, 3), client=col(0, 1, 2, 1), source=col(0, 1, 0, 1), operation=col(0, 1, 2, 0),
        count=col(5, 7, 9, 1), bytes=col(0, 10, 2**40, 3), in_flight=col(0, 1, 0, 1),
        latency=np.array([[1, 2, 3, 4], [0, 0, 0, 0], [5, 6, 7, 2**62], [0, 0, 0, 0]], dtype=np.int64),
        timed=np.array([True, False, True, False]), status_bounds=col(0, 1, 3, 6, 6),
        status_text=col(0, 1, 2, 2, 1, 0), status_count=col(5, 3, 4, 6, 2, 1),
        clients=clients, sources={0: "RM", 1: "UVM"}, names=names, status_names=status_names)


@pytest.mark.parametrize("texts", [
    (["NV_OK", "in flight", "-"], ["RM_ALLOC(NV01_DEVICE_0)", "A", "B"], ["", "c1", "c2"]),
    (["NV_\u00e9", 'q"\\', "\x7f"], ["\u2603", "tab\there", "\x01"], ["", "\u00fc", "c\x7f"]),
    (["\ud800", "x", "-"], ["A", "\U0001f600", "C"], ["", "c1", "c2"]),  # a lone surrogate: json writes it
    (["NV_OK", "-", "NV_OK"], ["A", "B", "C"], ["", "c1", "c2"]),  # two statuses, one text
    (["-", "in flight", "-"], ["A", "B", "C"], ["", "c1", "c2"]),
])
def test_stats_lines_of_any_texts_are_encodes(texts):
    ops = small_operations(*texts)
    stats = {"processes": [{"pid": 1, "argv": ["\u00e9"]}], "clients": [{"id": "c1"}], "operations": ops}
    got = b"".join(jsonschema.stats_lines(stats))
    assert got == reference(stats)
    assert got.count(b"\n") == 2 + len(ops)


def test_no_operations():
    ops = small_operations(["NV_OK"], ["A"], [""])
    empty = dataclasses.replace(ops, **{f: getattr(ops, f)[:0] for f in ("pid", "client", "source", "operation",
                                                                        "count", "bytes", "in_flight", "latency",
                                                                        "timed", "status_text", "status_count")},
                                status_bounds=np.zeros(1, dtype=np.int64))
    stats = {"processes": [], "clients": [], "operations": empty}
    assert b"".join(jsonschema.stats_lines(stats)) == b""
