"""Replay targets, chosen with ``--against``: a table from the spec's prefix to a factory.

``model`` (= ``model:fixed``), ``model:legacy``, ``model:rearm-only``: the
embedded host-service model; ``unix:PATH``: any service speaking
docs/replay-protocol.md; ``recorded``: the recording answers itself.  A new
target (``kmod``, ``nvidia``) is one more entry here and one module
implementing :class:`~rmtrace.replayer.targets.base.Target`.
"""

from __future__ import annotations

from collections.abc import Callable

from rmtrace.replayer.model.policy import PRESETS, policy
from rmtrace.replayer.plan import Plan
from rmtrace.replayer.targets.base import RunInfo, Target, clock_spec
from rmtrace.replayer.targets.kmod import KmodTarget
from rmtrace.replayer.targets.model import ModelTarget
from rmtrace.replayer.targets.nvidia import NvidiaTarget
from rmtrace.replayer.targets.recorded import RecordedTarget
from rmtrace.replayer.targets.unix import UnixTarget

from rmtrace.errors import RmtraceError


def _unix(arg: str, plan: Plan) -> Target:
    path, clock = clock_spec(arg, "unix")
    if not path:
        raise RmtraceError("--against unix:PATH needs the socket's path")
    return UnixTarget(path, plan.semantics, clock)


TARGETS: dict[str, tuple[Callable[[str, Plan], Target], str]] = {
    "model": (lambda arg, plan: ModelTarget(policy(arg or None), plan.semantics),
              f"the embedded host-service model; model:{'|'.join(PRESETS)} (default fixed)"),
    "unix": (_unix, "a host service behind a Unix socket speaking docs/replay-protocol.md; ,clock=real for "
                     "its own time"),
    "recorded": (lambda arg, plan: RecordedTarget(plan.source, plan.semantics),
                 "the recording answers itself (a self-check: green, zero divergences)"),
    "kmod": (lambda arg, plan: KmodTarget(arg, plan.semantics),
             "a kernel host service on /dev/rmtrace-replay; kmod:PATH (a device or a guest's relayed port), "
             ",clock=real for its own time"),
    "nvidia": (lambda arg, plan: NvidiaTarget(plan, allow_unsafe=arg == "allow-unsafe"),
               "the real driver: each client a process re-issuing its RM/UVM calls (docs/replay-nvidia.md)"),
}


def make_target(spec: str, plan: Plan) -> Target:
    """The target ``spec`` names (``model``, ``model:legacy``, ``unix:/run/x.sock``, ``recorded``)."""
    kind, _, arg = spec.partition(":")
    entry = TARGETS.get(kind)
    if entry is None:
        raise RmtraceError(f"unknown target {spec!r} (one of: {', '.join(TARGETS)})")
    return entry[0](arg, plan)


def describe_targets() -> str:
    return "\n".join(f"  {name:<9} {text}" for name, (_f, text) in TARGETS.items())


__all__ = ["Target", "RunInfo", "TARGETS", "make_target", "describe_targets", "ModelTarget", "UnixTarget",
           "RecordedTarget", "NvidiaTarget"]
