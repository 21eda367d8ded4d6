"""What a replay's answers are checked against: the recording, another trace, or a live target.

Every answer a replay gets is judged against an expected answer to the same
message (the runner's ``oracle`` hook):

* ``RecordingOracle``: what the recording says came back -- the default for a
  target that answers output fields (the real driver);
* ``TraceOracle`` (``--oracle TRACE``): the answers another trace holds for the
  same messages, e.g. a committed replay against the real driver;
* ``TargetOracle`` (``--oracle nvidia``): a second target answers each message
  as well (the real driver, in lockstep with the target under test), which
  judges a host service or the model against bare metal.

The judgement is one: return value, errno and NV status exactly; then, where
both answers carry their records and the target answers fields, every output
field (the AFTER buffers, leaf by leaf, ``targets/nvidia/fields.py``) except the
ones the replay tables mask for that command (addresses, timestamps, counters,
board identity: each mask with its reason), differences named by field path
with both values, as ``rmtrace diff`` shows them.

A status that depends on other clients running at the same time (the tables'
``across``: RELEASE_COMPUTE_MODE_RESERVATION answers NV_ERR_STATE_IN_USE to
whichever of two clients at once releases first) is judged once the replay is
over (``Oracle.settle``): among clients that overlapped in the replay, across
them -- the multiset of their statuses for the same call (the k-th such call of
each) must equal the multiset the oracle gives for it; a client that ran alone
is judged exactly, as every other call is.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmtrace.decoders.parse import STATUS_FIELDS
from rmtrace.decoders.profiles.safety import ReplayTables, replay_tables
from rmtrace.replayer.messages import Difference, Expect, Message, Outcome
from rmtrace.replayer.targets.base import RunInfo, Target
from rmtrace.replayer.targets.nvidia.fields import Leaf, Walker, call_keys, show_value

from rmtrace.errors import RmtraceError
from rmtrace.record import Record, Source, When, decode_record

if TYPE_CHECKING:  # the plan module imports the runner's neighbours, this one among them
    from rmtrace.replayer.plan import Plan
    from rmtrace.replayer.semantics import Semantics

FIELD_DIFFERENCES_SHOWN = 6
"""Differing fields named per answer; the rest are counted."""
ORACLE_TIMEOUT_NS = 10_000_000_000


@dataclass(frozen=True, slots=True)
class Deferred:
    """A status judged across clients, waiting for the end of the replay (see the module docstring)."""

    client: str
    msg: Message
    key: str
    """Its call key in the tables' ``across``."""
    got: int
    want: int


Late = tuple[str, Message, list[Difference]]
"""(client id, message, differences) of an answer judged once the replay was over."""


