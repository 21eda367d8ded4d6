"""The replayer: plans x schedules x targets (docs/replay.md).

    from rmtrace.replayer import build_plan, Schedule, make_target, replay
    plan = build_plan("run1.trace").repeat(3)
    result = replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output="r.trace")
    [(c.client.label, c.summary()) for c in result.clients]

Layer 4: reads traces through the decoders and the session model; imports no TUI.
"""

from rmtrace.replayer.plan import Plan, PlanClient, build_plan
from rmtrace.replayer.runner import ClientResult, ReplayResult, Verdict, replay
from rmtrace.replayer.schedules import Mode, Schedule
from rmtrace.replayer.targets import Target, make_target

__all__ = ["build_plan", "Plan", "PlanClient", "Schedule", "Mode", "make_target", "Target", "replay",
           "ReplayResult", "ClientResult", "Verdict"]
