"""What the session fold, ``wedges``, ``stats``, ``diff`` and the replayer say about every committed
capture, every committed replay trace (captures/replays/) and the validation plan's replays, as
JSON-ready data: the goldens of tests/golden/.

Everything goes through the library API (``find_wedges(...)`` and ``Wedge.to_dict``, ``session_stats``,
``first_divergence``, the replay report's ``table``), never the CLI's JSON, whose schema is its own.
``tests/test_golden.py`` compares today's code with the committed files; after a deliberate change,
regenerate them in a commit of their own that says why::

    python -m tests.golden_outputs            # rewrite tests/golden/*.json
    python -m tests.golden_outputs --check    # say which cases differ, write nothing
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rmtrace.replayer.chains import attach_wedge_chains
from rmtrace.replayer.plan import Plan, build_plan
from rmtrace.replayer.reduce import reduce_plan
from rmtrace.replayer.report import table
from rmtrace.replayer.runner import ReplayResult, replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target

from rmtrace import captures
from rmtrace.analysis.diff import first_divergence, traffic_table
from rmtrace.analysis.stats import session_stats
from rmtrace.analysis.wedges import find_wedges
from rmtrace.exitcodes import ExitCode
from rmtrace.session import SessionModel, load_session
from tests import scenarios

GOLDEN = Path(__file__).resolve().parent / "golden"
CAPTURES = ("cuda-streams", "cuda-streams-2-together", "cuda-streams-3x-sequential", "nvidia-smi-q",
            "torch-one-kernel")
PLANNED = ("cuda-streams", "nvidia-smi-q", "torch-one-kernel")
"""Captures whose replay plans are kept message by message (the others repeat the same program)."""
REPLAYS = Path(captures.__file__).resolve().parent / "replays"
COMMITTED_TRACES = [captures.path(name) for name in CAPTURES] + sorted(REPLAYS.glob("*.trace"))
"""Every committed capture and replay trace."""
"""The committed replay traces (the H200's and the model's judged by it): each is a case of its own."""


def plain(value: Any) -> Any:
    """``value`` as JSON: dataclasses as dicts, enums by name (a string enum by its value), bytes as hex,
    sets sorted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, ExitCode):
        return int(value)  # the number is the contract (docs/exit-codes.md), not the name
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value, str) else value.name
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- what is kept


def rows(items: Any) -> list[list[Any]]:
    """Dataclass instances as rows of their field values (the field names once, in the first row)."""
    items = list(items)
    if not items:
        return []
    names = [f.name for f in dataclasses.fields(items[0])]
    return [names] + [[plain(getattr(item, n)) for n in names] for item in items]


def session_digest(model: SessionModel) -> dict[str, Any]:
    """The fold's result: processes, clients, objects, channels, ranks, GSP exchanges, every transition."""
    return {
        "processes": [plain(p) for p in model.processes.values()],
        "clients": [plain(c) for c in model.clients],
        "objects": rows(model.object_list),
        "channels": rows(model.channels.values()),
        "ranks": [plain(r) for r in model.ranks.values()],
        "gsp": [plain(x) for x in model.gsp],
        "stray_frees": [c.enter_seq for c in model.stray_frees],
        "stop_reason": plain(model.stop_reason),
        "lost": plain(model.lost),
        "transitions": [[t.t_ns, t.seq, t.entity, t.attr, plain(t.value)] for t in model.transitions],
        "in_flight": [[c.enter_seq, c.client_id, c.full_name] for c in model.calls if c.in_flight],
    }


def analysis(model: SessionModel) -> dict[str, Any]:
    """What ``wedges`` and ``stats`` say, and the fold's state behind them."""
    return {"wedges": [w.to_dict() for w in find_wedges(model)], "stats": session_stats(model),
            **session_digest(model)}


def divergence(a: SessionModel, b: SessionModel) -> dict[str, Any]:
    found = first_divergence(a, b)
    return {"divergence": found.to_dict() if found is not None else None, "traffic": traffic_table(a, b)}


OLD_KEYS = {"handle": "h", "fd": "fd", "va_space": "va"}
"""How the replayer wrote the values a message uses before rmtrace.semantics' ``Ref``: ("h", client,
handle), ("fd", fd), ("va", fd).  The plans keep that notation, so they compare across the change."""


