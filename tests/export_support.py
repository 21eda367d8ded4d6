"""What the export tests share: a legacy-model replay of a real capture, tools that must be there in CI, and
the session fold call by call (the exporters' reference)."""

from __future__ import annotations

import heapq
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from rmtrace.decoders import DecoderSet

from rmtrace.calls import Call
from rmtrace.export.fold import TransitionStream
from rmtrace.record import Source, SysOp
from rmtrace.session import Transition
from rmtrace.session.entities import CallInfo, Channel
from rmtrace.session.fold import Folder
from rmtrace.session.timeline import Timeline


@pytest.fixture(scope="session")
def legacy_replay(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The real cuda-streams capture replayed three times in a row against the unfixed host model:
    c1 green, c2 and c3 wedged in UVM_REGISTER_GPU (GSP RPCs and sema messages included)."""
    from rmtrace.replayer import Schedule, build_plan, make_target, replay

    from rmtrace import captures

    out = str(tmp_path_factory.mktemp("legacy") / "legacy-replay.trace")
    plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
    replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=out)
    return out


def need_program(name: str, how: str) -> str:
    """The path of a program a test needs; a skip with ``how`` to get it on a developer's machine, a failure in CI."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing in CI: .ci/run installs it")
        pytest.skip(f"{name} is not installed ({how})")
    return path


def shipped(name: str) -> Path:
    from rmtrace import captures
    return Path(captures.path(name))


class StreamingFold:
    """The session fold over calls given one at a time (the decoders' pairing, each call decoded and
    interpreted): what the exporters ran before they read the call table, kept as the tests' call-by-call
    reference (Perfetto's states, parquet's rows).  Per call, its CallInfo; each transition handed out
    once final (``TransitionStream``), and an exited client forgotten once its transitions are out."""

    def __init__(self, decoders: DecoderSet, transitions: bool = True) -> None:
        """``transitions``: False for a caller that reads only each call's CallInfo (parquet's rows)."""
        self.transitions: TransitionStream | _Unkept = TransitionStream() if transitions else _Unkept()
        self.folder = Folder(decoders, self.transitions)
        self._exited: list[tuple[int, int]] = []  # (time, pid) of exits not yet forgotten
        self._released_before = 0
        self.retired: list[str] = []

    def fold(self, call: Call) -> CallInfo:
        folder = self.folder
        while self._exited and self._exited[0][0] < self._released_before:  # their transitions are out
            self._forget(heapq.heappop(self._exited)[1])
        folder.fold(call)
        info = folder.calls.pop()  # the fold appends exactly this call's CallInfo
        folder.seq_client.clear()  # what only a whole-trace model needs
        folder.gsp.clear()
        folder.stray_frees.clear()
        first = call.first
        if first.source == Source.SYS and first.op == SysOp.EXIT:
            heapq.heappush(self._exited, (call.last.time_ns, first.pid))
        self._released_before = first.time_ns
        return info

    def _forget(self, pid: int) -> None:
        retired = self.folder.forget_client(pid)
        if isinstance(self.transitions, _Unkept):
            return
        for entity in retired:
            self.transitions.engines.pop(entity, None)
        self.retired.extend(retired)

    # what ``rmtrace.export.perfetto.States`` asks
    def argv(self, pid: int) -> Sequence[str]:
        proc = self.folder.processes.get(pid)
        return proc.argv if proc is not None else ()

    def channel(self, entity: str) -> Channel | None:
        chan = self.folder.channels.get(entity.removeprefix("chan/"))
        return chan if isinstance(self.transitions, _Unkept) else self.transitions.channel(entity, chan)

    def client_pid(self, client_id: str) -> int | None:
        client = self.folder.clients.get(client_id)
        return client.pid if client is not None else None


class _Unkept(Timeline):
    """A timeline that keeps nothing: for a fold whose caller reads no transitions."""

    pending: dict[str, int] = {}

    def set(self, *change: Any) -> None:
        pass

    def final(self, before_ns: int | None = None) -> Iterator[Transition]:  # TransitionStream's signature
        return iter(())
