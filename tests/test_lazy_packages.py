"""The packages that load their modules on first use (rmtrace.semantics, rmtrace.session) still give every name
of their __all__ and each submodule as an attribute, as their eager imports did; a missing name is an
AttributeError.  In a fresh interpreter: another test's imports would hide a name that only resolves by accident."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import importlib, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for name in package.__all__:
    assert getattr(package, name) is not None, name
    assert name in dir(package), name
for info in pkgutil.iter_modules(package.__path__):
    assert getattr(package, info.name) is sys.modules[f"{package.__name__}.{info.name}"], info.name
try:
    package.no_such_name
except AttributeError:
    pass
else:
    raise AssertionError("a missing name resolved")
print("ok", len(package.__all__))
"""


@pytest.mark.parametrize("package", ["rmtrace.semantics", "rmtrace.session"])
def test_every_name_and_submodule_resolves(package):
    done = subprocess.run([sys.executable, "-c", CHECK, package], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