class Judge:
    """One answer against an expected one (see the module docstring)."""

    def __init__(self, semantics: Semantics, tables: ReplayTables | None) -> None:
        self.semantics = semantics
        self.walker = Walker(semantics.profile)
        self.tables = tables
        self.deferred: list[Deferred] = []
        self.across: list[str] = []
        """What settle judged across clients, a line each (the replay prints them)."""
        self.judged_across: Counter[str] = Counter()
        """Per client id: how many of its answers were judged across clients."""

    def differences(self, msg: Message, expect: Expect, expected: bytes | None, outcome: Outcome,
                    fields: bool = True, ret: bool = True, client: Any = None) -> list[Difference]:
        """Where ``outcome`` differs from ``expect``; with ``client``, a status the tables judge across
        clients is deferred to ``settle`` instead."""
        name = self.semantics.status_name
        if not expect.response:
            if expect.response is False and outcome.ret is not None and outcome.ret < 0 and outcome.err:
                return [Difference("result", "done", f"failed (errno {outcome.err})")]
            return []
        diffs: list[Difference] = []
        across = self._across_key(msg) if client is not None else None
        if across is not None and outcome.status is not None and expect.status is not None:
            self.deferred.append(Deferred(client.id, msg, across, outcome.status, expect.status))
        elif outcome.status is not None and expect.status is not None and outcome.status != expect.status:
            diffs.append(Difference("status", name(expect.status), name(outcome.status)))
        if ret and outcome.ret is not None and outcome.ret != expect.ret:
            diffs.append(Difference("return value", expect.ret, outcome.ret))
        if outcome.err is not None and outcome.err != expect.err:
            diffs.append(Difference("errno", expect.err, outcome.err))
        if fields and outcome.fields is not None and outcome.record is not None and expected is not None:
            diffs.extend(self.field_differences(msg.request, expected, outcome.record))
        return diffs

    def field_differences(self, request: bytes, expected: bytes, got: bytes) -> list[Difference]:
        """Every unmasked output field that differs, by path, with both values."""
        want_rec, got_rec = decode_record(expected), decode_record(got)
        if got_rec.source not in (Source.RM, Source.UVM):
            return []
        req = decode_record(request)
        masked = self._masks(req)
        have = {(b.role, b.slot): b.data for b in got_rec.buffers if b.when == When.AFTER}
        out: list[Difference] = []
        more = 0
        for buf in want_rec.buffers:
            if buf.when != When.AFTER or (buf.role, buf.slot) not in have:
                continue
            data = have[(buf.role, buf.slot)]
            if data == buf.data:
                continue
            leaves = self.walker.buffer_leaves(req, buf.role, buf.slot, max(len(buf.data), len(data)))
            for leaf in leaves:
                a, b = buf.data[leaf.offset:leaf.offset + leaf.size], data[leaf.offset:leaf.offset + leaf.size]
                if a == b or _masked(leaf, masked) or leaf.path.rsplit(".", 1)[-1] in STATUS_FIELDS:
                    continue
                if len(out) < FIELD_DIFFERENCES_SHOWN:
                    out.append(Difference(leaf.path, show_value(buf.data, leaf), show_value(data, leaf)))
                else:
                    more += 1
        if more:
            out.append(Difference(f"{more} more fields", "as recorded", "differ"))
        return out

    def _across_key(self, msg: Message) -> str | None:
        if self.tables is None or not self.tables.across:
            return None
        return next((k for k in call_keys(self.walker, decode_record(msg.request)) if k in self.tables.across), None)

    def settle(self, overlapping: Iterable[frozenset[str]], against: str) -> list[Late]:
        """Judge the deferred statuses, now that the replay is over: across each set of clients that
        overlapped, the k-th answer to a call of each compared as a multiset with the oracle's; a client
        in no such set (it ran alone) exactly.  Returns the answers that differ."""
        name = self.semantics.status_name
        together = {c: group for group in overlapping if len(group) > 1 for c in group}
        rank: dict[tuple[str, str], int] = {}
        groups: dict[tuple[Any, str, int], list[Deferred]] = {}
        for d in sorted(self.deferred, key=lambda d: (d.client, d.msg.index)):
            k = rank[(d.client, d.key)] = rank.get((d.client, d.key), 0) + 1
            groups.setdefault((together.get(d.client) or d.client, d.key, k), []).append(d)
        self.deferred = []
        late: list[Late] = []
        for group in groups.values():
            if len(group) == 1:
                d = group[0]
                if d.got != d.want:
                    late.append((d.client, d.msg, [Difference("status", name(d.want), name(d.got))]))
                continue
            ids = ", ".join(d.client for d in group)
            got, want = Counter(d.got for d in group), Counter(d.want for d in group)
            shown_got = ", ".join(f"{name(d.got)} ({d.client})" for d in group)
            shown_want = ", ".join(name(s) for s in sorted(want.elements()))
            self.judged_across.update(d.client for d in group)
            verdict = "the same" if got == want else "differ"
            self.across.append(f"{group[0].msg.name} of {ids}: {shown_got}; {against}: {shown_want}: {verdict}")
            for status, extra in (got - want).items():
                # the clients that got a status too many: first those whose own expected answer differs
                holders = sorted((d for d in group if d.got == status), key=lambda d: d.got == d.want)
                for d in holders[:extra]:
                    late.append((d.client, d.msg, [Difference(f"status (judged across {ids})", shown_want,
                                                              shown_got)]))
        return late

    def across_report(self) -> list[str]:
        if not self.across:
            return []
        return ["judged across clients (a status that depends on other clients running at once: the replay "
                "tables' across):", *(f"    {line}" for line in self.across)]

    def _masks(self, request: Record) -> tuple[str, ...]:
        if self.tables is None:
            return ()
        paths: list[str] = []
        for key in call_keys(self.walker, request):
            mask = self.tables.masks.get(key)
            if mask is not None:
                paths.extend(mask.paths)
        return tuple(paths)


