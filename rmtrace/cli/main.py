"""Entry point: builds the parser from the command modules and turns user errors into their exit status.

Each command is a module in this package with ``NAME``, ``HELP``, ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args) -> int``; a module with those is a
command, found by listing the package (adding one touches no shared list).

Start-up is the price of every command (bench/cli_startup.py), so a command
module imports at its top only what its parser needs, and run() imports the
rest.  ``rmtrace COMMAND ...`` imports that command's module alone, by its
name, without listing the package; ``rmtrace --help`` loads every module
for its one-line help, and adds no command's arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType

from rmtrace import __version__
from rmtrace.cli.common import discard_saved_outputs
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

COMMAND_ORDER = ("record", "info", "show", "stats", "wedges", "diff", "replay", "reduce", "tui", "model",
                 "profiles", "decoders")
"""How --help lists the commands; a command module not named here follows them."""

EPILOG = """\
The loop: record a failing run, find where and why it stalled, replay it against a
(fixed) host service in every schedule, look at it in the TUI.

  rmtrace record -o run1.trace -- ./my_cuda_program
  rmtrace info run1.trace
  rmtrace show run1.trace --failed

Run 'rmtrace COMMAND --help' for each command's options.
"""


def command_modules(only: str | None = None) -> list[ModuleType]:
    """Every module of this package that defines a command, in COMMAND_ORDER; with ``only``, just the
    module of that command (a command's module is named as the command), when there is one."""
    if only is not None and only.isidentifier() and not only.startswith("_"):
        # Imported by name, not found by listing the package: the listing (pkgutil, which imports inspect)
        # was a good part of what the command line added to `rmtrace record` (bench/record_start.py).
        try:
            module = importlib.import_module(f"rmtrace.cli.{only}")
        except ModuleNotFoundError as exc:
            if exc.name != f"rmtrace.cli.{only}":
                raise
        else:
            if getattr(module, "NAME", None) == only and hasattr(module, "run"):
                return [module]
    import pkgutil

    import rmtrace.cli as package
    names = [info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")]
    commands = [m for m in map(importlib.import_module, (f"rmtrace.cli.{n}" for n in names))
                if hasattr(m, "NAME") and hasattr(m, "run")]
    rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
    return sorted(commands, key=lambda m: (rank.get(m.NAME, len(rank)), m.NAME))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given a command line that starts with a command, only that command's parser
    (rmtrace COMMAND ... needs no other: loading them all was a good part of every start)."""
    named = argv[0] if argv and not argv[0].startswith("-") else None
    parser = argparse.ArgumentParser(
        prog="rmtrace",
        description="Record/replay debugger for NVIDIA RM/GSP traffic (RM and UVM ioctls, GSP RPCs, "
                    "host semaphore-service messages).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rmtrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in command_modules(named):
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.DESCRIPTION,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        if argv is None or module.NAME == named:
            module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run, _big_arrays=getattr(module, "BIG_ARRAYS", False),
                         _columns=getattr(module, "COLUMNS", False))
    return parser


BLAS_THREADS = "OPENBLAS_NUM_THREADS"


@contextlib.contextmanager
def blas_on_one_thread() -> Iterator[None]:
    """OpenBLAS told to start one thread if numpy loads while a command runs that uses numpy for columns only
    (rmtrace calls no BLAS routine; a command module says so with BIG_ARRAYS or COLUMNS): as it loads, the
    library starts a thread per core, which spin: ~0.1 s of CPU per process on 2 cores (`python -c "import
    numpy"` 0.23 -> 0.13 s CPU), ~1.9 s of `show`'s 5.7 on the H200 host's 16.  numpy is not imported here (a
    small trace's `show` needs none); the variable is there only while the command runs, and these commands
    start no process, so whatever runs after it finds the environment as it was.  One the user set, or numpy
    already loaded, is left alone."""
    if BLAS_THREADS in os.environ or "numpy" in sys.modules:
        yield
        return
    os.environ[BLAS_THREADS] = "1"
    try:
        yield
    finally:
        del os.environ[BLAS_THREADS]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv``; without it, ``sys.argv``'s, as the program, whose process exits once
    this returns: what it made is frozen out of the collector's generations first (``gc.freeze``), so the
    interpreter's last collection at exit walks none of it (0.08-0.17 s of CPU after a 1M-record stats or
    wedges, 0.00-0.02 frozen).  Objects in a garbage cycle then go unfinalized: nothing rmtrace writes
    relies on that (its files are closed by ``with``).  A caller that goes on (``main([...])``: the tests)
    keeps its collector as it was."""
    if argv is not None:
        return _command(list(argv))
    try:
        return _command(sys.argv[1:])
    finally:
        gc.freeze()


def _command(argv: list[str]) -> int:
    try:
        parser = build_parser(argv)  # a Ctrl-C can arrive while the command's modules load on a slow machine
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    if not getattr(args, "_run", None):
        parser.print_help()
        return ExitCode.ERROR
    if args._big_arrays:  # before the command's first big array: its temporaries' memory given back as they go
        from rmtrace.columns.heap import map_big_arrays
        map_big_arrays()
    try:
        with blas_on_one_thread() if args._big_arrays or args._columns else contextlib.nullcontext():
            return int(args._run(args) or 0)
    except RmtraceError as exc:
        print(f"rmtrace {args.command}: error: {exc}", file=sys.stderr)
        discard_saved_outputs()
        return exc.exit_code
    except BrokenPipeError:
        # The reader of our output went away (e.g. `rmtrace show ... | head`).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
