"""Tools a test needs from the machine, and how a test says so.

A test that CI must run never skips there (CI sets ``CI``): without the tool it fails,
so a CI image that lost gcc is a red build, not a quietly thinner one.  On a developer's
machine it skips with the one line that says how to get the tool.
"""

from __future__ import annotations

import os
import shutil

import pytest


def requires(tool: str, why: str, install: str) -> pytest.MarkDecorator:
    """Skip (outside CI only) when ``tool`` is not on PATH; in CI the test runs and fails."""
    missing = shutil.which(tool) is None and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason=f"{why}: {tool} is not installed ({install}); CI never skips this")


needs_gcc = requires("gcc", "needs a C compiler", "apt-get install gcc")