def key(ref: Any) -> list[Any]:
    if isinstance(ref, tuple) and hasattr(ref, "kind"):
        name = OLD_KEYS.get(ref.kind.value, ref.kind.value)
        if name == "h":
            return [name, ref.scope, ref.value]
        return [name, ref.value] + ([ref.scope] if ref.scope else [])
    return plain(ref)


def plan_rows(plan: Plan) -> dict[str, Any]:
    """Every message of every client, with the facts the model and the dependencies use."""
    out: dict[str, Any] = {"clients": [[c.id, c.label, c.pid, c.origin, c.run, c.lanes] for c in plan.clients]}
    for c in plan.clients:
        out[f"messages {c.id}"] = [
            [m.index, m.kind.name, m.name, m.seq, m.lane, m.category.name, m.fd, m.h_client, m.h_parent,
             m.h_object, m.ring_va, m.userd_va, m.ring_size, m.gpu.hex(), [key(r) for r in m.uses],
             [key(r) for r in m.defines],
             list(m.deps), [m.expect.response, m.expect.status, m.expect.status_name, m.expect.ret,
                            m.expect.err, plain(m.expect.fields)], m.think_ns, m.dur_ns]
            for m in c.messages]
    return out


def replayed(result: ReplayResult, workdir: str, fold: bool = True) -> dict[str, Any]:
    """A replay's table (as ``rmtrace replay`` prints it), its per-client results, and what the
    session model, ``wedges`` and ``stats`` read off the trace it wrote."""
    out: dict[str, Any] = {
        "table": table(result).replace(workdir + os.sep, "").splitlines(),
        "clients": [c.to_json() for c in result.clients],
        "wedge_chains": [c.wedge_chain for c in result.clients],
        "counters": result.counters, "exit_status": result.exit_status,
    }
    if result.output is not None:
        model = load_session(result.output)
        out.update(analysis(model) if fold else {"wedges": [w.to_dict() for w in find_wedges(model)]})
    return out


# --------------------------------------------------------------------------- the cases


def _capture(name: str) -> str:
    return str(captures.path(name))


def _replay(source: str, schedule: str, against: str, workdir: str, out: str | None, *, repeat: int = 1,
            streams: int = 1) -> tuple[ReplayResult, Plan]:
    plan = build_plan(source).repeat(repeat).streams(streams)
    output = os.path.join(workdir, out) if out else None
    result = replay(plan, Schedule.parse(schedule), make_target(against, plan), output=output)
    if output is not None:
        attach_wedge_chains(result)
    return result, plan


def _replay_case(source: str, schedule: str, against: str, *, repeat: int = 1, streams: int = 1,
                 fold: bool = True) -> Callable[[str], dict[str, Any]]:
    """A replay and the diff of its trace with the recording; ``fold``: the replay trace's fold as well
    (a self-replay's is the recording's own, already kept by its capture case)."""
    def case(workdir: str) -> dict[str, Any]:
        result, _plan = _replay(_capture(source), schedule, against, workdir, "replay.trace", repeat=repeat,
                                streams=streams)
        out = replayed(result, workdir, fold)
        out.update(divergence(load_session(_capture(source)), load_session(result.output)))
        return out
    return case


def _chaos(source: str, against: str, seeds: range) -> Callable[[str], dict[str, Any]]:
    def case(workdir: str) -> dict[str, Any]:
        plan = build_plan(_capture(source)).repeat(3)
        runs = {}
        for seed in seeds:
            result = replay(plan, Schedule.parse(f"chaos:{seed}"), make_target(against, plan))
            runs[f"chaos:{seed}"] = [c.to_json() for c in result.clients] + [result.counters]
        return runs
    return case


def _reduce(workdir: str) -> dict[str, Any]:
    plan = build_plan(_capture("cuda-streams")).repeat(3)
    reduction = reduce_plan(plan, Schedule.parse("sequential"), lambda p: make_target("model:legacy", p),
                            10_000_000_000)
    return {"describe": reduction.describe(), "signature": plain(reduction.signature),
            **plan_rows(reduction.plan)}


def _scenario(wedge: bool) -> Callable[[str], dict[str, Any]]:
    def case(workdir: str) -> dict[str, Any]:
        return analysis(load_session(scenarios.sequential(Path(workdir) / "s.trace", wedge=wedge)))
    return case


