"""Time for `rmtrace tui` to paint its first screen and to jump to the end, beside `rmtrace info`.

    python bench/tui_open.py [--records 1000000] [--replicate FILE | --trace FILE] [--rounds 3]

Replicates a real capture (default: the shipped H200 recording of three CUDA
clients in a row) to --records, each copy shifted in time with its own pids
(bench/session.py's replicate), or takes --trace as it is, then in the same
run:

* baseline: `rmtrace info FILE` in a fresh process (reads every record header);
* `rmtrace tui FILE` in a fresh process, headless at 120x34: wall time from
  spawning it to the first events row on screen, to the last row on screen
  after End in the events table, to the timeline at the trace's end after End
  there, to the session model attached (it folds the trace in a worker; the
  first screen does not wait for it): lanes and wedges (from the channels'
  fold when the whole model must be folded: ``Services.load_channels``; the
  moment the screen takes the worker's message), the lanes drawn (the
  timeline's first line drawn with them: the redraw that message starts is
  done), the whole model, and then to the Objects tab's trees, which the
  worker builds after it.

The TUI runs twice a round: with the cache cold (emptied first: the session
model is folded and stored) and warm (the model loaded from the cache).  The
rounds alternate the order of info, cold and warm; medians are printed.

Both processes pay the interpreter's start.  Beside the wall time from first paint
to lanes and wedges, the TUI process's CPU time over the same span is printed (its
UI thread and its worker together): a loaded machine stretches the one, not the
other.  Goals: first paint < 1 s on
1,000,000 records, and far below `rmtrace info`, which reads the whole file;
lanes and wedges (the session model attached: lanes, wedges and object trees
computed) <= 3 s after first paint, <= 1 s with the cache warm (issue 13).  The
CPU's speed moves within seconds, so each round's gap is also printed with the
``rmtrace info`` of the same round (``report.paired_ratio``: median and range of
the per-round ratio gap / info): a goal is met only when every round's gap
clears it, else it is "inside the noise".

The worker's steps up to lanes and wedges are timed too, each in the worker thread's CPU: the
decoders, the call table's build (cold), the channels' fold (or the model's load from the cache), the
screen's fold (lanes, wedges, the call index); what is left of the process's CPU over the gap is the UI
thread's (and the worker's before first paint).

Before the rounds, the bytecode of rmtrace's modules is written (bench/show.py's
``compile_bytecode``: as an installed rmtrace has it; ``--no-compile``: not, so that
where PYTHONDONTWRITEBYTECODE is set each process compiles them, ~0.27 s of CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import paired_ratio, print_rows

CHILD_TIMEOUT_S = 600
GOALS = {"cold": 3.0, "warm": 1.0}
"""Issue 13: lanes and wedges this many seconds after first paint, the cache cold and warm."""
WHOLE_FIRST = "cold, whole model first"


def child(path: str, wait_model: bool, whole_first: bool = False) -> None:
    """Run the TUI headless on ``path``, printing one JSON line per milestone (monotonic seconds)."""
    import asyncio
    from dataclasses import replace

    from rmtrace.tui.app import RmtraceApp
    from rmtrace.tui.messages import ModelFailed, ModelLoaded, TreesReady
    from rmtrace.tui.services import library_services
    from rmtrace.tui.view import RunView
    from rmtrace.tui.widgets.events.table import EventsTable
    from rmtrace.tui.widgets.timeline.timeline import Timeline

    from rmtrace.columns import modelcache

    def say(event: str, **kw) -> None:
        print(json.dumps({"event": event, "t": time.monotonic(), "cpu": time.process_time(), **kw}), flush=True)

    def timed(phase: str, call):
        """``call``, saying the CPU time of the thread that ran it (the worker's steps, one by one)."""
        def run(*args, **kw):
            start = time.thread_time()
            try:
                return call(*args, **kw)
            finally:
                say("phase", phase=phase, thread_cpu=time.thread_time() - start)
        return run

    services = library_services()
    services = replace(services, load_channels=timed("load_channels", services.load_channels))
    RunView.build_decoders = timed("decoders", RunView.build_decoders)
    RunView.fold = timed("screen_fold", RunView.fold)
    # the library's table build, by the name modelcache._unkept calls it (cold: once)
    modelcache.build_into = timed("call_table", modelcache.build_into)
    if whole_first:  # as before the channels' fold came first: the worker folds the whole model at once
        services = replace(services, load_channels=lambda path, decoders: None)

    drawn: dict[int, float] = {}
    timeline_at_end: list[float] = []
    lanes_drawn: list[bool] = []
    events_line, timeline_line = EventsTable.render_line, Timeline.render_line

    def render_events(self, y):
        strip = events_line(self, y)
        if y >= 1:
            seq = self.scroll_offset.y + y - 1
            if seq < self.row_count and seq not in drawn:
                drawn[seq] = time.monotonic()
        return strip

    def render_timeline(self, y):
        if self.cursor == self.workspace.end_rel and self.cursor and not timeline_at_end:
            timeline_at_end.append(time.monotonic())
        if not lanes_drawn and self.workspace.run.loaded and len(self.rows) > 1:  # a heading, then lanes
            lanes_drawn.append(True)
            say("lanes_drawn")
        return timeline_line(self, y)
    EventsTable.render_line, Timeline.render_line = render_events, render_timeline

    async def until(done) -> None:
        # poll with plain sleeps: Pilot's pause waits for the process to go idle, which a fold never lets it
        while not done():
            await asyncio.sleep(0.002)

    async def main() -> None:
        app = RmtraceApp.open([path], services)
        model_done = asyncio.Event()

        loaded: list[bool] = []

        def hook(message) -> None:
            if isinstance(message, ModelLoaded):  # the first: lanes and wedges (the channels' fold, or whole)
                if not loaded:
                    say("model")
                loaded.append(message.whole)
                if message.whole:
                    say("whole_model")
            elif isinstance(message, (TreesReady, ModelFailed)):
                say("trees" if isinstance(message, TreesReady) else "model_failed")
                model_done.set()

        async with app.run_test(size=(120, 34), message_hook=hook) as pilot:
            await until(lambda: 0 in drawn)
            say("first_paint", seq=0)
            events = app.main.query_one(EventsTable)
            last = events.row_count - 1
            app.simulate_key("end")  # the events table has the focus
            await until(lambda: last in drawn)
            say("events_end", seq=last)
            app.simulate_key("t")
            await until(lambda: app.focused is app.main.query_one(Timeline))
            app.simulate_key("end")
            await until(lambda: bool(timeline_at_end))
            say("timeline_end")
            if wait_model:
                await asyncio.wait_for(model_done.wait(), CHILD_TIMEOUT_S)
            else:  # the fold is still running: stop it, then let the last keys finish before leaving
                app.workers.cancel_all()
                await pilot.pause()
    asyncio.run(main())


def run_child(path: str, wait_model: bool, cache: str, whole_first: bool = False) -> dict[str, float]:
    """Each milestone's wall seconds from the spawn (by its name), and its process CPU seconds (``NAME cpu``:
    the UI thread and the worker together, which a loaded machine does not stretch as it stretches wall)."""
    start = time.monotonic()
    cmd = ([sys.executable, __file__, "--child", path] + (["--wait-model"] if wait_model else [])
           + (["--whole-first"] if whole_first else []))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                         env={**os.environ, "RMTRACE_CACHE": cache})
    if out.returncode != 0:
        raise SystemExit(f"tui child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    times: dict[str, float] = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            if ev["event"] == "phase":  # a worker's step: its first run (a cold open folds twice: lanes, then whole)
                times.setdefault(f"phase {ev['phase']} cpu", ev["thread_cpu"])
                continue
            times[ev["event"]] = ev["t"] - start
            times[ev["event"] + " cpu"] = ev["cpu"]
    return times


def time_info(path: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``rmtrace info`` (the goals are absolute seconds: what the baseline took says
    how fast the machine was)."""
    import resource

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    start, cpu = time.monotonic(), children_cpu()
    subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "info", path], check=True, capture_output=True)
    return time.monotonic() - start, children_cpu() - cpu


def write_trace(path: str, source: str, n: int) -> None:
    from session import replicate  # the session bench's: copies shifted in time, pids of their own

    replicate(source, path, n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--replicate", metavar="FILE", help="the trace to replicate (default: the shipped capture)")
    parser.add_argument("--trace", help="time this trace as it is")
    parser.add_argument("--no-model", action="store_true", help="do not wait for the session model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--whole-first", action="store_true",
                        help="also time the cold open with the whole model folded at once (the worker as it was "
                             "before the channels' fold came first), in the same rounds")
    parser.add_argument("--wait-model", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-compile", action="store_true",
                        help="do not write rmtrace's bytecode first (with PYTHONDONTWRITEBYTECODE set, each process "
                             "compiles rmtrace's modules, as the results before 2026-12-02 05:30 UTC were timed "
                             "unless their block says otherwise)")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.wait_model, args.whole_first)
        return 0
    from show import compile_bytecode  # the show bench's, beside this one
    bytecode = ("as the environment has it (PYTHONDONTWRITEBYTECODE="
                f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})" if args.no_compile else compile_bytecode())

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = args.trace
        if path is None:
            from rmtrace import captures
            source = args.replicate or str(captures.path())
            path = os.path.join(tmp, "bench.trace")
            print(f"replicating {source} to {args.records:,} records ...", file=sys.stderr)
            write_trace(path, source, args.records)
        cache = os.path.join(tmp, "cache")
        infos: list[tuple[float, float]] = []
        runs: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
        if args.whole_first:
            runs[WHOLE_FIRST] = []
        order = ("info", "cold", *runs.keys() - {"cold", "warm"}, "warm")
        for r in range(args.rounds):
            for step in (order if r % 2 == 0 else order[::-1]):
                if step == "info":
                    infos.append(time_info(path))
                    continue
                if step != "warm":
                    shutil.rmtree(cache, ignore_errors=True)
                runs[step].append(run_child(path, wait_model=not args.no_model, cache=cache,
                                            whole_first=step == WHOLE_FIRST))
        size = os.path.getsize(path)
    load_after = os.getloadavg()

    def median(step: str, key: str) -> float | None:
        found = [t[key] for t in runs[step] if key in t]
        return statistics.median(found) if found else None

    info = statistics.median(wall for wall, _ in infos)
    info_cpu = statistics.median(cpu for _, cpu in infos)
    rows = [
        ("trace", args.trace or f"{os.path.basename(args.replicate or 'the shipped capture')} replicated to "
                                f"{args.records:,} records, {size / 1e6:.0f} MB"),
        ("rounds", f"{args.rounds}, alternating; medians; load average {load_before[0]:.1f} before, "
                   f"{load_after[0]:.1f} after"),
        ("bytecode", bytecode),
        ("rmtrace info (baseline)", f"{info:7.3f} s   (CPU {info_cpu:.3f} s)"),
    ]
    for step in runs:
        paint, events, timeline = (median(step, k) for k in ("first_paint", "events_end", "timeline_end"))
        assert paint is not None and events is not None and timeline is not None
        rows += [
            (f"cache {step}: first paint", f"{paint:7.3f} s   ratio to info {paint / info:.2f}"),
            (f"cache {step}: End in events", f"{events:7.3f} s   (+{events - paint:.3f} s)"),
            (f"cache {step}: End on timeline", f"{timeline:7.3f} s   (+{timeline - events:.3f} s)"),
        ]
        model = median(step, "model")
        if model is not None:
            cpu = statistics.median(t["model cpu"] - t["first_paint cpu"] for t in runs[step] if "model" in t)
            rows.append((f"cache {step}: lanes and wedges", f"{model:7.3f} s   {model - paint:+.3f} s after first "
                                                           f"paint (CPU {cpu:+.3f} s), ratio to info {model / info:.2f}"))
            phases = [t for t in runs[step] if "model" in t and "phase load_channels cpu" in t]
            if phases:  # the worker's steps to lanes and wedges (thread CPU): where the gap goes
                def steps(t: dict[str, float]) -> tuple[float, ...]:
                    table = t.get("phase call_table cpu", 0.0)
                    worker = (t.get("phase decoders cpu", 0.0), table, t["phase load_channels cpu"] - table,
                              t.get("phase screen_fold cpu", 0.0))
                    return (*worker, t["model cpu"] - t["first_paint cpu"] - sum(worker))
                parts = [statistics.median(col) for col in zip(*map(steps, phases))]
                rows.append((f"cache {step}: worker's CPU", "decoders {:.3f} + call table {:.3f} + channels' fold or "
                             "model's load {:.3f} + screen's fold {:.3f} s; the gap's CPU less these (UI thread) "
                             "{:+.3f} s".format(*parts)))
            if all("model" in t for t in runs[step]):
                gaps = [t["model"] - t["first_paint"] for t in runs[step]]
                mid, low, high = paired_ratio(gaps, [wall for wall, _ in infos])
                goal = GOALS.get(step)
                verdict = ("" if goal is None else f"; goal <= {goal:.0f} s: " + (
                    "met" if max(gaps) <= goal else "not met" if min(gaps) > goal else "inside the noise"))
                rows.append((f"cache {step}: per round", f"+{statistics.median(gaps):.3f} s [{min(gaps):.3f}-"
                                                         f"{max(gaps):.3f}] after first paint; x info of the round "
                                                         f"{mid:.2f} [{low:.2f}-{high:.2f}]{verdict}"))
                rows.append((f"cache {step}: rounds", ", ".join(f"+{g:.2f} s (info {w:.2f} s)"
                                                                for g, (w, _) in zip(gaps, infos))))
            if all("lanes_drawn" in t for t in runs[step]):  # the lanes on screen: the model's redraw done
                drawn = [t["lanes_drawn"] - t["first_paint"] for t in runs[step]]
                rows.append((f"cache {step}: lanes drawn", f"+{statistics.median(drawn):.3f} s [{min(drawn):.3f}-"
                                                           f"{max(drawn):.3f}] after first paint, per round"))
            whole = median(step, "whole_model")
            if whole is not None and whole != model:
                rows.append((f"cache {step}: whole model", f"{whole:7.3f} s   {whole - paint:+.3f} s after first paint"))
            trees = median(step, "trees")
            if trees is not None:
                rows.append((f"cache {step}: object trees", f"{trees:7.3f} s   {trees - paint:+.3f} s after first paint"))
        elif any("model_failed" in t for t in runs[step]):
            rows.append((f"cache {step}: session model", "failed to fold (the TUI said why on screen)"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
