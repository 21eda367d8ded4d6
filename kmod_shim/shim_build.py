"""How the capture shim is compiled: one definition for the install (setup.py) and the tests.

The shim is a plain shared library, ``librmtrace_shim.so``, preloaded into traced
programs (LD_PRELOAD); it links against libc only, never against Python, so one
build serves every Python version.  The production build is what ``pip install``
ships.  The test build (``test_hooks=True``, RMTRACE_TEST_HOOKS defined) adds what
only the tests may have: RMTRACE_TEST_DEVICE_DIR, which makes the shim take files
of a test folder for the NVIDIA device nodes.

This module imports nothing from rmtrace: setup.py loads it by path before rmtrace
is installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY = "librmtrace_shim.so"
TEST_LIBRARY = "librmtrace_shim-test.so"
SOURCES = ("interposer.c", "shim_state.c", "shim_mem.c", "shim_record.c", "shim_ioctl.c")
HEADERS = ("shim.h", "rmtrace_ring.h", "rmtrace_record.h")
CFLAGS = ("-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter",
          "-Werror=implicit-function-declaration")
LIBS = ("-ldl", "-lpthread")
TEST_DEFINE = "-DRMTRACE_TEST_HOOKS=1"
SCAN_LIBRARY = "librmtrace_scan.so"
"""The record walk of ``rmtrace.columns.scan`` (scan_walk.c): plain C too, loaded with ctypes, not preloaded."""
SCAN_SOURCES = ("scan_walk.c",)


def compile_command(out: Path, *, test_hooks: bool = False, source_dir: Path = HERE,
                    sources: tuple[str, ...] = SOURCES) -> list[str]:
    """The compiler command line that builds ``sources`` (the shim's by default) into ``out`` ($CC, default
    cc; $CFLAGS appended)."""
    cc = shlex.split(os.environ.get("CC") or "cc")
    extra = shlex.split(os.environ.get("CFLAGS", ""))
    libs = LIBS if sources == SOURCES else ()
    return [*cc, *CFLAGS, *((TEST_DEFINE,) if test_hooks else ()), *extra, "-shared", f"-I{source_dir}",
            "-o", str(out), *(str(source_dir / s) for s in sources), *libs]


def build(out: Path, *, test_hooks: bool = False, source_dir: Path = HERE, sources: tuple[str, ...] = SOURCES) -> Path:
    """Compile the shim (or ``sources``: SCAN_SOURCES) into ``out``; RuntimeError with the compiler's messages
    when it fails."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = compile_command(out, test_hooks=test_hooks, source_dir=source_dir, sources=sources)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(f"no C compiler ({cmd[0]}): the capture shim needs one to build") from None
    if proc.returncode:
        raise RuntimeError(f"building the capture shim failed:\n{shlex.join(cmd)}\n{proc.stderr}")
    return out
