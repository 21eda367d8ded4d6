"""A package's submodule read as an attribute, for packages that load their modules on first use (PEP 562).

A package whose ``__init__`` imported its modules eagerly had each as an attribute (``rmtrace.session.model``
after ``import rmtrace.session``); one that loads them lazily keeps that by importing the module when the
attribute is first read.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def submodule(package: str, name: str) -> ModuleType:
    """``package.name``, imported; AttributeError when there is no such module (as a missing attribute gives),
    while a module that exists but fails to import raises its own error."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{package}.{name}":
            raise
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