def _masked(leaf: Leaf, masks: tuple[str, ...]) -> bool:
    return any(leaf.pattern == m or leaf.pattern.startswith((m + ".", m + "[")) for m in masks)


def _tables(semantics: Semantics) -> ReplayTables | None:
    try:
        return replay_tables(semantics.profile)
    except RmtraceError:
        return None  # no masks for this branch: every field compared


class Oracle(ABC):
    """Judges each answer of a replay (see the module docstring)."""

    name = "?"
    judge: Judge

    def open(self, info: RunInfo) -> None:  # noqa: B027 (a default that does nothing, on purpose)
        """Start (a live oracle starts its target)."""

    @abstractmethod
    def differences(self, client: Any, msg: Message, outcome: Outcome) -> list[Difference]: ...

    def settle(self, overlapping: Sequence[frozenset[str]]) -> list[Late]:
        """The replay is over: judge what waited for it (statuses judged across the clients that overlapped,
        ``overlapping`` being the sets of client ids whose runs overlapped)."""
        return self.judge.settle(overlapping, self.name)

    def judged_across(self, client: str) -> int:
        """How many of a client's answers were judged across clients."""
        return self.judge.judged_across[client]

    def report(self) -> list[str]:
        """Lines a replay prints after its table (what the oracle could not judge, what it found)."""
        return self.judge.across_report()

    def close(self) -> None:  # noqa: B027 (a default that does nothing, on purpose)
        """Stop; a live oracle frees what its target holds."""


class RecordingOracle(Oracle):
    """The recording's own answers, field by field."""

    name = "the recording"

    def __init__(self, plan: Plan) -> None:
        self.judge = Judge(plan.semantics, _tables(plan.semantics))

    def differences(self, client: Any, msg: Message, outcome: Outcome) -> list[Difference]:
        return self.judge.differences(msg, msg.expect, msg.reply, outcome, client=client)


class TraceOracle(Oracle):
    """The answers another trace holds for the same messages.

    A replay of the same recording (its metadata names it) holds them under
    the same call ids, and is judged in full; any other trace of the same
    program -- another recording, run alone or beside others -- is matched
    client by client and message by message, a message counting only where
    both streams have the same call at that position, and judged by status,
    return value and errno alone (its handles, fds and addresses are that
    recording's own, so a system call's return value is not compared)."""

    def __init__(self, path: str, plan: Plan) -> None:
        from rmtrace.replayer.plan import build_plan  # the plan module imports the runner's neighbours

        if not os.path.exists(path):
            raise RmtraceError(f"--oracle {path}: no such trace (or give 'nvidia')")
        self.name = path
        other = build_plan(path, decoders=plan.semantics.decoders)
        source = (other.meta.get("replay") or {}).get("source")
        self.by_call = source is not None and os.path.basename(source) == os.path.basename(plan.source)
        self.answers: dict[str, dict[Any, Message]] = {}
        for c in other.clients:
            self.answers[c.id] = {((decode_record(m.request).source, m.call_id) if self.by_call else m.index): m
                                  for m in c.messages}
        self.judge = Judge(plan.semantics, _tables(plan.semantics))
        self.unjudged = 0

    def differences(self, client: Any, msg: Message, outcome: Outcome) -> list[Difference]:
        key = (decode_record(msg.request).source, msg.call_id) if self.by_call else msg.index
        theirs = self.answers.get(client.id, {}).get(key)
        if theirs is None or not _same_call(theirs, msg) or (self.by_call and msg.call_id == 0):
            self.unjudged += 1
            return []
        # another recording's mmap addresses and fds are its own: its system calls are judged by errno alone
        ioctl = decode_record(msg.request).source in (Source.RM, Source.UVM)
        return self.judge.differences(msg, theirs.expect, theirs.reply, outcome, fields=self.by_call,
                                      ret=self.by_call or ioctl, client=client)

    def report(self) -> list[str]:
        unjudged = [f"oracle {self.name}: {self.unjudged} messages it holds no answer for (not judged)"] \
            if self.unjudged else []
        return unjudged + super().report()


