"""rmtrace replay: a trace's clients against a host service, in a schedule: green / diverged / wedged."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmtrace.cli.common import (
    add_json_argument,
    add_output_arguments,
    add_trace_argument,
    count,
    output_path,
    positive_count,
    positive_duration,
    same_file,
    trace_or_default,
    trace_stem,
)
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

if TYPE_CHECKING:
    from rmtrace.replayer.plan import Plan
    from rmtrace.replayer.runner import ReplayResult
    from rmtrace.replayer.schedules import Schedule

NAME = "replay"
HELP = "replay a trace's clients against a host service in a schedule: green / diverged / wedged per client"
DESCRIPTION = """\
Cut a trace into its clients (processes that talked to RM/UVM, or GSP sessions),
send their messages to a target in a schedule, and say per client: green,
diverged at message N (with the difference), or wedged at message N (with the
chain of why).  The replay is written as a trace of its own (-o), which show,
wedges, diff and the TUI read like a recording.  Exit status: 0 all green,
1 something diverged, 3 something wedged (docs/exit-codes.md).

Targets (--against):
{targets}

Schedules (--schedule): recorded (the recording's interleaving), sequential
(client after client), concurrent (all at once), simultaneous (each client
with its streams at once; --streams defaults to 4), chaos[:SEED] (random
interleavings and delays; --runs K tries K seeds and lists the failing ones).

The seed's validation plan, from one recorded run:
  rmtrace replay run1.trace --repeat 3 --schedule sequential --against model:legacy
  rmtrace replay run1.trace --repeat 3 --schedule sequential --against model:fixed
  rmtrace replay run1.trace --repeat 2 --schedule concurrent
  rmtrace replay run1.trace --schedule simultaneous --streams 4
  rmtrace replay run1.trace --repeat 3 --schedule chaos --runs 50 --against model:legacy
"""

SIMULTANEOUS_STREAMS = 4


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    # Only replay and reduce get here (main adds the arguments of the command being run): the
    # replayer's imports cost no other command.
    from rmtrace.replayer.runner import DEFAULT_TIMEOUT_NS
    add_trace_argument(parser)
    group = parser.add_argument_group("plan")
    group.add_argument("--clients", metavar="N,M", help="only these recorded clients (1 = c1, ...)")
    group.add_argument("--repeat", type=positive_count, default=1, metavar="N", help="run the clients N times over")
    group.add_argument("--streams", type=positive_count, metavar="N",
                       help="multiply each client's channel work over N channels/ranks")
    group.add_argument("--driver", metavar="VERSION", help="decode as this driver version (default: the recorded one)")
    run = parser.add_argument_group("run")
    run.add_argument("--against", default="model", metavar="TARGET", help="where messages go (default: model)")
    run.add_argument("--schedule", default="recorded", metavar="SCHEDULE", help="default: recorded")
    run.add_argument("--seed", type=count, help="chaos seed (default 0)")
    run.add_argument("--timeout", default=f"{DEFAULT_TIMEOUT_NS // 1_000_000_000}s", metavar="DURATION",
                     type=positive_duration,
                     help="watchdog: an answer later than this wedges its client (default 10s; "
                          "virtual time for the model, so free)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rmtrace.replayer.targets import describe_targets
    parser.description = DESCRIPTION.format(targets=describe_targets())
    add_plan_arguments(parser)
    parser.add_argument("--runs", type=positive_count, default=1, metavar="K",
                        help="chaos: try K seeds from --seed on; the first failing one writes the replay trace")
    add_output_arguments(parser, "the replay's trace (default: a new NAME-N.replay.trace in $RMTRACE_DATA_DIR/replays, "
                                 "~/.local/share/rmtrace/replays; printed)")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report (--force: over an old one)")
    add_json_argument(parser, "per run a replay object, then a verdict object per client")
    parser.add_argument("--oracle", metavar="ORACLE",
                        help="check each answer against this instead of the recording: nvidia (the real driver, "
                             "answering the same messages) or a trace (e.g. a replay against nvidia)")
    parser.add_argument("--allow-unsafe", action="store_true",
                        help="nvidia: also send the calls its safety table does not know to be harmless")


def _numbers(text: str) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        raise RmtraceError(f"--clients takes client numbers such as 1,3 (c1 is 1), not {text!r}")
    return numbers


def schedule_from_args(args: argparse.Namespace) -> Schedule:
    from rmtrace.replayer.schedules import Mode, Schedule
    schedule = Schedule.parse(args.schedule, args.seed)
    if args.seed is not None and schedule.mode is not Mode.CHAOS:
        raise RmtraceError(f"--seed picks the chaos schedule's random choices; {schedule} makes none "
                           f"(use --schedule chaos)")
    return schedule


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The plan the arguments describe: cut, narrowed, repeated, widened."""
    from rmtrace.replayer.plan import build_plan
    from rmtrace.replayer.schedules import Mode
    plan = build_plan(trace_or_default(args), driver=args.driver)
    warning = plan.semantics.decoders.warning
    if warning:
        print(f"rmtrace: {warning}", file=sys.stderr)
    if args.clients:
        plan = plan.select(_numbers(args.clients))
    plan = plan.repeat(args.repeat)
    streams = args.streams
    if streams is None and schedule_from_args(args).mode is Mode.SIMULTANEOUS:
        streams = SIMULTANEOUS_STREAMS
    return plan.streams(streams) if streams is not None else plan


def run_once(plan: Plan, args: argparse.Namespace, schedule: Schedule, output: str | None) -> ReplayResult:
    from rmtrace.replayer.oracle import default_oracle, make_oracle
    from rmtrace.replayer.runner import replay
    from rmtrace.replayer.targets import make_target
    unsafe = ":allow-unsafe" if args.allow_unsafe else ""
    target = make_target(args.against + unsafe if args.against == "nvidia" else args.against, plan)
    spec = args.oracle
    oracle = make_oracle(spec + unsafe if spec == "nvidia" else spec, plan) if spec else default_oracle(target, plan)
    return replay(plan, schedule, target, timeout_ns=args.timeout, output=output, oracle=oracle)


def _output(args: argparse.Namespace, plan: Plan) -> str:
    """The replay trace's path: -o (checked), or a new file in rmtrace's replays directory."""
    return output_path(args.output, force=args.force, inputs=(plan.source,), kind="replays",
                       stem=trace_stem(plan.source), suffix=".replay.trace")


def run(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.replayer.chains import attach_wedge_chains
    from rmtrace.replayer.report import EXIT_MEANING, headline, junit, table
    from rmtrace.replayer.schedules import Mode
    plan = plan_from_args(args)
    schedule = schedule_from_args(args)
    if args.runs > 1 and schedule.mode is not Mode.CHAOS:
        raise RmtraceError("--runs explores seeds of the chaos schedule: use --schedule chaos")
    if args.allow_unsafe and "nvidia" not in (args.against, args.oracle):
        raise RmtraceError("--allow-unsafe lifts the real driver's safety table: give it with --against nvidia "
                           "or --oracle nvidia")
    if args.output is not None:
        output_path(args.output, force=args.force, inputs=(plan.source,))  # refused before the replay runs
    if args.junit:
        if args.output and same_file(args.junit, args.output):
            raise RmtraceError("--junit and -o name the same file")
        output_path(args.junit, force=args.force, inputs=(plan.source,))
    source = os.path.basename(plan.source)
    say = _quiet if args.json else print
    if args.runs == 1:
        result = run_once(plan, args, schedule, _output(args, plan))
        attach_wedge_chains(result)
        say(headline(result, source))
        say(table(result))
        if result.notes:
            say("\n".join(result.notes))
        results = [result]
    else:
        results = _explore(plan, args, schedule, source, say)
    if args.junit:
        junit(results, args.junit, source)
    status = max(r.exit_status for r in results)
    if args.json:
        jsonschema.write_lines((obj for r in results for obj in [jsonschema.replay(r, plan.source)]
                                + [jsonschema.verdict(c, r) for c in r.clients]), sys.stdout)
        return status
    written = next((r.output for r in results if r.output), None)
    print(f"replay trace: {written or 'none (every run green)'}")
    print(f"exit {status}: {EXIT_MEANING[ExitCode(status)]}")
    return status


def _quiet(*_lines: str) -> None:
    """--json: the text report is not printed (the objects say it all)."""


def _explore(plan: Plan, args: argparse.Namespace, first: Schedule, source: str,
             say: Callable[[str], None]) -> list[ReplayResult]:
    """K chaos seeds without writing; the first failing one again, with its trace (the same result).
    One output per command, not one per seed: any other failing seed replays alone with its number."""
    from rmtrace.replayer.chains import attach_wedge_chains
    from rmtrace.replayer.report import EXIT_MEANING, seeds_line
    from rmtrace.replayer.schedules import Mode, Schedule
    results = []
    written = False
    say(f"replay {source}: {len(plan.clients)} clients, {plan.message_count} messages, "
        f"{args.runs} chaos seeds from {first.seed} against {args.against}")
    for seed in range(first.seed, first.seed + args.runs):
        schedule = Schedule(Mode.CHAOS, seed)
        result = run_once(plan, args, schedule, None)
        if result.failed and not written:
            result = run_once(plan, args, schedule, _output(args, plan))
            attach_wedge_chains(result)
            written = True
        verdicts = ", ".join(f"{c.client.id} {c.verdict.value}" for c in result.clients)
        say(f"  {str(schedule):<10} {EXIT_MEANING[ExitCode(result.exit_status)]:<9} {verdicts}")
        results.append(result)
    say(seeds_line(results))
    return results
