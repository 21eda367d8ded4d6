"""Build glue that pyproject.toml cannot express declaratively.

The repository's top-level folders map into one import namespace, ``rmtrace.*``
(``decoders/`` is ``rmtrace.decoders`` and so on), and the C capture shim is
built by the install itself.
"""

import os

from setuptools import Extension, setup

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

# The capture shim: a plain shared library preloaded into traced programs
# (LD_PRELOAD), built as an "extension" only so that the install compiles it.
# It is never imported (no PyInit); rmtrace.kmod_shim.interposer_path() finds it.
SHIM = "kmod_shim"
interposer = Extension(
    "rmtrace.kmod_shim._interposer",
    sources=[f"{SHIM}/{name}.c" for name in ("interposer", "shim_state", "shim_mem", "shim_record", "shim_ioctl")],
    depends=[f"{SHIM}/{name}.h" for name in ("shim", "rmtrace_ring", "rmtrace_record")],
    include_dirs=[SHIM],
    libraries=["dl", "pthread"],
    extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
)

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
    ext_modules=[interposer],
)
