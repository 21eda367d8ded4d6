"""rmtrace reduce: the smallest trace that still wedges the same way (ddmin over clients, then messages)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from rmtrace.cli.common import add_json_argument, add_output_arguments, output_path, trace_stem
from rmtrace.cli.replay import add_plan_arguments, plan_from_args, schedule_from_args
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

if TYPE_CHECKING:
    from rmtrace.replayer.plan import Plan
    from rmtrace.replayer.targets import Target

NAME = "reduce"
HELP = "shrink a wedging replay to the fewest clients and messages that still wedge the same way"
DESCRIPTION = """\
Replay FILE as 'rmtrace replay' would (same plan, target and schedule
options), take the wedge it ends in, and delta-debug it: ddmin over whole
clients, then over messages, keeping every message with the ones that
allocate the handles and open the files it uses.  Writes the smallest trace
that still wedges the same way (same message, same kind of wait) and says
how much it removed; replaying that trace alone shows the wedge.

  rmtrace reduce run1.trace --repeat 3 --schedule sequential --against model:legacy -o small.trace
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_arguments(parser)
    add_output_arguments(parser, "the reduced trace (default: a new NAME-N.reduced.trace in "
                                 "$RMTRACE_DATA_DIR/reductions, ~/.local/share/rmtrace/reductions; printed)")
    add_json_argument(parser, "one reduction object")


def run(args: argparse.Namespace) -> int:
    if args.against.startswith("recorded"):
        raise RmtraceError("the recording never wedges on itself: reduce against a model or a service")
    from rmtrace.replayer.reduce import check, reduce_plan, write_plan
    from rmtrace.replayer.targets import make_target
    plan = plan_from_args(args)
    schedule = schedule_from_args(args)
    timeout = args.timeout
    if args.output is not None:
        output_path(args.output, force=args.force, inputs=(plan.source,))  # refused before the reduction runs

    def target(p: Plan) -> Target:
        return make_target(args.against, p)

    reduction = reduce_plan(plan, schedule, target, timeout)
    output = output_path(args.output, force=args.force, inputs=(plan.source,), kind="reductions",
                         stem=trace_stem(plan.source), suffix=".reduced.trace")
    write_plan(reduction.plan, output, {"reduced_from": os.path.basename(plan.source),
                                        "reduce": {"target": args.against, "schedule": str(schedule),
                                                   "signature": [list(s) for s in reduction.signature]}})
    same = check(output, schedule, target, timeout, reduction.signature)
    if args.json:
        from rmtrace import jsonschema
        jsonschema.write_lines([jsonschema.reduction(reduction, plan.source, output, args.against, str(schedule),
                                                     same)], sys.stdout)
        return ExitCode.OK if same else ExitCode.FOUND
    print(reduction.describe())
    for name, kind in reduction.signature:
        print(f"  wedge kept: {name} ({kind})")
    for client in reduction.plan.clients:
        print(f"  {client.label}: " + ", ".join(m.name for m in client.messages))
    print(f"wrote {output}; replayed alone it {'wedges the same way' if same else 'does NOT wedge the same way'}:")
    print(f"  rmtrace replay {output} --schedule {schedule} --against {args.against}")
    return ExitCode.OK if same else ExitCode.FOUND
