"""Replay throughput: messages per second through the model target, beside only iterating the plan.

    python bench/replay.py [--trace FILE] [--messages 1000000] [--repeat 3]

The plan is a real capture's client repeated until it holds about
``--messages`` messages (cuda-streams.trace: 865 messages per client, so
1,157 sequential clients).  Measured in the same run, best of ``--repeat``:

* iterating the plan: every message of every client visited once, the
  least any replay loop must do (the baseline);
* the replay against ``model:fixed``, sequential, no output trace: runner,
  schedule, model, comparison (the goal: >= 100,000 messages/s);
* the same with the replay's trace written (every request, reply and sema
  record encoded and compressed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from report import best, print_rows
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.runner import replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets import make_target

from rmtrace import captures

GOAL = 100_000


def iterate(plan) -> int:
    n = 0
    for client in plan.clients:
        for msg in client.messages:
            n += msg.kind
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", help="a capture (default: the shipped cuda-streams.trace)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = args.trace or str(captures.path("cuda-streams"))
    if not os.path.isfile(trace):
        parser.error(f"{trace}: no such file")

    one = build_plan(trace).select([1])
    plan = one.repeat(max(1, round(args.messages / one.message_count)))
    n = plan.message_count
    schedule = Schedule.parse("sequential")
    print(f"plan: {os.path.basename(trace)} c1 ({one.message_count} messages) x {len(plan.clients)} = {n:,} messages",
          file=sys.stderr)

    t_iter = best(iterate, plan, repeat=args.repeat)
    result = {}

    def through_model(output=None):
        result["r"] = replay(plan, schedule, make_target("model:fixed", plan), output=output)

    t_model = best(through_model, repeat=args.repeat)
    assert result["r"].exit_status == 0, "the benchmark plan must replay green"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.replay.trace")
        t_out = best(through_model, out, repeat=max(1, args.repeat - 1))
        size = os.path.getsize(out)

    counters = result["r"].counters
    print_rows([
        ("messages", f"{n:,} ({len(plan.clients):,} sequential clients)"),
        ("iterate the plan (baseline)", f"{n / t_iter:>12,.0f} msgs/s"),
        ("replay, model:fixed", f"{n / t_model:>12,.0f} msgs/s   {t_model / t_iter:6.1f}x the baseline's time"
                                f"   goal >= {GOAL:,}: {'met' if n / t_model >= GOAL else 'NOT met'}"),
        ("replay, model:fixed + trace", f"{n / t_out:>12,.0f} msgs/s   ({size / 1e6:.1f} MB written)"),
        ("host counters at the end", f"pub_calls={counters['pub_calls']:,} gr_rel={counters['gr_rel']:,} "
                                     f"faked={counters['faked']:,} sessions={counters['sessions']:,}"),
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
