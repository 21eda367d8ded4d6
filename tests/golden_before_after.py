"""Before and after the semantic layer, on the committed replay traces (captures/replays/).

Those traces came after the goldens' first commit, so their goldens (``replay-trace-*``) hold only
today's answers. This runs an older commit's own code (its ``tests.golden_outputs.analysis``: the
fold, ``wedges`` and ``stats``) over the same traces, undoes in today's goldens each change made on
purpose since (``UNDONE``: the commit that made it, and what it changed), and prints what is left:
a difference nobody meant. Nothing left is the proof; the goldens themselves stay today's.

    python -m tests.golden_before_after bac29c6   # the commit before the semantic layer
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.golden_outputs import GOLDEN, REPLAYS, load

ROOT = Path(__file__).resolve().parent.parent
DUMP = """
import json, sys
from pathlib import Path
from rmtrace.session import load_session
from tests.golden_outputs import analysis, plain
for trace in sys.argv[2:]:
    out = Path(sys.argv[1]) / (Path(trace).stem + ".json")
    out.write_text(json.dumps(plain(analysis(load_session(trace))), sort_keys=True))
"""
"""Runs inside the old commit's tree: its own fold and analysis, written as JSON read back."""


def _strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {_strings(k, fn): _strings(v, fn) for k, v in value.items()}
    return value


def _no_category(after: dict, before: dict) -> dict:
    objects = after["objects"]
    if objects and "category" in objects[0]:
        i = objects[0].index("category")
        after["objects"] = [row[:i] + row[i + 1:] for row in objects]
    return after


def _no_uuid(after: dict, before: dict) -> dict:
    for client in after["clients"]:
        if client["uvm_gpus"]:
            client["uvm_gpus"] = [""]
    return after


def _old_client_names(after: dict, before: dict) -> dict:
    old = {c["pid"]: c["id"] for c in before["clients"]}
    rename = {c["id"]: old.get(c["pid"], c["id"]) for c in after["clients"]}
    after = _strings(after, lambda s: re.sub(r"\bc\d+\b", lambda m: rename.get(m.group(0), m.group(0)), s))
    order = [c["id"] for c in before["clients"]]
    for rows in (after["clients"], after["stats"]["clients"]):
        rows.sort(key=lambda c: order.index(c["id"]) if c["id"] in order else len(order))
    return after


def _lower_sys_ops(after: dict, before: dict) -> dict:
    return _strings(after, lambda s: s[4:].lower() if re.fullmatch(r"SYS_[A-Z0-9_]+", s) and s != "SYS_PARAMS"
                    else s)  # SYS_PARAMS is an RM escape's own name, upper case before too


def _no_rank_times(after: dict, before: dict) -> dict:
    for rank in after["ranks"]:
        rank.pop("fired_ns", None)
        rank.pop("held_ns", None)
    return after


def _os_event_status_as_number(after: dict, before: dict) -> dict:
    for op in after["stats"]["operations"]:
        if op["operation"] in ("ALLOC_OS_EVENT", "FREE_OS_EVENT"):
            op["statuses"] = {("0" if k == "NV_OK" else k): n for k, n in op["statuses"].items()}
    return after


UNDONE: tuple[tuple[str, str, Callable[[dict, dict], dict]], ...] = (
    ("16f629e", "every RM object knows its category (a column of its own)", _no_category),
    ("047d2d6", "a UVM registration keeps the GPU's UUID (was always empty)", _no_uuid),
    ("d3a5847", "a replay trace's clients are named by the pids its metadata lists", _old_client_names),
    ("c2a56c6", "system ops carry their source's prefix (SYS_OPEN, was open)", _lower_sys_ops),
    ("d99500c", "a rank knows when its latch fired and its drain hold began", _no_rank_times),
    ("278cfd7", "ALLOC_OS_EVENT / FREE_OS_EVENT report their Status as an NV_STATUS", _os_event_status_as_number),
)
"""The changes made on purpose since the semantic layer's first goldens that these traces show."""


def _old_outputs(rev: str, traces: list[Path], out: Path, scratch: Path) -> None:
    """``rev``'s analysis of ``traces`` into ``out``: its tree unpacked, shaped as installed (setup.py's TOP)."""
    src, tree = scratch / "src", scratch / "tree"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    (tree / "rmtrace").mkdir(parents=True)
    for entry in (src / "rmtrace").iterdir():
        (tree / "rmtrace" / entry.name).symlink_to(entry)
    setup = ast.parse((src / "setup.py").read_text())
    top = next(node.value for node in setup.body
               if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TOP")
    for package, folder in ast.literal_eval(top).items():
        if package != "rmtrace":
            tree.joinpath(*package.split(".")).symlink_to(src / folder)
    # the tree first, ahead of this checkout's editable install (and run from it: -c puts the cwd first)
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{src}"}
    subprocess.run([sys.executable, "-c", DUMP, str(out), *map(str, traces)], check=True, env=env, cwd=tree)


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else "bac29c6"
    traces = sorted(REPLAYS.glob("*.trace"))
    left = 0
    with tempfile.TemporaryDirectory(prefix="rmtrace-before-") as scratch:
        out = Path(scratch) / "out"
        out.mkdir()
        _old_outputs(rev, traces, out, Path(scratch))
        for trace in traces:
            before = json.loads((out / f"{trace.stem}.json").read_text())
            after = load(f"replay-trace-{trace.stem}")
            changed = []
            for commit, _what, undo in UNDONE:
                undone = undo(json.loads(json.dumps(after)), before)
                if undone != after:
                    changed.append(commit)
                after = undone
            keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            left += bool(keys)
            print(f"{trace.stem}: {'differs in ' + ', '.join(keys) if keys else 'equal'}"
                  f"{' once ' + ', '.join(changed) + ' are undone' if changed else ''}")
    for commit, what, _undo in UNDONE:
        print(f"  {commit}: {what}")
    print(f"{left} of {len(traces)} replay traces differ from {rev}'s outputs beyond those changes "
          f"(today's: {GOLDEN.relative_to(ROOT)}/replay-trace-*.json)")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
