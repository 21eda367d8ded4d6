"""Finding, loading and choosing the shipped driver profiles.

Profiles ship as ``data/<version>.json.zst`` inside this package.  A trace's
recorded driver version picks one (``select_profile``):

* a shipped version: that profile;
* an unshipped version of a shipped branch (580.159.04): the nearest shipped
  version of that branch (580.142), with a warning;
* an unshipped branch: the nearest shipped branch (the newer one on a tie),
  its newest version if the branch is older than the driver, else its oldest,
  with a warning;
* no version, or not a version number: the newest shipped profile, with a warning.

``--driver VERSION`` (``override``) names a shipped profile outright.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources

from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.profiles.serial import decode

from rmtrace.errors import RmtraceError

SUFFIX = ".json.zst"
_VERSION = re.compile(r"^\d+(\.\d+)*$")


def _data():
    return resources.files("rmtrace.decoders.profiles") / "data"


def version_key(version: str) -> tuple[int, ...]:
    """``"580.65.06"`` as ``(580, 65, 6)``; RmtraceError if it is not a dotted number."""
    if not _VERSION.match(version or ""):
        raise RmtraceError(f"{version!r} is not a driver version (like 580.142 or 580.65.06)")
    return tuple(int(p) for p in version.split("."))


@lru_cache(maxsize=1)
def _shipped() -> tuple[str, ...]:
    names = [p.name[: -len(SUFFIX)] for p in _data().iterdir() if p.name.endswith(SUFFIX)]
    return tuple(sorted(names, key=version_key))


def available_profiles() -> list[str]:
    """The shipped profile versions, oldest first."""
    return list(_shipped())


@cache
def load_profile(version: str) -> DriverProfile:
    """The shipped profile of exactly ``version`` (cached)."""
    if version not in _shipped():
        raise RmtraceError(f"no shipped profile for driver {version}; shipped: {', '.join(available_profiles())}")
    blob = (_data() / f"{version}{SUFFIX}").read_bytes()
    return decode(blob, f"profile {version}")


def nearest_profile(driver_version: str) -> str:
    """The shipped version a driver of ``driver_version`` is decoded with (see the module doc)."""
    target = version_key(driver_version)
    shipped = {v: version_key(v) for v in _shipped()}
    branches = sorted({k[0] for k in shipped.values()})
    branch = min(branches, key=lambda b: (abs(b - target[0]), -b))
    candidates = [v for v, k in shipped.items() if k[0] == branch]
    if branch == target[0]:
        return min(candidates, key=lambda v: (_distance(shipped[v], target), tuple(-x for x in shipped[v])))
    return candidates[-1] if branch < target[0] else candidates[0]


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return tuple(abs(x - y) for x, y in zip(a, b))


def select_profile(driver_version: str | None, override: str | None = None) -> tuple[DriverProfile, str | None]:
    """The profile to decode a trace of ``driver_version`` with, and a warning when it is not exact."""
    shipped = _shipped()
    if override is not None:
        if override not in shipped:
            raise RmtraceError(f"--driver {override}: no such shipped profile; shipped: {', '.join(shipped)}")
        warning = None
        if driver_version and driver_version != override:
            warning = f"using profile {override} (--driver) for a trace recorded with driver {driver_version}"
        return load_profile(override), warning
    if not driver_version:
        return load_profile(shipped[-1]), f"the trace records no driver version; using {shipped[-1]}, the newest profile"
    if driver_version in shipped:
        return load_profile(driver_version), None
    try:
        chosen = nearest_profile(driver_version)
    except RmtraceError:
        return (load_profile(shipped[-1]),
                f"driver version {driver_version!r} is not a version number; using {shipped[-1]}, the newest profile")
    branch = driver_version.split(".")[0]
    if chosen.split(".")[0] == branch:
        return load_profile(chosen), (f"driver {driver_version} has no shipped profile; "
                                      f"using {chosen}, the nearest of branch {branch}")
    return load_profile(chosen), (f"driver {driver_version} is of branch {branch}, which has no shipped profile; "
                                  f"using {chosen}, of the nearest branch")
