"""rmtrace record: run a command tree under the capture shim and write its trace."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from rmtrace.cli.common import add_output_arguments, output_path, positive_duration
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

if TYPE_CHECKING:
    from rmtrace.capture import RecordOptions, RecordResult

NAME = "record"
HELP = "run a command and record every RM and UVM ioctl of its process tree"
DESCRIPTION = """\
Run CMD with the capture shim preloaded into it and every process it starts,
and write each RM ioctl (/dev/nvidiactl, /dev/nvidia<N>), UVM ioctl
(/dev/nvidia-uvm, -tools), and the opens, closes, dups, mmaps, forks, execs
and exits around them into one trace, in time order.  An ioctl's enter
record is written before the call, so a command that wedges inside the
driver, or is killed there, still shows the call it was in.

Recording stops when the command and all its descendants have exited, on
Ctrl-C, or after --duration; calls still in flight are marked.  A command
still running then is ended (SIGTERM, then SIGKILL) only after the trace is
closed.  rmtrace exits with the command's status (128 + N for signal N), or as
timeout(1) and env(1) do: 124 when --duration stopped it, 130 on Ctrl-C, 126
for a program that cannot be run, 127 for one that does not exist.

By default nothing is lost: a thread whose ring is full waits for the
recorder.  --lossy drops instead and counts what it dropped.
"""

EPILOG = """\
examples:
  rmtrace record -o run1.trace -- ./my_cuda_program --size 64M
  rmtrace record -o smi.trace -- nvidia-smi -q
  rmtrace record -o wedge.trace --duration 30s -- python3 train.py
"""

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """'4M' -> 4194304; k, M and G are powers of 1024."""
    match = _SIZE.match(text)
    if not match:
        raise RmtraceError(f"not a size: {text!r} (examples: 4M, 256k, 65536)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rmtrace.capture.ctab import DEFAULT_RING_SIZE  # only when recording: no other command pays for capture
    parser.epilog = EPILOG
    add_output_arguments(parser, "the trace to write", required=True)
    parser.add_argument("--duration", metavar="TIME", type=positive_duration,
                        help="stop after this long (e.g. 30s, 1.5m; a bare number is seconds); exit 124 then")
    parser.add_argument("--lossy", action="store_true",
                        help="drop records when a ring is full (and count them) instead of making the thread wait")
    parser.add_argument("--ring-size", metavar="BYTES", default=str(DEFAULT_RING_SIZE),
                        help=f"ring per traced thread, a power of two (default {DEFAULT_RING_SIZE >> 20}M)")
    parser.add_argument("--backend", default="preload", metavar="preload|kmod[:PATH]",
                        help="kmod: also drain the kernel shim's /dev/rmtrace (or PATH: a device or a guest's "
                             "drained port), merged with CMD's records in time order; without CMD, the kernel alone "
                             "until --duration, Ctrl-C or the module detaches (docs/kernel-shim.md)")
    parser.add_argument("--driver", metavar="VERSION", help="the driver version the trace is decoded with (kmod)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...", help="the command to record")


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    backend, _, kmod_path = args.backend.partition(":")
    if backend not in ("preload", "kmod") or (backend == "preload" and kmod_path):
        raise RmtraceError(f"--backend {args.backend}: preload or kmod[:PATH]")
    if args.driver and backend != "kmod":
        raise RmtraceError("--driver names the kernel shim's driver: give it with --backend kmod (the preload "
                           "shim reads the loaded driver's version)")
    duration_s = args.duration / 1e9 if args.duration is not None else None
    inputs = _inputs(command, kmod_path)
    if backend == "kmod" and not command:
        return _record_kmod(args, kmod_path, output_path(args.output, force=args.force, inputs=inputs), duration_s)
    if not command:
        raise RmtraceError("no command to record: rmtrace record -o FILE -- CMD ARGS...")
    _import_recorder()
    from rmtrace.capture import RecordOptions, record_command
    from rmtrace.capture.ctab import check_ring_size
    options = RecordOptions(
        command=command, output=output_path(args.output, force=args.force, inputs=inputs), lossy=args.lossy,
        ring_size=check_ring_size(parse_size(args.ring_size)),
        duration_s=duration_s,
    )
    if backend == "kmod":
        result = _record_with_kmod(options, kmod_path, args.driver)
    else:
        result = record_command(options)
    for warning in result.warnings:
        print(f"rmtrace record: {warning}", file=sys.stderr)
    if sys.stderr.isatty():
        print(f"rmtrace record: wrote {args.output}: {result.records:,} records from {result.processes} "
              f"process{'es' if result.processes != 1 else ''}, stopped: {result.stop_reason}"
              + (f", {result.in_flight} call{'s' if result.in_flight != 1 else ''} in flight" if result.in_flight else ""),
              file=sys.stderr)
    if result.stop_reason == "duration":
        return ExitCode.TIMEOUT
    if result.stop_reason == "interrupted":
        return ExitCode.INTERRUPTED
    return result.exit_status


def _import_recorder() -> None:
    """Import the recorder with the cyclic collector off, then freeze what exists: the imports make tens of
    thousands of objects, none of them garbage, that the collector would otherwise walk again and again
    while they load and once more at the interpreter's exit (~15 ms of CPU of every recording:
    bench/record_start.py).  The recording's own objects are collected as before."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        import rmtrace.capture.recorder  # noqa: F401
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _inputs(command: list[str], kmod_path: str) -> tuple[str, ...]:
    """What recording reads, which -o must never name: the program it runs (as the shell finds it) and the
    kernel shim's device or drained port."""
    import shutil
    program = (command[0] if "/" in command[0] else shutil.which(command[0])) if command else None
    return tuple(p for p in (program, kmod_path) if p)


def _record_with_kmod(options: RecordOptions, path: str, driver: str | None) -> RecordResult:
    """CMD under the preload shim, with the kernel shim's records merged in (RecordOptions.feeds)."""
    from dataclasses import replace

    from rmtrace.capture import record_command
    from rmtrace.capture.host import host_metadata
    from rmtrace.capture.kmod import DEVICE, KmodFeed
    from rmtrace.capture.recorder import select_capture_profile

    profile, warning = select_capture_profile(driver or host_metadata()["driver_version"])
    feed = KmodFeed(path or DEVICE, profile)
    try:
        result = record_command(replace(options, feeds=(feed,)), profile, warning)
    finally:
        feed.close()
    result.warnings += [f"kmod: {w}" for w in feed.warnings]
    return result


def _record_kmod(args: argparse.Namespace, path: str, output: str, duration_s: float | None) -> int:
    """The kernel shim alone: drain /dev/rmtrace (or a guest's port) into a trace."""
    import signal

    from rmtrace.capture.host import host_metadata
    from rmtrace.capture.kmod import DEVICE, drain_to_trace
    from rmtrace.capture.recorder import select_capture_profile

    path = path or DEVICE
    meta = host_metadata()
    if args.driver:
        meta["driver_version"] = args.driver
    profile, _warning = select_capture_profile(meta.get("driver_version"))
    stopped = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # as the preload recorder: finish the trace, then go
        signal.signal(sig, lambda *_: stopped.append(True))
    n, reason = drain_to_trace(path, output, meta, profile=profile, stop=lambda: bool(stopped), duration_s=duration_s)
    print(f"rmtrace record: wrote {output}: {n:,} records from {path}, stopped: {reason}", file=sys.stderr)
    return {"duration": ExitCode.TIMEOUT, "interrupted": ExitCode.INTERRUPTED}.get(reason, ExitCode.OK)
