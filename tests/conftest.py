"""Shared fixtures: small traces built with the real writer."""

from __future__ import annotations

import os
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
