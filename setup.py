"""Build glue that pyproject.toml cannot express declaratively.

The repository's top-level folders map into one import namespace, ``rmtrace.*``
(``decoders/`` is ``rmtrace.decoders`` and so on), and the C capture shim is
built by the install itself.
"""

import os

from setuptools import setup

TOP = {
    "rmtrace": "rmtrace",
    "rmtrace.decoders": "decoders",
    "rmtrace.replayer": "replayer",
    "rmtrace.tui": "tui",
    "rmtrace.kmod_shim": "kmod_shim",
    "rmtrace.captures": "captures",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = [], {}
    for name, folder in TOP.items():
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            if "__init__.py" not in files:
                continue
            rel = os.path.relpath(root, folder)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            packages.append(pkg)
            package_dir[pkg] = root
    return packages, package_dir


packages, package_dir = _packages()

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "rmtrace.kmod_shim": ["*.h", "*.c"],
        "rmtrace.captures": ["*.trace", "*.md"],
        "rmtrace.decoders": ["profiles/data/*"],
    },
    include_package_data=False,
)
