"""Arguments and helpers that several commands share."""

from __future__ import annotations

import argparse
import enum
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rmtrace.errors import RmtraceError

if TYPE_CHECKING:  # at run time imported where used: --help and the parser need none of them
    from rmtrace.trace import RecordFilter, TraceReader


def add_trace_argument(parser: argparse.ArgumentParser) -> None:
    """FILE, optional: without one, the shipped H200 capture (three CUDA clients in a row)."""
    parser.add_argument("trace", metavar="FILE", nargs="?", type=_trace_path,
                        help="a trace written by 'rmtrace record' (or a replay), - for stdin, or the name of a shipped capture "
                             "(default: the shipped capture of three CUDA clients one after another on an H200)")
    parser.set_defaults(trace=None)


STDIN = "-"
"""FILE given as '-': the trace comes on standard input."""


def _trace_path(text: str) -> str:
    """A path as given; a bare name that is no file but a shipped capture's name means that capture."""
    from pathlib import Path

    from rmtrace.captures import path, shipped
    if text == STDIN or Path(text).exists() or "/" in text or text.removesuffix(".trace") not in shipped():
        return text
    return str(path(text))


def stdin_trace() -> str:
    """A path for the trace on stdin: stdin itself when it is a file, else the pipe's bytes in a temporary
    file (a reader seeks; a pipe cannot), removed when rmtrace exits."""
    import atexit
    import shutil
    import stat
    import tempfile

    fd = sys.stdin.fileno()
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):  # `< FILE`: that file, by its name where it still has one (outputs are named after it)
        named = os.path.realpath(f"/proc/self/fd/{fd}")
        return named if os.path.isfile(named) and os.path.samestat(os.stat(named), os.fstat(fd)) else f"/dev/fd/{fd}"
    if os.isatty(fd):
        raise RmtraceError("FILE '-' reads the trace from stdin, which is a terminal: pipe or redirect a trace to it")
    folder = tempfile.mkdtemp(prefix="rmtrace-")
    atexit.register(shutil.rmtree, folder, True)
    spool = os.path.join(folder, "stdin.trace")  # outputs made from it are named stdin-N...
    with open(spool, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
    return spool


def trace_input(path: str) -> str:
    """A trace argument as a path a reader opens: '-' is stdin (stdin_trace)."""
    return stdin_trace() if path == STDIN else path


def trace_stem(path: str) -> str:
    """A trace's name without its folder and .trace: what outputs made from it are named after."""
    return os.path.basename(path).removesuffix(".trace")


def trace_or_default(args: argparse.Namespace) -> str:
    """The FILE argument ('-' for stdin), or the shipped default capture, saying which: on the first line
    of the output when that is a terminal (a person reading it must not take it for their own trace),
    else on stderr (a pipe or --json gets only the output it asked for)."""
    if args.trace is not None:
        return trace_input(args.trace)
    from rmtrace.captures import path
    chosen = path()
    note = f"no FILE given: this is the shipped capture {chosen.name} (list them with 'rmtrace info --shipped')"
    if sys.stdout.isatty() and not getattr(args, "json", False):
        print(f"# {note}", flush=True)
    else:
        print(f"rmtrace: {note}", file=sys.stderr)
    return str(chosen)


def _names_to_values(text: str, enum_type: type[enum.IntEnum], what: str) -> frozenset[int]:
    values = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.add(int(enum_type(int(part)) if part.isdigit() else enum_type[part.upper()]))
        except (KeyError, ValueError):
            names = ", ".join(f"{m.name.lower()} ({int(m)})" for m in enum_type)
            raise RmtraceError(f"unknown {what} {part!r} (one of: {names})") from None
    return frozenset(values)


def _int_list(text: str) -> frozenset[int]:
    try:
        return frozenset(int(p, 0) for p in text.split(",") if p.strip())
    except ValueError:
        raise RmtraceError(f"not a list of numbers: {text!r}") from None


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters")
    group.add_argument("--pid", metavar="PIDS", help="only these process ids (comma separated)")
    group.add_argument("--source", metavar="SOURCES", help="only these sources: rm, uvm, gsp, sema, sys, mark")
    group.add_argument("--phase", metavar="PHASES", help="only calls with a record of these phases: enter, exit, "
                                                        "send, recv, event (each call shown whole)")
    group.add_argument("--op", metavar="OPS", help="only these operation numbers (0x2a,37,...)")
    group.add_argument("--from", dest="t_from", metavar="TIME", type=duration,
                       help="from this time after the trace start (e.g. 1.5s)")
    group.add_argument("--to", dest="t_to", metavar="TIME", type=duration,
                       help="up to this time after the trace start (calls that start by then)")
    group.add_argument("--limit", type=count, metavar="N", help="stop after N lines")


# -- option values: argparse types, so that a meaningless value is a usage error (exit 2) ----------


def count(text: str) -> int:
    """A number of things: 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


def positive_count(text: str) -> int:
    """A number of things: 1 or more."""
    n = count(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be 1 or more, not 0")
    return n


def duration(text: str) -> int:
    """A duration (250ms, 1.5s, a bare number is seconds) as nanoseconds, 0 or more."""
    from rmtrace.timefmt import parse_duration
    try:
        ns = parse_duration(text)
    except RmtraceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ns < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {text!r}")
    return ns


def positive_duration(text: str) -> int:
    """A duration longer than zero, as nanoseconds."""
    ns = duration(text)
    if ns == 0:
        raise argparse.ArgumentTypeError(f"must be longer than zero, not {text!r}")
    return ns


def close_matches(word: str, names: Iterable[str]) -> str:
    """' (did you mean A, B?)' naming the known names nearest a mistyped one; '' when none is near."""
    import difflib
    near = difflib.get_close_matches(word, list(names), n=4, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


def trace_start(reader: TraceReader) -> int:
    span = reader.time_span
    return span[0] if span else 0


def filter_from_args(args: argparse.Namespace, reader: TraceReader) -> RecordFilter:
    from rmtrace.record import Phase, Source
    from rmtrace.trace import RecordFilter

    if args.t_from is not None and args.t_to is not None and args.t_from > args.t_to:
        raise RmtraceError("--from is after --to: nothing lies between them")
    start = trace_start(reader)
    return RecordFilter(
        source=_names_to_values(args.source, Source, "source") if args.source else None,
        phase=_names_to_values(args.phase, Phase, "phase") if args.phase else None,
        pid=_int_list(args.pid) if args.pid else None,
        op=_int_list(args.op) if args.op else None,
        t0=start + args.t_from if args.t_from is not None else None,
        t1=start + args.t_to if args.t_to is not None else None,
    )


def add_json_argument(parser: argparse.ArgumentParser, what: str,
                      group: argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup | None = None) -> None:
    """--json: the command's objects as JSON Lines, in the one schema of docs/json-schema.md."""
    (group or parser).add_argument("--json", action="store_true", help=f"JSON Lines (docs/json-schema.md): {what}")


# -- outputs -------------------------------------------------------------------------------

DATA_DIR_ENV = "RMTRACE_DATA_DIR"
"""Where outputs nobody named go (default ``$XDG_DATA_HOME/rmtrace``, i.e. ~/.local/share/rmtrace)."""

_saved_outputs: list[tuple[str, str]] = []
"""Files this process created in rmtrace's directories, each with its ``latest`` link (discard_saved_outputs)."""


def add_output_arguments(parser: argparse.ArgumentParser, help: str, *, required: bool = False,
                         metavar: str = "FILE") -> None:
    """-o/--output and --force, the same for every command that writes a file."""
    parser.add_argument("-o", "--output", metavar=metavar, required=required, help=help)
    parser.add_argument("--force", action="store_true", help="overwrite an existing output (never an input)")


def data_dir(kind: str) -> str:
    """rmtrace's own directory for outputs of one kind ('replays', 'reductions'), made if missing."""
    root = os.environ.get(DATA_DIR_ENV)
    if not root:
        import platformdirs
        root = platformdirs.user_data_dir("rmtrace")
    path = os.path.join(root, kind)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise RmtraceError(f"cannot make {path} for the {kind[:-1]}'s output: {exc.strerror} "
                           f"(give -o FILE, or set {DATA_DIR_ENV})") from None
    return path


def output_path(requested: str | None, *, force: bool = False, inputs: tuple[str, ...] = (),
                kind: str | None = None, stem: str | None = None, suffix: str = ".trace", stdout: bool = False) -> str:
    """Where a command may write its output.

    ``requested`` (-o) is refused when it is one of ``inputs`` -- the same
    file by device and inode, whatever it is called, even with --force -- and
    when it exists, unless ``force``.  ``-`` is standard output where the
    command allows it (``stdout``).  Without -o the output is a new file in
    rmtrace's directory for ``kind`` (data_dir), named STEM-N SUFFIX with a
    number N no earlier output there used (``cuda-streams-3.replay.trace``),
    as rr names its traces: never a file in the working directory, never an
    older output.  A ``latest`` link there (``latest.replay.trace``) points
    at the newest.
    """
    if requested is None:
        if kind is None or stem is None:
            raise RmtraceError("say where to write it: -o FILE")
        return _new_saved_output(data_dir(kind), stem, suffix)
    if requested == "-" and stdout:
        return requested
    try:
        os.stat(requested)  # exists (and may be an input), or is new
    except FileNotFoundError:
        return requested
    except OSError as exc:
        raise RmtraceError(f"cannot write {requested}: {exc.strerror}") from None
    for source in inputs:
        if same_file(requested, source):
            raise RmtraceError(f"{requested} is the input {source}: refusing to write over it (give another -o)")
    if not force:
        raise RmtraceError(f"{requested} exists: give --force to overwrite it, or another -o")
    return requested


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same inode where both exist (links too), else the same path."""
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _new_saved_output(folder: str, stem: str, suffix: str) -> str:
    """STEM-N SUFFIX for the first unused N, created empty now so that a concurrent run picks another
    (the writer then fills it) and removed at exit if nothing was written to it; ``latest`` points at it."""
    import atexit

    for n in range(1 << 20):
        path = os.path.join(folder, f"{stem}-{n}{suffix}")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        except OSError as exc:
            raise RmtraceError(f"cannot write {path}: {exc.strerror} (give -o FILE, or set {DATA_DIR_ENV})") from None
        atexit.register(_drop_if_empty, path)
        latest = os.path.join(folder, f"latest{suffix}")
        _saved_outputs.append((path, latest))
        try:
            os.symlink(os.path.basename(path), f"{latest}.{os.getpid()}")
            os.replace(f"{latest}.{os.getpid()}", latest)
        except OSError:
            pass  # a file system without links: the printed path is enough
        return path
    raise RmtraceError(f"{folder} holds a million outputs called {stem}-N{suffix}: clean it up")


def discard_saved_outputs() -> None:
    """After an error: the files this run created in rmtrace's directories are incomplete, and nobody
    asked for them by name; remove them, and a ``latest`` link left pointing at nothing."""
    for path, latest in _saved_outputs:
        for gone in (path, latest):
            if gone == latest and os.path.exists(latest):  # follows the link: it points at another run's file
                continue
            try:
                os.unlink(gone)
            except OSError:
                pass
    _saved_outputs.clear()


def _drop_if_empty(path: str) -> None:
    try:
        if os.path.getsize(path) == 0:
            os.unlink(path)
    except OSError:
        pass
