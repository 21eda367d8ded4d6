"""Shared fixtures: small traces built with the real writer."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(autouse=True, scope="session")
def _isolated_table_cache(tmp_path_factory):
    """No test reads or fills the developer's cache of call tables: RMTRACE_CACHE points at a fresh directory."""
    os.environ["RMTRACE_CACHE"] = str(tmp_path_factory.mktemp("table-cache"))
    yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_user_decoders(tmp_path_factory):
    """No test sees the developer's own decoders: RMTRACE_DECODER_DIR points at an empty directory."""
    os.environ["RMTRACE_DECODER_DIR"] = str(tmp_path_factory.mktemp("user-decoders"))
    yield


@pytest.fixture(scope="module")
def sequential_boots(tmp_path_factory) -> list[Path]:
    """Two constructed 3-client boots (GSP, sema): one wedged by the legacy host, one green."""
    from tests import scenarios
    d = tmp_path_factory.mktemp("boots")
    return [scenarios.sequential(d / "wedged.trace", wedge=True), scenarios.sequential(d / "green.trace", wedge=False)]


@pytest.fixture(scope="session")
def replicated(tmp_path_factory) -> Callable[[int], Path]:
    """``replicated(n)``: the shipped capture of three CUDA clients in a row replicated to ``n`` records, as the
    bench traces are (bench/session.py's ``replicate``), made once per ``n`` a session."""
    bench = REPO / "bench"
    sys.path.insert(0, str(bench))  # bench/session.py imports its neighbour ``report``
    try:
        spec = importlib.util.spec_from_file_location("bench_session", bench / "session.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    made: dict[int, Path] = {}

    def make(records: int) -> Path:
        if records not in made:
            out = tmp_path_factory.mktemp("replicated") / f"replicated-{records}.trace"
            module.replicate(str(REPO / "captures" / "cuda-streams-3x-sequential.trace"), str(out), records)
            made[records] = out
        return made[records]
    return make
