"""How a replay's results read: the per-client table, the chaos seed list, JUnit XML for CI systems."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence

from rmtrace.replayer.runner import EXIT_STATUS, ReplayResult, Verdict

COUNTERS_SHOWN = ("pub_calls", "gr_rel", "faked", "drain_held", "hint_errors", "sessions")
EXIT_MEANING = {status: "all green" if v is Verdict.GREEN else v.value for v, status in EXIT_STATUS.items()}
WIDTH = 100
"""Chains wrap to this many columns, so they read in a terminal or a CI log, not only a wide window."""
INDENT = "    "


def table(result: ReplayResult) -> str:
    """One line per client (green / diverged at message N / wedged at message N), its chains under it.

    A wedged client shows the target's own explanation, then what the replay
    trace's records add to it.  Where the target explained the wedge, that is
    only the first line of the chain ``rmtrace wedges`` reads (when the call
    blocked, and for how long: the target's explanation has no clock); the
    rest says again what the target said or what other clients' entries say
    (who waits behind whom), so the table names the command that prints it.
    """
    clients = result.clients
    width = max([len(c.client.label) for c in clients] + [6])
    lines = [f"{'client':<{width}}  verdict"]
    shortened = False
    for c in clients:
        lines.append(f"{c.client.label:<{width}}  {c.summary()}")
        wedges = c.wedge_chain[:1] if c.chain else c.wedge_chain
        shortened |= len(wedges) < len(c.wedge_chain)
        for tag, chain in ((f"{result.target}: ", c.chain), ("wedges: ", wedges)):
            lines.extend(_wrapped(tag, chain))
    if result.counters:
        shown = " ".join(f"{k}={result.counters[k]}" for k in COUNTERS_SHOWN if k in result.counters)
        lines.append(f"host counters: {shown}")
    if shortened:
        lines.append(f"every chain read off the replay's records: rmtrace wedges {result.output}")
    return "\n".join(lines)


def _wrapped(tag: str, chain: Sequence[str]) -> list[str]:
    """A chain under its tag, each line wrapped to WIDTH columns and continued under its own text."""
    out = []
    for i, line in enumerate(chain):
        text = line.lstrip()
        lead = INDENT + (tag if i == 0 else " " * len(tag)) + line[:len(line) - len(text)]
        hang = " " * (len(lead) + (2 if text.startswith("- ") else 0))
        out.extend(textwrap.wrap(text, WIDTH, initial_indent=lead, subsequent_indent=hang,
                                 break_long_words=False, break_on_hyphens=False))
    return out


def headline(result: ReplayResult, source: str) -> str:
    return (f"replay {source}: {len(result.clients)} client{'s' * (len(result.clients) != 1)}, "
            f"{result.messages} messages, {result.schedule} against {result.target}")


def seeds_line(results: Sequence[ReplayResult]) -> str:
    """Which seeds of a --runs exploration failed, and how to rerun one."""
    failing = [r for r in results if r.failed]
    if not failing:
        return f"{len(results)} runs, all green"
    seeds = ", ".join(str(r.schedule.seed) for r in failing)
    mode = failing[0].schedule.mode.value
    return (f"{len(failing)} of {len(results)} runs failed: seeds {seeds} "
            f"(rerun one with --schedule {mode}:{failing[0].schedule.seed})")


def junit(results: Iterable[ReplayResult], path: str, source: str) -> None:
    """A JUnit XML report: one test suite per run, one test case per client."""
    suites = ET.Element("testsuites", name=f"rmtrace replay {source}")
    for result in results:
        suite = ET.SubElement(suites, "testsuite", name=f"{result.target} {result.schedule}",
                              tests=str(len(result.clients)),
                              failures=str(sum(c.verdict is Verdict.DIVERGED for c in result.clients)),
                              errors=str(sum(c.verdict is Verdict.WEDGED for c in result.clients)),
                              time=f"{result.wall_s:.3f}")
        for c in result.clients:
            case = ET.SubElement(suite, "testcase", classname=f"{result.target}.{result.schedule}",
                                 name=c.client.label, time="0")
            if c.verdict is Verdict.DIVERGED:
                ET.SubElement(case, "failure", type="diverged", message=c.summary()).text = c.summary()
            elif c.verdict is Verdict.WEDGED:
                ET.SubElement(case, "error", type="wedged", message=c.summary()).text = "\n".join(c.chain)
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
