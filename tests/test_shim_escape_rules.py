"""The RM escape layouts the shim knows (kmod_shim/shim_ioctl.c) are those of every shipped profile."""

import re

import pytest
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.kmod_shim import HERE

SOURCE = (HERE / "shim_ioctl.c").read_text()
RULE = re.compile(r"\{ (NV_ESC_\w+),\s+(\d+),\s+(\d+),\s+((?:SIZE_CLASS \| )?\w+),\s+RMT_BUF_(\w+),\s+([01]) \}")
ENUM = dict(re.findall(r"(NV_ESC_\w+)\s+=\s+(0x[0-9a-f]+|\d+),", SOURCE))
DEFINES = dict(re.findall(r"#define (NVOS\d\d_\w+|XFER_\w+)\s+(\w+)", SOURCE))
RULES = [(name, int(size), int(ptr), DEFINES.get(size_off, size_off), role) for name, size, ptr, size_off, role, _a
         in RULE.findall(SOURCE)]
CLASS_SIZED = "SIZE_CLASS | "
"""Rules whose size is the class table's (RM sizes alloc params by class); the offset after it is the fallback."""

# (escape, argument struct, pointer field, size field or None for the rights mask) per rule, by role and size
EXPECTED = {
    ("NV_ESC_RM_CONTROL", 32, "PARAMS"): ("NVOS54_PARAMETERS", "params", "paramsSize"),
    ("NV_ESC_RM_ALLOC", 32, "ALLOC_PARAMS"): ("NVOS21_PARAMETERS", "pAllocParms", "paramsSize"),
    ("NV_ESC_RM_ALLOC", 48, "ALLOC_PARAMS"): ("NVOS64_PARAMETERS", "pAllocParms", "paramsSize"),
    ("NV_ESC_RM_ALLOC", 48, "RIGHTS"): ("NVOS64_PARAMETERS", "pRightsRequested", None),
    ("NV_ESC_IOCTL_XFER_CMD", 16, "XFER"): ("nv_ioctl_xfer_t", "ptr", "size"),
}


def test_every_rule_is_checked():
    assert sorted((n, s, r) for n, s, _p, _o, r in RULES) == sorted(EXPECTED)


@pytest.mark.parametrize("version", available_profiles())
def test_rules_match_profile(version):
    profile = load_profile(version)
    for name, size, ptr, size_off, role in RULES:
        struct, ptr_field, size_field = EXPECTED[(name, size, role)]
        layout = profile.layouts[struct]
        assert layout.size == size
        assert profile.lookup("escapes", name) == int(ENUM[name], 0)
        assert layout.field(ptr_field).offset == ptr
        if size_field is None:
            assert size_off == "SIZE_RIGHTS"
        else:
            assert size_off.startswith(CLASS_SIZED) == (role == "ALLOC_PARAMS")
            assert layout.field(size_field).offset == int(size_off.removeprefix(CLASS_SIZED), 0)
            if role == "ALLOC_PARAMS":
                assert layout.field("hClass").offset == int(DEFINES["NVOS21_CLASS"])
    nvos54 = profile.layouts["NVOS54_PARAMETERS"]
    assert nvos54.field("cmd").offset == int(DEFINES["NVOS54_CMD"])
    assert nvos54.field("flags").offset == int(DEFINES["NVOS54_FLAGS"])
    assert profile.layouts["nv_ioctl_xfer_t"].field("cmd").offset == int(DEFINES["XFER_CMD"])
    assert profile.layouts["RS_ACCESS_MASK"].size == 4
