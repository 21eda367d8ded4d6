"""Today's fold, wedges, stats, diff and replays give what the committed goldens say (tests/golden/).

The goldens were made at the commit before the semantic layer (rmtrace.semantics) replaced the
name-keyed tables; each later change to them is a commit of its own that says why.
``python -m tests.golden_outputs`` regenerates them.
"""

from __future__ import annotations

import difflib

import pytest

from tests import golden_outputs


def _where(expected: dict, got: dict) -> str:
    """The keys that differ, each with the first lines of a diff of its elements."""
    out = []
    for key in sorted(set(expected) | set(got)):
        a, b = expected.get(key), got.get(key)
        if a == b:
            continue
        lines_a = golden_outputs.dumps({key: a}).splitlines()
        lines_b = golden_outputs.dumps({key: b}).splitlines()
        diff = list(difflib.unified_diff(lines_a, lines_b, "golden", "today", n=1, lineterm=""))
        out.append(f"{key}:\n" + "\n".join(diff[2:40]))
    return "\n".join(out)


@pytest.mark.parametrize("name", sorted(golden_outputs.cases()))
def test_outputs_match_the_golden(name):
    expected = golden_outputs.load(name)
    got = golden_outputs.compute(name)
    assert got == expected, f"{name} differs from tests/golden/{name}.json:\n{_where(expected, got)}"


def test_every_golden_file_has_a_case():
    names = {p.stem for p in golden_outputs.GOLDEN.glob("*.json")}
    assert names == set(golden_outputs.cases())


def test_the_comparison_sees_a_change():
    """A golden that says something else fails, and the message names the key and the line."""
    expected = golden_outputs.load("scenario-sequential-wedged")
    changed = dict(expected, wedges=expected["wedges"][1:])
    assert changed != expected
    assert "wedges:" in _where(expected, changed) and "-{" in _where(expected, changed)