def _same_call(a: Message, b: Message) -> bool:
    """The two recordings' messages are the same call: by its numbers (source, op) and its typed meaning, never its name."""
    ra, rb = decode_record(a.request), decode_record(b.request)
    return (ra.source, ra.op, a.kind, a.category) == (rb.source, rb.op, b.kind, b.category)


class TargetOracle(Oracle):
    """A live target answers every message too; its answer is what the one under test is checked against."""

    def __init__(self, target: Target, plan: Plan, timeout_ns: int = ORACLE_TIMEOUT_NS) -> None:
        self.target = target
        self.name = target.name
        self.timeout_ns = timeout_ns
        self.judge = Judge(plan.semantics, _tables(plan.semantics))
        self.skipped = 0
        self.unanswered = 0
        self.mismatches: list[tuple[str, int, str, str, str]] = []
        """(client, message number, name, the target's status, the oracle's status)."""

    def open(self, info: RunInfo) -> None:
        self.target.open(info, None)

    def differences(self, client: Any, msg: Message, outcome: Outcome) -> list[Difference]:
        theirs = self._ask(client, msg)
        if theirs is None:
            return []
        expect = Expect(msg.expect.response, theirs.status, None, theirs.ret if theirs.ret is not None else 0,
                        theirs.err if theirs.err is not None else 0)
        got = Outcome(outcome.status, outcome.ret if theirs.ret is not None else None,
                      outcome.err if theirs.err is not None else None, outcome.fields, outcome.record)
        diffs = self.judge.differences(msg, expect, theirs.record, got, fields=theirs.fields is not None, client=client)
        self._mismatched(client.id, msg, diffs)
        return diffs

    def _mismatched(self, client: str, msg: Message, diffs: list[Difference]) -> None:
        for d in diffs:
            if d.what.startswith("status"):
                self.mismatches.append((client, msg.index + 1, msg.name, str(d.got), str(d.expected)))

    def settle(self, overlapping: Sequence[frozenset[str]]) -> list[Late]:
        late = super().settle(overlapping)
        for client, msg, diffs in late:
            self._mismatched(client, msg, diffs)
        return late

    def _ask(self, client: Any, msg: Message) -> Outcome | None:
        ticket: Hashable = ("oracle", client.id, msg.index)
        if self.target.skip(ticket, client, msg) is not None:
            self.skipped += 1
            return None
        outcome = self.target.submit(ticket, client, msg)
        deadline = self.target.now() + self.timeout_ns
        while outcome is None and self.target.now() < deadline:
            for t, answer in self.target.wait(deadline):
                if t == ticket:
                    outcome = answer
        if outcome is None:
            self.unanswered += 1
        return outcome

    def report(self) -> list[str]:
        lines = [f"oracle {self.name}: {len(self.mismatches)} status mismatches, {self.skipped} messages it did not "
                 f"send (its safety table), {self.unanswered} it did not answer in time"]
        for cid, n, name, got, want in sorted(self.mismatches, key=lambda m: (m[0], m[1])):
            lines.append(f"    {cid} message {n} {name}: the target says {got}, {self.name} says {want}")
        return lines + super().report()

    def close(self) -> None:
        self.target.close()


def make_oracle(spec: str, plan: Plan, *, timeout_ns: int = ORACLE_TIMEOUT_NS) -> Oracle:
    """``--oracle``: ``nvidia`` (the real driver, live) or a trace's path."""
    kind, _, arg = spec.partition(":")
    if kind == "nvidia":
        from rmtrace.replayer.targets.nvidia import NvidiaTarget  # only a live oracle needs the driver target

        return TargetOracle(NvidiaTarget(plan, allow_unsafe=arg == "allow-unsafe"), plan, timeout_ns)
    return TraceOracle(spec, plan)


def default_oracle(target: Target, plan: Plan) -> Oracle | None:
    """A target that answers output fields is judged field by field against the recording."""
    return RecordingOracle(plan) if "fields" in target.answers else None


__all__ = ["Oracle", "RecordingOracle", "TraceOracle", "TargetOracle", "Judge", "make_oracle", "default_oracle"]
