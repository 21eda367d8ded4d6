"""Support for the capture tests: the C test programs, a driver-profile double, trace checks.

The test programs (tests/c/) are built with gcc into a temporary directory:
``fakedrv.so`` stands in for the NVIDIA driver beneath the shim, ``rmprog``
talks to it as libcuda would, and the shim's test build (RMTRACE_TEST_HOOKS:
it takes the files of RMTRACE_TEST_DEVICE_DIR for the device nodes) is what
the recorder preloads (RMTRACE_SHIM).  ``python tests/capture_support.py -o FILE
[--lossy] [--ring-size N] [--duration S] [--stall S] -- CMD...`` records CMD with the
real profile TEST_PROFILE, in a process of its own (the recorder becomes a
child subreaper and reaps every child, which must not happen inside pytest).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
C_DIR = HERE / "c"
DEVICE_NODES = ("nvidiactl", "nvidia0", "nvidia-uvm", "nvidia-uvm-tools")
CTRL_GET_CLASSLIST = 0x00800201


TEST_PROFILE = "580.142"
"""The driver profile the capture tests record with: the shim's tables come from real facts."""


def recording_profile(**narrowed):
    """The real profile ``TEST_PROFILE``, with any of its tables narrowed (``controls=(cmd, ...)``):
    a DriverProfile, so a test sees exactly what the recorder sees."""
    from dataclasses import replace

    from rmtrace.decoders.profiles import load_profile
    profile = load_profile(TEST_PROFILE)
    return replace(profile, **{table: {k: getattr(profile, table)[k] for k in keys} for table, keys in narrowed.items()})


def build_programs(out: Path) -> dict[str, Path]:
    """Compile fakedrv.so, rmprog and the shim's test build into out; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    fakedrv, rmprog = out / "fakedrv.so", out / "rmprog"
    subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(fakedrv), str(C_DIR / "fakedrv.c"), "-ldl"],
                   check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(rmprog), str(C_DIR / "rmprog.c"), "-lpthread"], check=True)
    shim = _shim_build().build(out / "librmtrace_shim-test.so", test_hooks=True)
    return {"fakedrv": fakedrv, "rmprog": rmprog, "shim": shim}


def _shim_build():
    """kmod_shim/shim_build.py by path: the bench runs this module where only the source tree is."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("shim_build", HERE.parent / "kmod_shim" / "shim_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fakedrv_environment(programs: dict[str, Path], devdir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that records against fakedrv: the shim's test build, the test device dir."""
    env = dict(os.environ if base is None else base)
    env.update(RMTRACE_TEST_DEVICE_DIR=str(devdir), LD_PRELOAD=str(programs["fakedrv"]), RMTRACE_SHIM=str(programs["shim"]))
    return env


def make_device_dir(path: Path) -> Path:
    """Files that the shim (RMTRACE_TEST_DEVICE_DIR) and fakedrv take for NVIDIA devices."""
    path.mkdir(parents=True, exist_ok=True)
    for name in DEVICE_NODES:
        with open(path / name, "wb") as f:
            f.truncate(65536)
    return path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE.parent))
    from rmtrace.capture import RecordOptions, record_command
    from rmtrace.capture.ctab import check_ring_size

    parser = argparse.ArgumentParser()
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--lossy", action="store_true")
    parser.add_argument("--ring-size", type=int, default=4 << 20)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--grace", type=float, default=2.0)
    parser.add_argument("--stall", type=float, default=1.0)
    parser.add_argument("--no-tsc", action="store_true", help="time records by clock_gettime, not the TSC")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    result = record_command(RecordOptions(command=command, output=args.output, lossy=args.lossy,
                                          ring_size=check_ring_size(args.ring_size), duration_s=args.duration,
                                          grace_s=args.grace, stall_s=args.stall, tsc=not args.no_tsc,
                                          progress=False),
                            profile=recording_profile())
    for warning in result.warnings:
        print(f"rmtrace record: {warning}", file=sys.stderr)
    print(f"result stop={result.stop_reason} records={result.records} in_flight={result.in_flight} "
          f"processes={result.processes} terminated={len(result.terminated)}", file=sys.stderr)
    return result.exit_status


if __name__ == "__main__":
    sys.exit(main())
