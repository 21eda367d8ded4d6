"""The construct mirrors of the shim's shared-memory files match rmtrace_ring.h (DWARF)."""

import pytest
from rmtrace.kmod_shim import ring_header_path

from rmtrace.abi_check import compare, compare_constants
from rmtrace.capture import shm
from rmtrace.dwarf import compile_probe, compile_probe_constants, compile_probe_enums
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

PROBE = "#include \"rmtrace_ring.h\"\n" + "".join(f"struct {name} probe_{name};\n" for name in shm.MIRRORS) + \
    "enum rmt_ring_state e1; enum rmt_session_state e2; enum rmt_ctab_flag e3;\n"


@pytest.fixture(scope="module")
def layouts():
    return compile_probe(PROBE, list(shm.MIRRORS), include_dirs=[ring_header_path().parent])


@pytest.mark.parametrize("name", sorted(shm.MIRRORS))
def test_mirror_matches_header(layouts, name):
    assert compare(layouts[name], shm.MIRRORS[name]) == []


def test_ring_control_keeps_producer_and_consumer_apart(layouts):
    ring = layouts["rmt_ring_ctl"]
    assert ring.field("head").offset == 64 and ring.field("tail").offset == 128 and ring.size == 256
    # what the producer writes with every record shares head's line; its slow-path counters are apart
    assert {ring.field(f).offset // 64 for f in ("head", "writing", "read_copy")} == {1}
    assert {ring.field(f).offset // 64 for f in ("read_syscall", "waits", "wait_ns")} == {3}


@pytest.mark.parametrize("c_name, prefix, py_enum", [
    ("rmt_ring_state", "RMT_RING_", shm.RingState), ("rmt_session_state", "RMT_SESSION_", shm.SessionState),
    ("rmt_ctab_flag", "RMT_CTAB_", shm.CtabFlag),
])
def test_enums_match_header(c_name, prefix, py_enum):
    enums = compile_probe_enums(PROBE, [c_name], include_dirs=[ring_header_path().parent])
    assert {k[len(prefix):]: v for k, v in enums[c_name].items()} == {m.name: int(m.value) for m in py_enum}


def test_constants_match_header():
    mirror = {"RMT_RING_MAGIC": shm.RING_MAGIC, "RMT_RING_VERSION": shm.RING_VERSION,
              "RMT_RING_CTL_SIZE": shm.RING_CTL_SIZE, "RMT_RING_MIN_SIZE": shm.RING_MIN_SIZE,
              "RMT_SESSION_MAGIC": shm.SESSION_MAGIC, "RMT_SESSION_VERSION": shm.SESSION_VERSION,
              "RMT_CTAB_MAGIC": shm.CTAB_MAGIC, "RMT_CTAB_VERSION": shm.CTAB_VERSION}
    header = compile_probe_constants("rmtrace_ring.h", mirror, [ring_header_path().parent])
    assert compare_constants(header, mirror) == []
