"""What a recording's metadata says about the machine: host, kernel, driver, GPUs."""

from __future__ import annotations

import os
import re

DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"
CLOCKSOURCE_FILE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
GPU_DIR = "/proc/driver/nvidia/gpus"
"""One folder per GPU, named by its PCI bus id, each with an ``information`` file."""
_VERSION = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def parse_driver_version(text: str | None) -> str | None:
    """'580.159.04' from /proc/driver/nvidia/version's first line, or None."""
    if not text:
        return None
    match = _VERSION.search(text.splitlines()[0])
    return match.group(1) if match else None


def parse_gpu_information(text: str, bus: str) -> dict[str, str]:
    """One /proc/driver/nvidia/gpus/<bus>/information file as a dict ('name' is its Model)."""
    info: dict[str, str] = {"bus": bus}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip().lower().replace(" ", "_")] = value.strip()
    if "model" in info:
        info["name"] = info["model"]
    return info


def gpus() -> list[dict[str, str]]:
    """Each GPU's information file, by bus id (a listing, not glob: its import is a recorder's start-up)."""
    try:
        buses = sorted(os.listdir(GPU_DIR))
    except OSError:
        return []
    out = []
    for bus in buses:
        text = read_text(os.path.join(GPU_DIR, bus, "information"))
        if text is not None:
            out.append(parse_gpu_information(text, bus))
    return out


def clocksource() -> str | None:
    """The kernel's clocksource ('tsc', 'kvm-clock', 'hpet', ...): 'tsc' means CLOCK_MONOTONIC is the
    TSC scaled, which the kernel found invariant and in step on every CPU, so the shim may read it."""
    text = read_text(CLOCKSOURCE_FILE)
    return text.strip() if text else None


def host_metadata() -> dict:
    """host, kernel, driver_version (+ its full text) and gpus, for the trace header."""
    text = read_text(DRIVER_VERSION_FILE)
    uname = os.uname()  # what socket.gethostname() and platform give, without their imports at start-up
    return {
        "host": uname.nodename,
        "kernel": uname.release,
        "machine": uname.machine,
        "driver_version": parse_driver_version(text),
        "driver_version_text": text.strip() if text else None,
        "gpus": gpus(),
    }
