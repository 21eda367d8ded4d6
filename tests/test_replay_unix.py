"""The replay protocol: the model served on a Unix socket gives the same outcome as the model in-process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from rmtrace.replayer.model.policy import policy
from rmtrace.replayer.plan import build_plan
from rmtrace.replayer.runner import replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.server import ModelServer
from rmtrace.replayer.targets import make_target

from rmtrace.errors import RmtraceError
from tests.cuda_traffic import cuda_client, write_trace

TIMEOUT_NS = 400_000_000


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("unix") / "cuda.trace"
    return build_plan(write_trace(str(path), [cuda_client(1447)], command=["/opt/victory_mail"]))


@pytest.fixture
def served(tmp_path):
    """Start a model server of a given policy in a thread; stop it afterwards."""
    running = []

    def start(name: str) -> str:
        path = str(tmp_path / f"{name}.sock")
        stop = threading.Event()
        server = ModelServer(path, policy(name))
        thread = threading.Thread(target=server.serve, args=(stop,), daemon=True)
        thread.start()
        running.append((stop, thread))
        return path

    yield start
    for stop, thread in running:
        stop.set()
        thread.join(5)


def outcome(result):
    return ([(c.client.id, c.verdict, c.at.index if c.at else None, c.chain, c.diverged) for c in result.clients],
            result.counters)


@pytest.mark.parametrize("name, schedule, repeat", [("legacy", "sequential", 3), ("fixed", "sequential", 3),
                                                    ("fixed", "concurrent", 2)])
def test_unix_gives_the_same_outcome_as_the_in_process_model(plan, served, name, schedule, repeat):
    shaped = plan.repeat(repeat)
    local = replay(shaped, Schedule.parse(schedule), make_target(f"model:{name}", shaped), timeout_ns=TIMEOUT_NS)
    remote_target = make_target(f"unix:{served(name)}", shaped)
    remote = replay(shaped, Schedule.parse(schedule), remote_target, timeout_ns=TIMEOUT_NS)
    assert outcome(remote) == outcome(local)
    assert remote.target.startswith("unix:") and f"model:{name}" in remote.target
    assert remote_target.clock == "virtual"  # the drain bound fired at its virtual time, whatever the load


def test_on_the_real_clock_an_untimed_policy_gives_the_same_outcome(plan, served):
    """clock=real: the server's model on CLOCK_MONOTONIC; legacy has no timers, so the outcome is still exact."""
    shaped = plan.repeat(3)
    local = replay(shaped, Schedule.parse("sequential"), make_target("model:legacy", shaped), timeout_ns=TIMEOUT_NS)
    remote_target = make_target(f"unix:{served('legacy')},clock=real", shaped)
    remote = replay(shaped, Schedule.parse("sequential"), remote_target, timeout_ns=TIMEOUT_NS)
    assert remote_target.clock == "real"
    assert outcome(remote) == outcome(local)


def test_a_unix_replay_keeps_the_services_records(plan, served, tmp_path):
    out = str(tmp_path / "remote.trace")
    replay(plan.repeat(2), Schedule.parse("sequential"), make_target(f"unix:{served('fixed')}", plan),
           timeout_ns=TIMEOUT_NS, output=out)
    from rmtrace.record import Source
    from rmtrace.trace import TraceReader
    with TraceReader(out) as reader:
        sources = {r.source for r in reader}
    assert {Source.RM, Source.UVM, Source.SYS, Source.SEMA, Source.MARK} <= sources


def test_nobody_listening_is_a_clear_error(plan, tmp_path):
    with pytest.raises(RmtraceError, match="cannot reach a replay service"):
        replay(plan, Schedule.parse("sequential"), make_target(f"unix:{tmp_path}/none.sock", plan))
    with pytest.raises(RmtraceError, match="needs the socket's path"):
        make_target("unix:", plan)
    with pytest.raises(RmtraceError, match="unknown option 'clock=wall'"):
        make_target(f"unix:{tmp_path}/none.sock,clock=wall", plan)


def test_the_server_will_not_replace_a_file_that_is_not_a_socket(tmp_path):
    path = tmp_path / "precious"
    path.write_text("keep me")
    with pytest.raises(RmtraceError, match="not a socket"):
        ModelServer(str(path), policy("fixed"))
    assert path.read_text() == "keep me"


def test_a_peer_sending_garbage_is_dropped_and_the_server_serves_on(plan, served):
    path = served("fixed")
    junk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    junk.connect(path)
    junk.sendall(b"\xff" * 200)
    junk.close()
    result = replay(plan, Schedule.parse("sequential"), make_target(f"unix:{path}", plan), timeout_ns=TIMEOUT_NS)
    assert result.exit_status == 0


def test_rmtrace_model_serve_runs_until_interrupted(plan, tmp_path):
    sock = str(tmp_path / "cli.sock")
    server = subprocess.Popen([sys.executable, "-m", "rmtrace.cli.main", "model", "serve", "--socket", sock,
                               "--legacy"], stdout=subprocess.PIPE, text=True)
    try:
        assert "serving model:legacy" in server.stdout.readline()
        result = replay(plan.repeat(3), Schedule.parse("sequential"), make_target(f"unix:{sock}", plan),
                        timeout_ns=TIMEOUT_NS)
        assert [c.verdict.value for c in result.clients] == ["green", "wedged", "wedged"]
    finally:
        server.terminate()
        assert server.wait(10) == 0
    deadline = time.monotonic() + 5
    while os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(sock)
