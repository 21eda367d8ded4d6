"""Build glue that pyproject.toml cannot express declaratively.

The repository's top-level folders map into one import namespace, ``rmtrace.*``
(``decoders/`` is ``rmtrace.decoders`` and so on), and the install builds the C
capture shim: a plain shared library (``librmtrace_shim.so``, no Python in it)
placed in ``rmtrace/kmod_shim/`` as package data.  Because no extension module is
built, the wheel is tagged ``py3-none-<platform>``: one wheel for every Python.
"""

import importlib.util
import os
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package, which pyproject's build requirements bring
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None  # no wheel can be built here anyway; a plain `setup.py build` still works

TOP = {
    "rmtrace": "rmtrace",
    "rmtrace.decoders": "decoders",
    "rmtrace.replayer": "replayer",
    "rmtrace.tui": "tui",
    "rmtrace.kmod_shim": "kmod_shim",
    "rmtrace.captures": "captures",
}
HERE = Path(__file__).resolve().parent


def _packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = [], {}
    for name, folder in TOP.items():
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            if not any(f.endswith(".py") for f in files):  # a namespace package (rmtrace/columns) ships too
                continue
            rel = os.path.relpath(root, folder)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            packages.append(pkg)
            package_dir[pkg] = root
    return packages, package_dir


def _shim_build():
    """kmod_shim/shim_build.py, loaded by path: rmtrace is not importable while it is being built."""
    spec = importlib.util.spec_from_file_location("shim_build", HERE / "kmod_shim" / "shim_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithShim(build_py):
    """build_py, then the shim compiled beside the package's files (in place for an editable install)."""

    def run(self):
        super().run()
        shim = _shim_build()
        folder = HERE / "kmod_shim" if getattr(self, "editable_mode", False) else Path(self.build_lib) / "rmtrace" / "kmod_shim"
        shim.build(folder / shim.LIBRARY)
        shim.build(folder / shim.SCAN_LIBRARY, sources=shim.SCAN_SOURCES)  # the record walk of rmtrace.columns.scan
        self._shim = [str(folder / shim.LIBRARY), str(folder / shim.SCAN_LIBRARY)]

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), *getattr(self, "_shim", [])]


class NativeDistribution(Distribution):
    """The package holds native code (the shim), so it installs into platlib, as extensions do."""

    def has_ext_modules(self):
        return True


commands = {"build_py": BuildPyWithShim}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """A wheel holding a native library but no Python extension: py3-none-<platform>."""

        def get_tag(self):
            _python, _abi, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel


packages, package_dir = _packages()

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "rmtrace.kmod_shim": ["*.h", "*.c"],
        "rmtrace.captures": ["*.trace", "*.md"],
        "rmtrace.decoders": ["profiles/data/*"],
        "rmtrace.export": ["wireshark/*.lua"],
    },
    include_package_data=False,
    distclass=NativeDistribution,
    cmdclass=commands,
)
