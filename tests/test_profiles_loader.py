"""Loading shipped profiles and choosing one for a trace's driver version."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest
from rmtrace.decoders.profiles import available_profiles, load_profile, loader, select_profile
from rmtrace.decoders.profiles.serial import decode, encode

from rmtrace.errors import RmtraceError

SHIPPED = available_profiles()


def test_profiles_are_shipped_and_load():
    assert "580.142" in SHIPPED
    for version in SHIPPED:
        profile = load_profile(version)
        assert profile.version == version and profile.branch == version.split(".")[0]
        assert load_profile(version) is profile  # cached


def test_profile_is_immutable_and_hashable():
    profile = load_profile("580.142")
    with pytest.raises(FrozenInstanceError):
        profile.version = "x"
    with pytest.raises(TypeError):
        profile.controls[0] = None
    assert {profile: 1}[load_profile("580.142")] == 1


def test_serialization_round_trips():
    profile = load_profile("580.142")
    again = decode(encode(profile), "test")
    assert again == profile
    assert again.layouts.keys() == profile.layouts.keys()
    assert all(again.layouts[k] == v for k, v in profile.layouts.items())


def test_corrupt_profile_is_an_rmtrace_error():
    with pytest.raises(RmtraceError, match="not a readable driver profile"):
        decode(b"\x28\xb5\x2f\xfd garbage", "bad.json.zst")


def test_exact_version_has_no_warning():
    profile, warning = select_profile("580.142")
    assert (profile.version, warning) == ("580.142", None)


def test_unknown_version_of_a_shipped_branch_takes_the_nearest_of_its_branch():
    profile, warning = select_profile("580.159.04")
    assert profile.version == "580.142"
    assert warning == "driver 580.159.04 has no shipped profile; using 580.142, the nearest of branch 580"


def test_missing_or_unparseable_version_takes_the_newest():
    newest = SHIPPED[-1]
    profile, warning = select_profile(None)
    assert profile.version == newest and "records no driver version" in warning
    profile, warning = select_profile("five-eighty")
    assert profile.version == newest and "not a version number" in warning


def test_override_wins_and_unknown_override_lists_what_is_shipped():
    profile, warning = select_profile("575.64.05", override="580.142")
    assert profile.version == "580.142" and "--driver" in warning
    with pytest.raises(RmtraceError, match="shipped: .*580.142"):
        select_profile("580.142", override="123.45")


def test_load_of_an_unshipped_version_is_an_error():
    with pytest.raises(RmtraceError, match="no shipped profile for driver 1.2.3"):
        load_profile("1.2.3")


@pytest.mark.parametrize("driver, expected", [
    ("580.159.04", "580.142"),     # newer than the branch's newest
    ("580.70.01", "580.65.06"),    # nearer the older one
    ("580.142", "580.142"),
    ("560.35.03", "570.211.01"),   # 550 and 570 equally near: the newer branch, its oldest
    ("545.29.06", "550.163.01"),   # nearest branch 550 (newer than the driver): its oldest
    ("600.10", "595.45.04"),       # nearest branch 595 (older than the driver): its newest
    ("470.256.02", "535.288.01"),
])
def test_nearest_profile(monkeypatch, driver, expected):
    monkeypatch.setattr(loader, "_shipped", lambda: ("535.288.01", "550.163.01", "570.211.01", "575.64.05",
                                                     "580.65.06", "580.142", "590.48.01", "595.45.04"))
    assert loader.nearest_profile(driver) == expected


def test_unknown_branch_warns_with_the_branch():
    profile, warning = select_profile("1.0")
    assert warning == (f"driver 1.0 is of branch 1, which has no shipped profile; "
                       f"using {profile.version}, of the nearest branch")