def cases() -> dict[str, Callable[[str], dict[str, Any]]]:
    """Case name -> a function of a scratch directory giving that case's outputs."""
    out: dict[str, Callable[[str], dict[str, Any]]] = {}
    for name in CAPTURES:
        out[f"capture-{name}"] = lambda workdir, name=name: analysis(load_session(_capture(name)))
    for name in PLANNED:
        out[f"plan-{name}"] = lambda workdir, name=name: plan_rows(build_plan(_capture(name)))
    for a, b in (("cuda-streams", "cuda-streams-3x-sequential"), ("cuda-streams-3x-sequential",
                                                                   "cuda-streams-2-together"),
                 ("cuda-streams", "torch-one-kernel")):
        out[f"diff-{a}-vs-{b}"] = lambda workdir, a=a, b=b: divergence(load_session(_capture(a)),
                                                                       load_session(_capture(b)))
    out.update({
        # docs/replay-validation.md, section by section
        "replay-legacy-sequential-repeat3": _replay_case("cuda-streams", "sequential", "model:legacy", repeat=3),
        "replay-legacy-sequential-3x": _replay_case("cuda-streams-3x-sequential", "sequential", "model:legacy"),
        "replay-legacy-concurrent-3x": _replay_case("cuda-streams-3x-sequential", "concurrent", "model:legacy"),
        "replay-fixed-sequential-repeat3": _replay_case("cuda-streams", "sequential", "model:fixed", repeat=3),
        "replay-fixed-concurrent-repeat2": _replay_case("cuda-streams", "concurrent", "model:fixed", repeat=2),
        "replay-fixed-simultaneous-streams4": _replay_case("cuda-streams", "simultaneous", "model:fixed",
                                                           streams=4),
        "replay-fixed-recorded-2together": _replay_case("cuda-streams-2-together", "recorded", "model:fixed"),
        "chaos-legacy-repeat3": _chaos("cuda-streams", "model:legacy", range(4)),
        "chaos-fixed-repeat3": _chaos("cuda-streams", "model:fixed", range(2)),
        "reduce-legacy-sequential-repeat3": _reduce,
        "scenario-sequential-wedged": _scenario(True),
        "scenario-sequential-green": _scenario(False),
    })
    for name in CAPTURES:
        out[f"self-replay-{name}"] = _replay_case(name, "recorded", "recorded", fold=False)
    for trace in sorted(REPLAYS.glob("*.trace")):
        out[f"replay-trace-{trace.stem}"] = lambda workdir, trace=trace: analysis(load_session(str(trace)))
    return out


def compute(name: str) -> dict[str, Any]:
    """One case's outputs, as JSON would read them back (tuples as lists, keys as strings)."""
    with tempfile.TemporaryDirectory(prefix="rmtrace-golden-") as workdir:
        return json.loads(json.dumps(plain(cases()[name](workdir)), sort_keys=True))


# --------------------------------------------------------------------------- files


def path_of(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def dumps(data: dict[str, Any]) -> str:
    """Compact JSON that still diffs line by line: one line per key, one per element of a list."""
    lines = ["{"]
    keys = sorted(data)
    for i, key in enumerate(keys):
        value = data[key]
        comma = "," if i < len(keys) - 1 else ""
        head = json.dumps(key) + ":"
        if isinstance(value, list) and value:
            items = [json.dumps(v, sort_keys=True, separators=(",", ":")) for v in value]
            lines.append(head + "[")
            lines.extend(item + ("," if j < len(items) - 1 else "") for j, item in enumerate(items))
            lines.append("]" + comma)
        else:
            lines.append(head + json.dumps(value, sort_keys=True, separators=(",", ":")) + comma)
    lines.append("}")
    return "\n".join(lines) + "\n"


def load(name: str) -> dict[str, Any]:
    return json.loads(path_of(name).read_text())


def _differing() -> Iterator[str]:
    for name in cases():
        if not path_of(name).is_file() or compute(name) != load(name):
            yield name


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = list(_differing())
        print("\n".join(bad) or "every golden agrees")
        return 1 if bad else 0
    GOLDEN.mkdir(exist_ok=True)
    for name in cases():
        path_of(name).write_text(dumps(compute(name)))
        print(f"wrote {path_of(name).relative_to(GOLDEN.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
