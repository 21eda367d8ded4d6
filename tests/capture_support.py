"""Support for the capture tests: the C test programs, a driver-profile double, trace checks.

The test programs (tests/c/) are built with gcc into a temporary directory:
``fakedrv.so`` stands in for the NVIDIA driver beneath the shim, ``rmprog``
talks to it as libcuda would.  ``python tests/capture_support.py -o FILE
[--lossy] [--ring-size N] [--duration S] -- CMD...`` records CMD with the
profile double below, in a process of its own (the recorder becomes a child
subreaper and reaps every child, which must not happen inside pytest).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
C_DIR = HERE / "c"
DEVICE_NODES = ("nvidiactl", "nvidia0", "nvidia-uvm", "nvidia-uvm-tools")
CTRL_GET_CLASSLIST = 0x00800201


# Doubles of the profile's UvmCommand/ClassInfo/Layout/PointerField: bench/record_overhead.py imports
# this module on the GPU machine from the source tree, where rmtrace.decoders is not importable.
@dataclass(frozen=True)
class UvmCommand:
    nr: int
    name: str
    params: str | None
    size: int | None


@dataclass(frozen=True)
class ClassInfo:
    id: int
    name: str
    alloc_params: str | None


@dataclass(frozen=True)
class Layout:
    name: str
    size: int


@dataclass(frozen=True)
class PointerField:
    offset: int
    count_offset: int | None
    count_size: int
    elem_size: int
    fixed_count: int | None
    name: str


class ProfileDouble:
    """The slice of a DriverProfile the recorder uses, with 580's facts for what the tests send."""

    version = "test-double"
    uvm = {0x30000001: UvmCommand(0x30000001, "UVM_INITIALIZE", "UVM_INITIALIZE_PARAMS", 16),
           37: UvmCommand(37, "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_PARAMS", 40),
           39: UvmCommand(39, "UVM_PAGEABLE_MEM_ACCESS", "UVM_PAGEABLE_MEM_ACCESS_PARAMS", 8),
           75: UvmCommand(75, "UVM_MM_INITIALIZE", "UVM_MM_INITIALIZE_PARAMS", 8)}
    controls = {CTRL_GET_CLASSLIST: None, 0x20800101: None, 0x20800102: None}
    classes = {0x41: ClassInfo(0x41, "NV01_ROOT_CLIENT", "NV0000_ALLOC_PARAMETERS"),  # RM copies an NvHandle
               0x80: ClassInfo(0x80, "NV01_DEVICE_0", "NV0080_ALLOC_PARAMETERS")}
    layouts: dict = {"NV0000_ALLOC_PARAMETERS": Layout("NV0000_ALLOC_PARAMETERS", 120),
                     "NV0080_ALLOC_PARAMETERS": Layout("NV0080_ALLOC_PARAMETERS", 56)}

    def embedded_pointers(self, cmd: int) -> tuple[PointerField, ...]:
        if cmd == CTRL_GET_CLASSLIST:  # {NvU32 numClasses; NvP64 classList}
            return (PointerField(8, 0, 4, 4, None, "classList"),)
        return ()


def build_programs(out: Path) -> dict[str, Path]:
    """Compile fakedrv.so and rmprog into out; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    fakedrv, rmprog = out / "fakedrv.so", out / "rmprog"
    subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(fakedrv), str(C_DIR / "fakedrv.c"), "-ldl"],
                   check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(rmprog), str(C_DIR / "rmprog.c"), "-lpthread"], check=True)
    return {"fakedrv": fakedrv, "rmprog": rmprog}


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
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    result = record_command(RecordOptions(command=command, output=args.output, lossy=args.lossy,
                                          ring_size=check_ring_size(args.ring_size), duration_s=args.duration,
                                          grace_s=args.grace, progress=False),
                            profile=ProfileDouble())
    for warning in result.warnings:
        print(f"rmtrace record: {warning}", file=sys.stderr)
    print(f"result stop={result.stop_reason} records={result.records} in_flight={result.in_flight} "
          f"processes={result.processes} terminated={len(result.terminated)}", file=sys.stderr)
    return result.exit_status


if __name__ == "__main__":
    sys.exit(main())
